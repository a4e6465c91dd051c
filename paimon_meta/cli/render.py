"""Rendering for the CLI: aligned text tables for people, JSON for scripts (one encoder for both)."""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import json
import math
import uuid
from collections.abc import Mapping, Sequence
from decimal import Decimal
from enum import Enum
from typing import Any

Column = str | tuple[str, str]  # key, or (key, header)

_MAX_CELL = 60


def jsonable(value: Any) -> Any:
    """``value`` as plain JSON types (datetimes as ISO 8601, UUIDs as strings, bytes as base64)."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, uuid.UUID | Decimal):
        return str(value)
    if isinstance(value, Enum):
        return jsonable(value.value)
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(value)).decode()
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if hasattr(value, "to_dict"):
        return jsonable(value.to_dict())
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, Sequence | set | frozenset):
        return [jsonable(v) for v in value]
    return str(value)


def to_json(value: Any) -> str:
    return json.dumps(jsonable(value), indent=2, sort_keys=False)


def cell(value: Any) -> str:
    """A short human rendering of one value."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float | Decimal) and not (
        isinstance(value, Decimal) and value == value.to_integral()
    ):
        f = float(value)
        return f"{f:.3f}".rstrip("0").rstrip(".") if math.isfinite(f) else str(f)
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ", timespec="seconds")
    if isinstance(value, Mapping | list | tuple):
        text = json.dumps(jsonable(value), separators=(",", ":"))
    else:
        text = str(jsonable(value))
    return text if len(text) <= _MAX_CELL else text[: _MAX_CELL - 1] + "…"


def table(rows: Sequence[Mapping[str, Any]], columns: Sequence[Column] | None = None) -> str:
    """An aligned text table of ``rows`` (all keys of the first row when ``columns`` is None)."""
    if columns is None:
        columns = list(rows[0].keys()) if rows else []
    keys = [c if isinstance(c, str) else c[0] for c in columns]
    headers = [c if isinstance(c, str) else c[1] for c in columns]
    if not rows:
        return "(none)"
    cells = [[cell(r.get(k)) for k in keys] for r in rows]
    widths = [max(len(h), *(len(row[i]) for row in cells)) for i, h in enumerate(headers)]
    numeric = [all(_is_number(r.get(k)) for r in rows) for k in keys]

    def line(values: Sequence[str]) -> str:
        parts = [v.rjust(w) if num else v.ljust(w) for v, w, num in zip(values, widths, numeric)]
        return "  ".join(parts).rstrip()

    return "\n".join([line(headers), line(["-" * w for w in widths]), *(line(r) for r in cells)])


def _is_number(value: Any) -> bool:
    return value is None or (isinstance(value, int | float | Decimal) and not isinstance(value, bool))


def key_values(pairs: Mapping[str, Any]) -> str:
    """``key: value`` lines, keys aligned."""
    if not pairs:
        return ""
    width = max(len(k) for k in pairs)
    return "\n".join(f"{k.ljust(width)}  {cell(v)}" for k, v in pairs.items())
