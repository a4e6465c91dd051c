"""The ``paimon-meta`` command: an entry module, a context, one module per command group."""

from paimon_meta.cli.main import main

__all__ = ["main"]
