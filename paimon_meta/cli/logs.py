"""Log lines of ``paimon-meta``: text, or one JSON object a line (``--log-format json``), on stderr.

``serve`` sends uvicorn's own loggers (``uvicorn``, ``uvicorn.error``, ``uvicorn.access``) through the same
handler, so a log collector reads one format from the process.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import sys

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
#: The loggers ``serve`` writes: ours and uvicorn's.
SERVICE_LOGGERS = ("paimon_meta", "uvicorn")


class JsonFormatter(logging.Formatter):
    """``{"time", "level", "logger", "message"}`` (and ``"exception"`` with a traceback) on one line."""

    def format(self, record: logging.LogRecord) -> str:
        line = {
            "time": dt.datetime.fromtimestamp(record.created, dt.UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False)


def formatter(log_format: str) -> logging.Formatter:
    return JsonFormatter() if log_format == "json" else logging.Formatter(TEXT_FORMAT)


def handler(log_format: str) -> logging.Handler:
    out = logging.StreamHandler(sys.stderr)
    out.setFormatter(formatter(log_format))
    return out


def configure(log_format: str, level: int) -> None:
    """The root logger of a command: ``level`` and up, in ``log_format``, on stderr."""
    logging.basicConfig(level=level, handlers=[handler(log_format)], force=True)


def configure_service(log_format: str, level: str) -> None:
    """``serve``'s and uvicorn's loggers at ``level`` (debug, info, ...) on stderr, not through the root."""
    out = handler(log_format)
    for name in SERVICE_LOGGERS:
        logger = logging.getLogger(name)
        logger.setLevel(level.upper())
        logger.handlers = [out]
        logger.propagate = False
