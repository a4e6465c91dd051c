"""Values printed the way Java prints them.

Partition directory names and casts to STRING must produce Java's text byte for byte:
``Double.toString``/``Float.toString`` (``10.0``, ``1.0E7``), ``LocalDateTime.toString``
(``2024-01-01T10:00``) and Paimon's ``DateTimeUtils.formatTimestamp``/``formatTimestampMillis``.
"""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal
from typing import Any

import numpy as np

from paimon_meta.errors import ValidationError


def _java_float_text(digits_repr: str, value: float) -> str:
    """Java's ``Double.toString``/``Float.toString`` given Python's shortest round-trip digits."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    sign, digits, exponent = Decimal(digits_repr).as_tuple()
    assert isinstance(exponent, int)
    ds = "".join(map(str, digits)).rstrip("0") or "0"
    sci_exp = len(digits) + exponent - 1  # position of the leading digit
    neg = "-" if sign else ""
    if 1e-3 <= abs(value) < 1e7:
        point = sci_exp + 1  # digits before the decimal point
        if point <= 0:
            text = "0." + "0" * (-point) + ds
        elif point >= len(ds):
            text = ds + "0" * (point - len(ds)) + ".0"
        else:
            text = ds[:point] + "." + ds[point:]
        return neg + text
    mantissa = ds[0] + "." + (ds[1:] or "0")
    return f"{neg}{mantissa}E{sci_exp}"


def java_double_to_string(value: float) -> str:
    """``Double.toString(value)`` (shortest digits, as JDK 19+)."""
    return _java_float_text(repr(float(value)), float(value))


def java_float_to_string(value: float) -> str:
    """``Float.toString(value)``: the shortest digits that round-trip through float32."""
    f32 = np.float32(value)
    return _java_float_text(np.format_float_positional(f32, unique=True, trim="0"), float(f32))


_EPOCH = dt.datetime(1970, 1, 1)


def timestamp_to_datetime(value: Any) -> tuple[dt.datetime, int]:
    """A naive datetime (microsecond precision) and the nanosecond of the second for a timestamp
    value: a ``datetime``, or an object with ``millisecond``/``nano_of_millisecond`` (Paimon's
    ``Timestamp`` layout), or a ``numpy.datetime64``."""
    if isinstance(value, dt.datetime):
        naive = (
            value.replace(tzinfo=None)
            if value.tzinfo is None
            else value.astimezone(dt.UTC).replace(tzinfo=None)
        )
        return naive, naive.microsecond * 1000 + int(getattr(value, "nanosecond", 0))
    if hasattr(value, "millisecond"):
        millis = int(value.millisecond)
        nano_of_milli = int(getattr(value, "nano_of_millisecond", 0))
        base = _EPOCH + dt.timedelta(milliseconds=millis)
        return base, (millis % 1000) * 1_000_000 + nano_of_milli
    if isinstance(value, np.datetime64):
        ns = int(value.astype("datetime64[ns]").astype(np.int64))
        base = _EPOCH + dt.timedelta(microseconds=ns // 1000)
        return base, ns % 1_000_000_000
    raise ValidationError(f"cannot interpret {value!r} as a timestamp")


def local_date_time_text(moment: dt.datetime, nanos: int) -> str:
    """``java.time.LocalDateTime.toString()``: seconds only when non-zero, fraction in 3/6/9 digits."""
    text = moment.strftime("%Y-%m-%dT%H:%M")
    if moment.second or nanos:
        text += f":{moment.second:02d}"
    if nanos:
        if nanos % 1_000_000 == 0:
            text += f".{nanos // 1_000_000:03d}"
        elif nanos % 1000 == 0:
            text += f".{nanos // 1000:06d}"
        else:
            text += f".{nanos:09d}"
    return text


def sql_timestamp_text(moment: dt.datetime, nanos: int, precision: int) -> str:
    """``DateTimeUtils.formatTimestamp``: fraction trimmed of trailing zeros down to ``precision``."""
    fraction = f"{nanos:09d}"
    while len(fraction) > precision and fraction.endswith("0"):
        fraction = fraction[:-1]
    text = moment.strftime("%Y-%m-%d %H:%M:%S")
    return f"{text}.{fraction}" if fraction else text


def sql_time_text(millis: int, precision: int) -> str:
    """``DateTimeUtils.formatTimestampMillis``: ``HH:mm:ss`` plus ``precision`` fraction digits."""
    millis %= 86_400_000
    h, rest = divmod(millis, 3_600_000)
    m, rest = divmod(rest, 60_000)
    s, ms = divmod(rest, 1000)
    text = f"{h:02d}:{m:02d}:{s:02d}"
    if precision > 0:
        text += "." + f"{ms:03d}"[: min(precision, 3)].ljust(precision, "0")
    return text
