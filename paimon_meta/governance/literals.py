"""The literals of a predicate's JSON, read as the values Java compares them as.

Java writes a literal as Jackson writes the Java object of its type (``PredicateBuilder
.convertToJavaObject``) and reads it back per the type of the transform's output
(``LeafPredicate.fromJson`` -> ``convertJavaObject``): numbers for the numeric types, a string for
CHAR/VARCHAR, ``LocalDate``/``LocalTime``/``LocalDateTime`` (Jackson's ISO text or its array form
``[y, m, d, ...]``, both accepted, as pypaimon 2.1.0 accepts them), an ``Instant`` for a timestamp with
local time zone (ISO text with an offset, or epoch seconds), base64 text for BINARY/VARBINARY.

Java converts loosely (``((Number) o).intValue()`` wraps a long, truncates a double); a rule that only
a loose conversion makes meaningful is refused here (:class:`PolicyRuleError`, reason ``literal``): a
policy means what it says or is not accepted.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import math
import re
from decimal import Decimal, InvalidOperation, localcontext
from typing import Any

import numpy as np

from paimon_meta.errors import PolicyRuleError
from paimon_meta.model.types import DataType, TypeRoot

T = TypeRoot
_INT_BOUNDS = {T.TINYINT: 8, T.SMALLINT: 16, T.INT: 32, T.BIGINT: 64}
_EPOCH = dt.date(1970, 1, 1)
_TIME = re.compile(r"(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?")
_LOCAL_DT = re.compile(r"(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?")


def convert(value: Any, data_type: DataType, *, rule: str, at: str) -> Any:
    """``value`` (as ``json.loads`` with ``parse_float=Decimal`` read it) as a literal of ``data_type``:
    int, float, Decimal, str, bool, bytes, ``datetime.date``, milliseconds of the day (TIME), or a
    :class:`Timestamp`. None stays None (a null literal: the comparison is false, as in Java)."""
    if value is None:
        return None
    root = data_type.root

    def bad(expected: str) -> PolicyRuleError:
        return PolicyRuleError(
            f"{rule}: literal {value!r} at {at} is not {expected} (the column is {data_type})",
            rule=rule,
            reason="literal",
            at=at,
        )

    if root is T.BOOLEAN:
        if not isinstance(value, bool):
            raise bad("a boolean")
        return value
    if root in _INT_BOUNDS:
        if isinstance(value, bool) or not isinstance(value, int):
            raise bad("an integer")
        bits = _INT_BOUNDS[root]
        if not -(2 ** (bits - 1)) <= value < 2 ** (bits - 1):
            raise bad(f"within {root.value}")
        return value
    if root in (T.FLOAT, T.DOUBLE):
        if isinstance(value, bool) or not isinstance(value, (int, Decimal)):
            raise bad("a number")
        number = float(value)
        if root is T.FLOAT:
            number = float(np.float32(number))
        if math.isinf(number) and not (isinstance(value, Decimal) and value.is_infinite()):
            raise bad(f"within {root.value}")
        return number
    if root is T.DECIMAL:
        if isinstance(value, bool) or not isinstance(value, (int, Decimal)):
            raise bad("a number")
        return _decimal(Decimal(value), data_type, bad)
    if root in (T.CHAR, T.VARCHAR):
        if not isinstance(value, str):
            raise bad("a string")
        return value
    if root in (T.BINARY, T.VARBINARY):
        if not isinstance(value, str):
            raise bad("base64 text")
        try:
            return base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raise bad("base64 text") from None
    if root is T.DATE:
        return _date(value, bad)
    if root is T.TIME:
        return _time(value, bad)
    if root is T.TIMESTAMP:
        return _timestamp(value, data_type, bad)
    if root is T.TIMESTAMP_LTZ:
        return _instant(value, data_type, bad)
    raise PolicyRuleError(
        f"{rule}: a {data_type} value cannot be compared with a literal (at {at})",
        rule=rule,
        reason="type",
        at=at,
    )


class Timestamp(tuple[int, int]):
    """A timestamp literal: (epoch seconds, nanoseconds of the second), in UTC for one with a local
    time zone, else as written (Java's ``Timestamp`` without a zone)."""

    __slots__ = ()

    @property
    def seconds(self) -> int:
        return self[0]

    @property
    def nanos(self) -> int:
        return self[1]


def _decimal(value: Decimal, data_type: DataType, bad: Any) -> Decimal:
    precision = getattr(data_type, "precision", None) or 38
    scale = getattr(data_type, "scale", None) or 0
    try:
        with localcontext() as ctx:
            ctx.prec = 200  # wide enough for any DECIMAL(38, s) and what a rule may write
            exact = value.quantize(Decimal(1).scaleb(-scale))
    except InvalidOperation:
        raise bad(f"a DECIMAL({precision}, {scale})") from None
    if exact != value or (exact != 0 and len(exact.as_tuple().digits) > precision):
        raise bad(f"a DECIMAL({precision}, {scale}) without rounding")
    return exact


def _date(value: Any, bad: Any) -> dt.date:
    try:
        if isinstance(value, str):
            return dt.date.fromisoformat(value) if len(value) == 10 else _fail()
        if isinstance(value, list) and len(value) == 3 and all(_plain_int(v) for v in value):
            return dt.date(*value)
    except ValueError:
        pass
    raise bad("a date (YYYY-MM-DD or [y, m, d])")


def _time(value: Any, bad: Any) -> int:
    parts: tuple[int, int, int, int] | None = None
    if isinstance(value, str) and (m := _TIME.fullmatch(value)):
        nanos = int((m.group(4) or "").ljust(9, "0"))
        parts = (int(m.group(1)), int(m.group(2)), int(m.group(3) or 0), nanos)
    elif isinstance(value, list) and 2 <= len(value) <= 4 and all(_plain_int(v) for v in value):
        h, mi, s, n = (*value, 0, 0)[:4]
        parts = (h, mi, s, n)
    if parts is None or not (0 <= parts[0] < 24 and 0 <= parts[1] < 60 and 0 <= parts[2] < 60):
        raise bad("a time (HH:MM[:SS[.fff]] or [h, m, s, nanos])")
    hour, minute, second, nanos = parts
    if not 0 <= nanos < 10**9 or nanos % 1_000_000:
        raise bad("a time of at most millisecond precision (Java keeps TIME in milliseconds)")
    return ((hour * 60 + minute) * 60 + second) * 1000 + nanos // 1_000_000


def _local_parts(value: Any) -> tuple[int, int, int, int, int, int, int] | None:
    if isinstance(value, str) and (m := _LOCAL_DT.fullmatch(value)):
        parts = [int(g) if g else 0 for g in m.group(1, 2, 3, 4, 5, 6)]
        return (*parts, int((m.group(7) or "").ljust(9, "0")))  # type: ignore[return-value]
    if isinstance(value, list) and 5 <= len(value) <= 7 and all(_plain_int(v) for v in value):
        y, mo, d, h, mi, sec, ns = (*value, 0, 0)[:7]
        return (y, mo, d, h, mi, sec, ns)
    return None


def _timestamp(value: Any, data_type: DataType, bad: Any) -> Timestamp:
    parts = _local_parts(value)
    expected = "a timestamp (ISO text without a zone, or [y, m, d, h, mi, s, nanos])"
    if parts is None:
        raise bad(expected)
    try:
        moment = dt.datetime(*parts[:6], tzinfo=dt.UTC)
    except ValueError:
        raise bad(expected) from None
    return _fit(Timestamp((int((moment - _EPOCH_DT).total_seconds()), parts[6])), data_type, bad)


def _instant(value: Any, data_type: DataType, bad: Any) -> Timestamp:
    expected = "an instant (ISO text with an offset, or epoch seconds)"
    if isinstance(value, (int, Decimal)) and not isinstance(value, bool):
        exact = Decimal(value)
        seconds = int(exact.to_integral_value(rounding="ROUND_FLOOR"))
        nanos = (exact - seconds) * 10**9
        if nanos != int(nanos):
            raise bad(expected)
        return _fit(Timestamp((seconds, int(nanos))), data_type, bad)
    if isinstance(value, str):
        text = value[:-1] + "+00:00" if value[-1:] in "Zz" else value
        head, sign, zone = text[:-6], text[-6:-5], text[-6:]
        parts = _local_parts(head) if sign in "+-" else None
        if parts is not None:
            try:
                offset = dt.datetime.strptime(zone, "%z").utcoffset()
                moment = dt.datetime(*parts[:6], tzinfo=dt.UTC) - (offset or dt.timedelta())
            except ValueError:
                raise bad(expected) from None
            return _fit(Timestamp((int((moment - _EPOCH_DT).total_seconds()), parts[6])), data_type, bad)
    raise bad(expected)


_EPOCH_DT = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def _fit(value: Timestamp, data_type: DataType, bad: Any) -> Timestamp:
    """Refuse a literal more precise than the column (Java would compare the extra digits; Arrow keeps
    the column's unit, so the comparison could not be exact)."""
    precision = getattr(data_type, "precision", None)
    precision = 6 if precision is None else precision
    if value.nanos % 10 ** (9 - precision):
        raise bad(f"of at most the column's precision ({precision} fractional digits)")
    return value


def _plain_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _fail() -> dt.date:
    raise ValueError("not a date")


def days(value: dt.date) -> int:
    return (value - _EPOCH).days
