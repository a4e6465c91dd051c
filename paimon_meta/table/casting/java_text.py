"""Values printed the way Java prints them.

Partition directory names and casts to STRING must produce Java's text byte for byte:
``Double.toString``/``Float.toString`` (``10.0``, ``1.0E7``), ``LocalDateTime.toString``
(``2024-01-01T10:00``) and Paimon's ``DateTimeUtils.formatTimestamp``/``formatTimestampMillis``.
"""

from __future__ import annotations

import datetime as dt
import math
from decimal import ROUND_HALF_EVEN, Context, Decimal
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


def _at_least_two_digits(digits_repr: str, value: float) -> str:
    """JDK 19+ ``Double/Float.toString``: when one digit tells the value apart, the two-digit decimal
    closest to the exact value is printed instead (``4.9E-324``, not ``5.0E-324``)."""
    if not math.isfinite(value) or value == 0:
        return digits_repr
    digits = Decimal(digits_repr).normalize().as_tuple().digits
    if len(digits) > 1:
        return digits_repr
    return str(Context(prec=2, rounding=ROUND_HALF_EVEN).plus(Decimal(value)))


def java_double_to_string(value: float) -> str:
    """``Double.toString(value)`` (shortest digits, at least two, as JDK 19+)."""
    v = float(value)
    return _java_float_text(_at_least_two_digits(repr(v), v), v)


def java_float_to_string(value: float) -> str:
    """``Float.toString(value)``: the shortest digits that round-trip through float32 (at least two)."""
    f32 = float(np.float32(value))
    digits = np.format_float_positional(np.float32(value), unique=True, trim="0")
    return _java_float_text(_at_least_two_digits(digits, f32), f32)


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


def _fraction_text(nanos: int, precision: int) -> str:
    fraction = f"{nanos:09d}"
    while len(fraction) > precision and fraction.endswith("0"):
        fraction = fraction[:-1]
    return f".{fraction}" if fraction else ""


def sql_timestamp_text(moment: dt.datetime, nanos: int, precision: int) -> str:
    """``DateTimeUtils.formatTimestamp``: fraction trimmed of trailing zeros down to ``precision``."""
    ymd = f"{_int4(moment.year)}-{_int2(moment.month)}-{_int2(moment.day)}"
    return (
        f"{ymd} {moment.hour:02d}:{moment.minute:02d}:{moment.second:02d}{_fraction_text(nanos, precision)}"
    )


def _jdiv(a: int, b: int) -> int:
    """Java's int division (truncates towards zero)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def _jrem(a: int, b: int) -> int:
    return a - b * _jdiv(a, b)


def _int4(i: int) -> str:
    """``DateTimeUtils.int4``: four digit chars of ``i`` (Java arithmetic: a fifth digit is dropped, a
    negative number prints chars below '0')."""
    return "".join(chr(48 + _jrem(_jdiv(i, d), 10)) for d in (1000, 100, 10, 1))


def _int2(i: int) -> str:
    return chr(48 + _jrem(_jdiv(i, 10), 10)) + chr(48 + _jrem(i, 10))


def sql_time_text(millis: int, precision: int) -> str:
    """``DateTimeUtils.formatTimestampMillis``: ``HH:mm:ss``, then up to ``precision`` fraction digits,
    stopping after the last non-zero one (as ``java.sql.Timestamp.toString``); a negative time counts
    back from midnight, a time past a day is not wrapped."""
    while millis < 0:
        millis += 86_400_000
    h, rest = divmod(millis, 3_600_000)
    m, rest = divmod(rest, 60_000)
    s, ms = divmod(rest, 1000)
    text = f"{_int2(h)}:{_int2(m)}:{_int2(s)}"
    if precision > 0:
        text += "."
        while precision > 0:
            text += chr(48 + ms // 100)
            ms = ms % 100 * 10
            if ms == 0:
                break
            precision -= 1
    return text


def java_date_text(days: int) -> str:
    """``DateTimeUtils.formatDate``: the Julian-day algorithm with Java's int arithmetic."""
    j = days + 2440588 + 32044
    g, dg = _jdiv(j, 146097), _jrem(j, 146097)
    c = _jdiv((_jdiv(dg, 36524) + 1) * 3, 4)
    dc = dg - c * 36524
    b, db = _jdiv(dc, 1461), _jrem(dc, 1461)
    a = _jdiv((_jdiv(db, 365) + 1) * 3, 4)
    da = db - a * 365
    y = g * 400 + c * 100 + b * 4 + a
    m = _jdiv(da * 5 + 308, 153) - 2
    d = da - _jdiv((m + 4) * 153, 5) + 122
    year = y - 4800 + _jdiv(m + 2, 12)
    month = _jrem(m + 2, 12) + 1
    return f"{_int4(year)}-{_int2(month)}-{_int2(d + 1)}"


def _civil_from_days(days: int) -> tuple[int, int, int]:
    """``LocalDate.ofEpochDay``: (year, month, day) in the proleptic Gregorian calendar, any year."""
    z = days + 719468
    era = z // 146097
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = mp + 3 if mp < 10 else mp - 9
    return yoe + era * 400 + (month <= 2), month, day


def java_timestamp_text(millis: int, nano_of_milli: int, precision: int) -> str:
    """``DateTimeUtils.formatTimestamp`` of a Paimon ``Timestamp`` (epoch millis + nano of milli), for
    any year (Java's ``int4`` digits)."""
    days, time = divmod(millis, 86_400_000)
    year, month, day = _civil_from_days(days)
    h, rest = divmod(time, 3_600_000)
    m, rest = divmod(rest, 60_000)
    s, ms = divmod(rest, 1000)
    text = f"{_int4(year)}-{_int2(month)}-{_int2(day)} {_int2(h)}:{_int2(m)}:{_int2(s)}"
    return text + _fraction_text(ms * 1_000_000 + nano_of_milli, precision)
