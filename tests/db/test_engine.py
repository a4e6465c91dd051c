"""URL normalisation and engine construction (no server needed)."""

from __future__ import annotations

import pytest
from sqlalchemy.pool import NullPool, QueuePool

from paimon_meta.db.engine import libpq_conninfo, make_engine, normalize_url
from paimon_meta.errors import ValidationError


@pytest.mark.parametrize(
    "url",
    ["postgresql://u:p@h:5/d", "postgres://u:p@h:5/d", "postgresql+psycopg://u:p@h:5/d"],
)
def test_urls_are_rewritten_to_psycopg3(url: str) -> None:
    assert normalize_url(url).render_as_string(hide_password=False) == "postgresql+psycopg://u:p@h:5/d"


@pytest.mark.parametrize("url", ["sqlite:///x.db", "postgresql+psycopg2://h/d", "mysql://h/d"])
def test_other_databases_are_rejected(url: str) -> None:
    with pytest.raises(ValidationError):
        normalize_url(url)


def test_libpq_conninfo_keeps_the_password() -> None:
    assert libpq_conninfo("postgresql+psycopg://u:s3cret@h:5/d") == "postgresql://u:s3cret@h:5/d"


def test_make_engine_pools() -> None:
    pooled = make_engine("postgresql://u@h/d", pool_size=3)
    assert isinstance(pooled.pool, QueuePool) and pooled.pool.size() == 3
    one_shot = make_engine("postgresql://u@h/d", poolclass=NullPool)
    assert isinstance(one_shot.pool, NullPool)
