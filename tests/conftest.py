"""Fixtures live in tests/fixtures/ plugins; this file only registers them."""

pytest_plugins = [
    "tests.fixtures.scheduling",
    "tests.fixtures.golden",
    "tests.fixtures.s3",
    "tests.fixtures.postgres",
    "tests.fixtures.interop",
    "tests.fixtures.spark",
    "tests.fixtures.service",
    "tests.fixtures.java",
    "tests.fixtures.interop_tables",
    "tests.fixtures.oidc",
    "tests.fixtures.tls",
    "tests.fixtures.vending",
    "tests.fixtures.nats",
]
