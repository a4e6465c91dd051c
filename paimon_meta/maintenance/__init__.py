"""Maintenance run by the service from its commit log: a queue in Postgres, the debts the commit log
feeds, the actions Paimon's own table options drive, and the workers (docs/DESIGN.md, "Maintenance").

The package sits above ``ops`` (whose expiration and orphan cleanup it runs) and ``table.compact``, and
below ``service`` and ``cli`` (which start its workers); an import-linter contract keeps it there.
"""
