"""Text parsed the way Java Paimon parses it when a STRING column is cast (schema evolution).

Each function is one of Java's parsers, ported value for value, and raises :class:`JavaCastError` where
Java throws (so a bad value fails the read, as it fails Java's):

* ``BinaryStringUtils``: ``toBoolean`` (``t/true/y/yes/1``, ``f/false/n/no/0``, any case, never
  trimmed), ``toLong``/``toInt``/``toShort``/``toByte`` (Hive's parser on the UTF-8 bytes: an optional
  sign, ASCII digits, a fraction that is checked and dropped, no spaces), ``toDate``, ``toTime``,
  ``toTimestamp`` (digits only, an optional leading ``-``: epoch days / millis of the day / an epoch in
  the unit of the precision);
* ``Double.parseDouble``/``Float.parseFloat`` (``FloatingDecimal``: trimmed of chars <= ``' '``, ``NaN``,
  ``Infinity``, hexadecimal, an ``f``/``d`` suffix; correctly rounded to float32 for FLOAT);
* ``new BigDecimal(String)`` and ``Decimal.fromBigDecimal`` (HALF_UP to the scale; null when the
  precision overflows);
* ``DateTimeUtils.parseDate``/``parseTime`` and ``DateTimeUtils.parseTimestampData``, whose
  ``DateTimeFormatter`` (``yyyy-[MM][M]-[dd][d][ [HH][H]:[mm][m]:[ss][s][.fraction]]['T'HH:mm[:ss[.f]]]``,
  strict parsing, SMART resolution: day 31 of a 30-day month is its last day, ``24:00:00`` the next
  midnight) is ported as ``java.time`` runs it.

Java 2.x (apache/paimon master) is the reference: Java 1.0 took no numeric TIMESTAMP text as an epoch,
no leading ``-`` as numeric (``StringUtils.isNumeric``) and no ``'T'`` separator.
"""

from __future__ import annotations

import re
import unicodedata
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation, localcontext
from fractions import Fraction

INT_MIN, INT_MAX = -(2**31), 2**31 - 1
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1
MILLIS_PER_DAY = 86_400_000


class JavaCastError(ValueError):
    """A value Java's cast throws on (the message follows Java's)."""


def wrap(value: int, bits: int) -> int:
    """Java's two's-complement narrowing of an integer to ``bits`` bits."""
    mask = (1 << bits) - 1
    value &= mask
    return value - (1 << bits) if value >> (bits - 1) else value


def java_trim(text: str) -> str:
    """``String.trim()``: strips chars <= ``' '`` (not Unicode spaces)."""
    start, end = 0, len(text)
    while start < end and text[start] <= " ":
        start += 1
    while end > start and text[end - 1] <= " ":
        end -= 1
    return text[start:end]


# ---- BinaryStringUtils -----------------------------------------------------------------------------

_TRUE = frozenset({"t", "true", "y", "yes", "1"})
_FALSE = frozenset({"f", "false", "n", "no", "0"})


def to_boolean(text: str) -> bool:
    lower = text.lower()
    if lower in _TRUE:
        return True
    if lower in _FALSE:
        return False
    raise JavaCastError(f"Cannot parse '{text}' as BOOLEAN.")


def _number_error(text: str, reason: str) -> JavaCastError:
    return JavaCastError(f"For input string: '{text}'. {reason}")


def _to_integral(text: str, low: int) -> int:
    """``BinaryStringUtils.toLong``/``toInt`` (low = the type's minimum): accumulated negatively as Java
    does, so the minimum itself parses; a fraction is checked for digits and dropped."""
    data = text.encode("utf-8")
    n = len(data)
    if n == 0:
        raise _number_error(text, "Input is empty.")
    i = 0
    negative = data[0] == 0x2D  # '-'
    if negative or data[0] == 0x2B:  # '+'
        i += 1
        if n == 1:
            raise _number_error(text, "Input has only positive or negative symbol.")
    result = 0
    stop = -(-low // 10)  # Java's MIN_VALUE / 10, truncated towards zero
    while i < n:
        b = data[i]
        i += 1
        if b == 0x2E:  # '.': the fraction is checked below and dropped
            break
        if not 0x30 <= b <= 0x39:
            raise _number_error(text, "Invalid character found.")
        if result < stop:
            raise _number_error(text, "Overflow.")
        result = result * 10 - (b - 0x30)
        if result < low:  # Java's subtraction wraps to a positive number here
            raise _number_error(text, "Overflow.")
    while i < n:
        if not 0x30 <= data[i] <= 0x39:
            raise _number_error(text, "Invalid character found.")
        i += 1
    if not negative:
        result = -result
        if result > -(low + 1):
            raise _number_error(text, "Overflow.")
    return result


def to_long(text: str) -> int:
    return _to_integral(text, LONG_MIN)


def to_int(text: str) -> int:
    return _to_integral(text, INT_MIN)


def to_short(text: str) -> int:
    value = to_int(text)
    if wrap(value, 16) != value:
        raise _number_error(text, "Overflow.")
    return value


def to_byte(text: str) -> int:
    value = to_int(text)
    if wrap(value, 8) != value:
        raise _number_error(text, "Overflow.")
    return value


def is_numeric(text: str) -> bool:
    """``StringUtils.isNumeric`` (2.x): non-empty, an optional leading ``-``, then only
    ``Character.isDigit`` chars (Unicode decimal digits of the BMP: Java sees UTF-16 units)."""
    if not text:
        return False
    start = 0
    if text[0] == "-":
        if len(text) == 1:
            return False
        start = 1
    return all(ord(c) <= 0xFFFF and unicodedata.category(c) == "Nd" for c in text[start:])


# ---- Double.parseDouble / Float.parseFloat -----------------------------------------------------------

_DECIMAL_FLOAT = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[fFdD]?", re.ASCII)
_HEX_FLOAT = re.compile(
    r"([+-])?0[xX]([0-9a-fA-F]+\.?|[0-9a-fA-F]*\.[0-9a-fA-F]+)[pP]([+-]?[0-9]+)[fFdD]?", re.ASCII
)


def _round_binary(value: Fraction, mantissa_bits: int, min_exp: int, max_exp: int) -> float:
    """``value`` rounded half-even to a binary float with ``mantissa_bits`` significant bits (subnormals
    below ``min_exp``), as a Python float; infinity when it overflows ``max_exp``."""
    negative = value < 0
    a = -value if negative else value
    if a == 0:
        return -0.0 if negative else 0.0
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1
    e = max(e, min_exp)
    ulp = Fraction(2) ** (e - mantissa_bits + 1)
    rounded = round(a / ulp) * ulp
    out = float("inf") if rounded >= Fraction(2) ** (max_exp + 1) else float(rounded)
    return -out if negative else out


def _parse_java_float(text: str, *, single: bool) -> float:
    s = java_trim(text)
    if not s:
        raise JavaCastError("empty String")
    body = s[1:] if s[0] in "+-" else s
    sign = -1.0 if s[0] == "-" else 1.0
    if body == "NaN":
        return float("nan")
    if body == "Infinity":
        return sign * float("inf")
    hexa = _HEX_FLOAT.fullmatch(s)
    if hexa:
        digits = hexa.group(2)
        whole, _, frac = digits.partition(".")
        mantissa = int((whole + frac) or "0", 16)
        # beyond +-1200 binary orders every value is infinite or zero: clamp before exponentiating
        exponent = max(-1200 - mantissa.bit_length(), min(1200, int(hexa.group(3)))) - 4 * len(frac)
        exact = Fraction(mantissa) * Fraction(2) ** exponent
        exact = -exact if hexa.group(1) == "-" else exact
        return _round_binary(exact, 24, -126, 127) if single else _round_binary(exact, 53, -1022, 1023)
    if not _DECIMAL_FLOAT.fullmatch(s):
        raise JavaCastError(f'For input string: "{text}"')
    number = s.rstrip("fFdD")
    as_double = float(number)  # correctly rounded, as FloatingDecimal
    if not single:
        return as_double
    if as_double == 0 or as_double in (float("inf"), float("-inf")):
        return as_double  # zero (signed) or infinite in double: the same in float32
    return _round_binary(Fraction(Decimal(number)), 24, -126, 127)  # no double rounding


def parse_double(text: str) -> float:
    """``Double.parseDouble``."""
    return _parse_java_float(text, single=False)


def parse_float(text: str) -> float:
    """``Float.parseFloat`` (the value, exactly representable as float32)."""
    return _parse_java_float(text, single=True)


# ---- BigDecimal / Decimal.fromBigDecimal --------------------------------------------------------------

_BIG_DECIMAL = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")  # \d: Unicode digits, as Java


def parse_big_decimal(text: str) -> Decimal:
    """``new BigDecimal(String)``: no spaces, no NaN/Infinity, an int exponent."""
    if not _BIG_DECIMAL.fullmatch(text) or any(ord(c) > 0xFFFF for c in text):
        raise JavaCastError(f"Character array {text!r} is not a valid BigDecimal")
    value = Decimal(text)
    exponent = value.as_tuple().exponent
    assert isinstance(exponent, int)
    if not INT_MIN <= -exponent <= INT_MAX:
        raise JavaCastError("Scale out of range.")
    return value


def decimal_fit(value: Decimal, precision: int, scale: int) -> Decimal | None:
    """``Decimal.fromBigDecimal``: HALF_UP to ``scale``; None when more than ``precision`` digits."""
    if not value.is_finite():
        raise JavaCastError(f"{value} is not a decimal")
    if value and value.adjusted() >= precision - scale:
        return None  # more integer digits than the type holds (rounding cannot reduce them)
    with localcontext() as ctx:
        ctx.prec = precision + 2
        try:
            rounded = value.quantize(Decimal(1).scaleb(-scale), rounding=ROUND_HALF_UP)
        except InvalidOperation:
            return None
    if len(rounded.as_tuple().digits) > precision:
        return None
    return rounded


# ---- dates and times (DateTimeUtils) ----------------------------------------------------------------


def _is_integer(text: str) -> bool:
    return bool(text) and all("0" <= c <= "9" for c in text)


def _parse_int(text: str) -> int:
    """``Integer.parseInt`` of a string of ASCII digits (overflow throws)."""
    value = int(text)
    if value > INT_MAX:
        raise JavaCastError(f'For input string: "{text}"')
    return value


def _is_legal_date(y: int, m: int, d: int) -> bool:
    if y < 0 or y > 9999 or m < 1 or m > 12 or d < 1 or d > 31:
        return False
    if m == 2 and d > 28 and not (_is_leap(y) and d == 29):
        return False
    if d == 31:
        return m in (1, 3, 5, 7, 8, 10, 12)
    return True


def _is_leap(y: int) -> bool:
    return y % 400 == 0 or (y % 4 == 0 and y % 100 != 0)


def ymd_to_unix_date(year: int, month: int, day: int) -> int:
    """``DateTimeUtils.ymdToUnixDate`` (proleptic Gregorian, year 0 included)."""
    a = (14 - month) // 12
    y = year + 4800 - a
    m = month + 12 * a - 3
    julian = day + (153 * m + 2) // 5 + 365 * y + y // 4 - y // 100 + y // 400 - 32045
    return julian - 2440588


def parse_date(text: str) -> int | None:
    """``DateTimeUtils.parseDate``: ``y[-m[-d]]`` before the first space, each part trimmed; None when
    it is not a date of years 0..9999."""
    space = text.find(" ")
    if space > 0:
        text = text[:space]
    hyphen1 = text.find("-")
    parts: list[str]
    if hyphen1 < 0:
        parts = [text]
    else:
        hyphen2 = text.find("-", hyphen1 + 1)
        if hyphen2 < 0:
            parts = [text[:hyphen1], text[hyphen1 + 1 :]]
        else:
            parts = [text[:hyphen1], text[hyphen1 + 1 : hyphen2], text[hyphen2 + 1 :]]
    values = []
    for part in parts:
        trimmed = java_trim(part)
        if not _is_integer(trimmed):
            return None
        values.append(_parse_int(trimmed))
    y, m, d = (*values, 1, 1)[:3]
    if not _is_legal_date(y, m, d):
        return None
    return ymd_to_unix_date(y, m, d)


def _parse_fraction(text: str) -> int:
    """``DateTimeUtils.parseFraction``: milliseconds from up to three digits, rounded up when the fourth
    char is >= '5' (non-digits count as 0)."""
    multiplier, result = 100, 0
    for i, c in enumerate(text):
        result += multiplier * (ord(c) - 48 if "0" <= c <= "9" else 0)
        if multiplier < 10:
            if i + 1 < len(text) and text[i + 1] >= "5":
                result += 1
            break
        multiplier //= 10
    return result


def _substring(text: str, start: int, end: int) -> str:
    if start > end:  # Java's substring throws
        raise JavaCastError(f"begin {start}, end {end}, length {len(text)}")
    return text[start:end]


def parse_time(text: str) -> int | None:
    """``DateTimeUtils.parseTime``: ``h[:m[:s[.fff]]]`` with an optional ``+``/``-`` offset, no range
    checks, int arithmetic (wrapping); None when a part is not an integer."""

    def integer(start: int, end: int) -> int | None:
        part = java_trim(_substring(text, start, end))
        return _parse_int(part) if _is_integer(part) else None

    colon1 = text.find(":")
    operator = -1
    end = len(text)
    zone = text.find("-")
    if zone < 0:
        zone = text.find("+")
        operator = 1
    zone_hour = zone_minute = 0
    if zone >= 0:
        end = zone
        colon3 = text.find(":", zone)
        if colon3 < 0:
            parsed = integer(zone + 1, len(text))
            if parsed is None:
                return None
            zone_hour = parsed
        else:
            h, m = integer(zone + 1, colon3), integer(colon3 + 1, len(text))
            if h is None or m is None:
                return None
            zone_hour, zone_minute = h, m
    second = milli = 0
    if colon1 < 0:
        hour = integer(0, end)
        minute: int | None = 0
    else:
        hour = integer(0, colon1)
        if hour is None:
            return None
        colon2 = text.find(":", colon1 + 1)
        if colon2 < 0:
            minute = integer(colon1 + 1, end)
        else:
            minute = integer(colon1 + 1, colon2)
            if minute is None:
                return None
            dot = text.find(".", colon2)
            parsed_second = integer(colon2 + 1, end if dot < 0 else dot)
            if parsed_second is None:
                return None
            second = parsed_second
            if dot >= 0:
                milli = _parse_fraction(java_trim(_substring(text, dot + 1, end)))
    if hour is None or minute is None:
        return None
    hour = wrap(hour + operator * zone_hour, 32)
    minute = wrap(minute + operator * zone_minute, 32)
    return wrap(hour * 3_600_000 + minute * 60_000 + second * 1000 + milli, 32)


def to_date(text: str) -> int:
    """``BinaryStringUtils.toDate``: epoch days."""
    if is_numeric(text):
        return to_int(text)
    days = parse_date(text)
    if days is None:
        raise JavaCastError(f"For input string: '{text}'.")
    return days


def to_time(text: str) -> int:
    """``BinaryStringUtils.toTime``: milliseconds of the day."""
    if is_numeric(text):
        return to_int(text)
    millis = parse_time(text)
    if millis is None:
        raise JavaCastError(f"For input string: '{text}'.")
    return millis


# ---- DateTimeUtils.DEFAULT_TIMESTAMP_FORMATTER ------------------------------------------------------

_YEAR, _MONTH, _DAY, _HOUR, _MINUTE, _SECOND, _NANO = range(7)
_NORMAL, _NOT_NEGATIVE, _EXCEEDS_PAD = range(3)


class _Fail(Exception):
    """The formatter's parse failed at a position (Java's ``~position``)."""


class _TimestampParser:
    """``java.time.format.DateTimeFormatter`` in strict mode for Paimon's timestamp pattern."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.fields: dict[int, int] = {}

    def _set(self, field: int, value: int) -> None:
        old = self.fields.get(field)
        if old is not None and old != value:
            raise _Fail
        self.fields[field] = value

    def _literal(self, pos: int, char: str) -> int:
        if pos >= len(self.text) or self.text[pos] != char:
            raise _Fail
        return pos + 1

    def _number(self, pos: int, field: int, min_width: int, max_width: int, style: int) -> int:
        """``NumberPrinterParser.parse`` (strict)."""
        text = self.text
        if pos >= len(text):
            raise _Fail
        negative = positive = False
        if text[pos] == "+":
            if style != _EXCEEDS_PAD:  # NORMAL and NOT_NEGATIVE refuse '+' when strict
                raise _Fail
            positive = True
            pos += 1
        elif text[pos] == "-":
            if style == _NOT_NEGATIVE:
                raise _Fail
            negative = True
            pos += 1
        start = pos
        if start + min_width > len(text):
            raise _Fail
        end = min(start + max_width, len(text))
        while pos < end and "0" <= text[pos] <= "9":
            pos += 1
        if pos < start + min_width:
            raise _Fail
        total = int(text[start:pos])
        if pos - start > 18 and total.bit_length() > 63:  # Java drops the last digit
            total //= 10
            pos -= 1
        if negative:
            if total == 0:
                raise _Fail  # '-0' is invalid in strict mode
            total = -total
        elif style == _EXCEEDS_PAD:
            if positive and pos - start <= min_width:
                raise _Fail  # '+' only when the width exceeds the pad
            if not positive and pos - start > min_width:
                raise _Fail
        self._set(field, total)
        return pos

    def _two_or_one(self, pos: int, field: int) -> int:
        """``[XX][X]``: two digits, then optionally any number of digits of the same value."""
        pos = self._optional(pos, lambda p: self._number(p, field, 2, 2, _NOT_NEGATIVE))
        return self._optional(pos, lambda p: self._number(p, field, 1, 19, _NORMAL))

    def _optional(self, pos: int, section: object) -> int:
        assert callable(section)
        saved = dict(self.fields)
        try:
            end: int = section(pos)
            return end
        except _Fail:
            self.fields = saved
            return pos

    def _fraction(self, pos: int) -> int:
        """``appendFraction(NANO_OF_SECOND, 0, 9, true)``."""
        text = self.text
        if pos >= len(text) or text[pos] != ".":
            return pos
        pos += 1
        start = pos
        while pos < min(start + 9, len(text)) and "0" <= text[pos] <= "9":
            pos += 1
        digits = text[start:pos]
        self._set(_NANO, int(digits.ljust(9, "0")) if digits else 0)
        return pos

    def _space_time(self, pos: int) -> int:
        pos = self._literal(pos, " ")
        pos = self._two_or_one(pos, _HOUR)
        pos = self._literal(pos, ":")
        pos = self._two_or_one(pos, _MINUTE)
        pos = self._literal(pos, ":")
        pos = self._two_or_one(pos, _SECOND)
        return self._fraction(pos)

    def _t_time(self, pos: int) -> int:
        pos = self._literal(pos, "T")
        pos = self._two_or_one(pos, _HOUR)
        pos = self._literal(pos, ":")
        pos = self._two_or_one(pos, _MINUTE)

        def seconds(p: int) -> int:
            p = self._literal(p, ":")
            p = self._two_or_one(p, _SECOND)
            return self._fraction(p)

        return self._optional(pos, seconds)

    def parse(self) -> tuple[int, int, int, int, int, int, int]:
        """(year, month, day, hour, minute, second, nano) after SMART resolution."""
        try:
            pos = self._number(0, _YEAR, 4, 19, _EXCEEDS_PAD)
            pos = self._literal(pos, "-")
            pos = self._two_or_one(pos, _MONTH)
            pos = self._literal(pos, "-")
            pos = self._two_or_one(pos, _DAY)
            pos = self._optional(pos, self._space_time)
            pos = self._optional(pos, self._t_time)
        except _Fail:
            raise JavaCastError(f"Text '{self.text}' could not be parsed") from None
        if pos != len(self.text):
            raise JavaCastError(f"Text '{self.text}' could not be parsed, unparsed text found at index {pos}")
        return self._resolve()

    def _resolve(self) -> tuple[int, int, int, int, int, int, int]:
        f = self.fields
        year, month, day = f[_YEAR], f.get(_MONTH), f.get(_DAY)
        if not 1 <= year <= 999_999_999:  # YEAR_OF_ERA, then YEAR of a LocalDate
            raise JavaCastError(f"Text '{self.text}' could not be parsed: Invalid value for YearOfEra")
        if month is None or day is None or not 1 <= month <= 12 or not 1 <= day <= 31:
            raise JavaCastError(f"Text '{self.text}' could not be parsed: Invalid date")
        if month in (4, 6, 9, 11):
            day = min(day, 30)  # ResolverStyle.SMART: the last day of the month
        elif month == 2:
            day = min(day, 29 if _is_leap(year) else 28)
        hour, minute, second, nano = f.get(_HOUR), f.get(_MINUTE), f.get(_SECOND), f.get(_NANO)
        if hour is None:
            return year, month, day, 0, 0, 0, 0
        minute, second, nano = minute or 0, second or 0, nano or 0
        if not 0 <= minute <= 59 or not 0 <= nano <= 999_999_999:
            raise JavaCastError(f"Text '{self.text}' could not be parsed: Invalid time")
        if hour == 24 and minute == 0 and second == 0 and nano == 0:
            return year, month, day + 1, 0, 0, 0, 0  # end of day: the next midnight (day may overflow)
        if not 0 <= hour <= 23 or not 0 <= second <= 59:
            raise JavaCastError(f"Text '{self.text}' could not be parsed: Invalid time")
        return year, month, day, hour, minute, second, nano


def _epoch_millis(date: tuple[int, int, int], hour: int, minute: int, second: int) -> int:
    """Epoch millis of a wall-clock time; the day may run past its month (24:00 of its last day)."""
    year, month, day = date
    days = ymd_to_unix_date(year, month, 1) + day - 1
    return days * MILLIS_PER_DAY + ((hour * 60 + minute) * 60 + second) * 1000


def parse_timestamp(text: str, precision: int) -> tuple[int, int]:
    """``DateTimeUtils.parseTimestampData``: (epoch millis, nano of milli), the fraction floored to
    ``precision`` digits; the text is wall-clock time (UTC for TIMESTAMP_LTZ)."""
    year, month, day, hour, minute, second, nano = _TimestampParser(text).parse()
    step = 10 ** (9 - precision)
    nano = nano // step * step
    millis = _epoch_millis((year, month, day), hour, minute, second) + nano // 1_000_000
    return millis, nano % 1_000_000


def to_timestamp(text: str, precision: int, *, local_zone: bool) -> tuple[int, int]:
    """``BinaryStringUtils.toTimestamp``: (epoch millis, nano of milli). TIMESTAMP takes a numeric text
    as an epoch in the unit of its precision (0, 3, 6 or 9 only); TIMESTAMP_LTZ parses it always."""
    if not local_zone and is_numeric(text):
        epoch = to_long(text)
        if precision == 0:
            return wrap(epoch * 1000, 64), 0
        if precision == 3:
            return epoch, 0
        if precision == 6:
            millis, micros = divmod(epoch, 1000)
            return millis, micros * 1000
        if precision == 9:
            return divmod(epoch, 1_000_000)
        raise JavaCastError(f"Unsupported precision: {precision}")
    return parse_timestamp(text, precision)
