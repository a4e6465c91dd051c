"""paimon_meta: Apache Paimon's commit path over a Postgres metastore lock, with an event-sourced commit log."""

__version__ = "0.1.0"
