"""paimon_meta: Apache Paimon's commit path over a Postgres metastore lock, with an event log."""

__version__ = "0.1.0"
