"""The one declarative base of the metastore schema.

Constraint names are fixed by a naming convention from the first migration on, so later migrations can
drop or alter constraints by a name that is the same on every database (habit taken from Prefect's
database layer). Java Paimon's own DDL names its primary keys ``<table>_pkey``; the initial migration
renames them to this convention when it adopts tables Java created first.
"""

from __future__ import annotations

from sqlalchemy import MetaData
from sqlalchemy.orm import DeclarativeBase

NAMING_CONVENTION: dict[str, str] = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    """Declarative base whose metadata carries :data:`NAMING_CONVENTION`."""

    metadata = MetaData(naming_convention=NAMING_CONVENTION)
