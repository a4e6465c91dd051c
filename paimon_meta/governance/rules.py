"""Paimon's predicate JSON (row filters) and transform JSON (column masks), parsed into typed objects and
bound to a table's columns, failing closed.

The shapes are Java's (``org.apache.paimon.predicate``, ``JsonSerdeUtil``; pypaimon 2.1.0 reads the same):

* a predicate is ``{"kind": "LEAF", "transform": T, "function": F, "literals": [...]}`` or
  ``{"kind": "COMPOUND", "function": "AND"|"OR", "children": [...]}``;
* a transform is ``{"name": N, ...}``: ``FIELD_REF`` and ``CAST`` (``"type"``) and the date parts
  carry ``"fieldRef": {"index", "name", "type"}``; the string functions carry ``"inputs"`` (field refs,
  string literals, nulls; positions as integers), ``TRIM`` a ``"trimFlag"``, ``PAD`` a ``"direction"``;
  ``NULL`` nothing.

:func:`parse_row_filter` and :func:`parse_column_mask` take the table's columns: a field is found by its
name (as Java and pypaimon rebind a rule by name before applying it), its type must be the type the rule
was written for, each function and transform must get the number and kinds of arguments it takes, each
literal must be a value of the compared type. Anything else (and anything this module cannot evaluate
exactly as Java does: a transform or function outside :data:`TRANSFORMS`/:data:`FUNCTIONS`) raises
:class:`PolicyRuleError` naming it. Unknown members of a JSON object are refused too: a member this
parser would drop might narrow the rule.

:func:`to_json` writes the canonical form: field references carry the column's current position and type.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, TypeAlias

from paimon_meta.errors import PolicyRuleError, ValidationError
from paimon_meta.governance import literals
from paimon_meta.model.types import (
    BOOLEAN,
    INT,
    STRING,
    AtomicType,
    DataField,
    DataType,
    TypeRoot,
    parse_type,
)
from paimon_meta.table.casting.casts import resolve as resolve_cast

T = TypeRoot
ROW_FILTER = "row filter"
COLUMN_MASK = "column mask"
#: The largest rule the protocol allows (60 KiB of UTF-8) and the deepest nesting this parser follows.
MAX_RULE_BYTES = 61440
MAX_DEPTH = 256

STRINGS = (T.CHAR, T.VARCHAR)
INTEGERS = (T.TINYINT, T.SMALLINT, T.INT, T.BIGINT)
FLOATS = (T.FLOAT, T.DOUBLE)
DATETIMES = (T.DATE, T.TIMESTAMP, T.TIMESTAMP_LTZ)
#: Types a comparison orders as Java's ``compareTo`` does (numbers, strings and bytes bytewise, times).
ORDERED: tuple[TypeRoot, ...] = (
    T.BOOLEAN, *INTEGERS, *FLOATS, T.DECIMAL, *STRINGS, T.BINARY, T.VARBINARY, T.DATE, T.TIME, T.TIMESTAMP,
    T.TIMESTAMP_LTZ,
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class FieldRef:
    """A column: its position in the table (canonical form), name and current type."""

    index: int
    name: str
    type: DataType

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "name": self.name, "type": self.type.to_json()}


#: A transform's argument: a column, a string literal, an integer position (as written: int or text),
#: or null.
Input: TypeAlias = FieldRef | str | int | None


@dataclass(frozen=True, slots=True)
class Transform:
    """One transform of :data:`TRANSFORMS`, bound: ``inputs`` (for ``FIELD_REF``, ``CAST`` and the date
    parts, the one column), ``cast_to`` (``CAST``), ``flag`` (``TRIM``'s ``trimFlag``, ``PAD``'s
    ``direction``), ``output``: the type it produces."""

    name: str
    inputs: tuple[Input, ...]
    output: DataType
    cast_to: DataType | None = None
    flag: str | None = None

    def columns(self) -> list[str]:
        return [i.name for i in self.inputs if isinstance(i, FieldRef)]

    def to_json(self) -> dict[str, Any]:
        spec = TRANSFORMS[self.name]
        out: dict[str, Any] = {"name": self.name}
        if spec.layout == "ref":
            ref = self.inputs[0]
            assert isinstance(ref, FieldRef)
            out["fieldRef"] = ref.to_json()
        elif spec.layout == "inputs":
            out["inputs"] = [i.to_json() if isinstance(i, FieldRef) else i for i in self.inputs]
        if self.cast_to is not None:
            out["type"] = self.cast_to.to_json()
        if spec.flag is not None:
            out[spec.flag] = self.flag
        return out


@dataclass(frozen=True, slots=True)
class Leaf:
    """``function(transform, literals)``; ``literals`` as :func:`literals.convert` reads them,
    ``written``: as the rule wrote them (the canonical JSON keeps their spelling)."""

    transform: Transform
    function: str
    literals: tuple[Any, ...]
    written: tuple[Any, ...]

    def columns(self) -> list[str]:
        return self.transform.columns()


@dataclass(frozen=True, slots=True)
class Compound:
    """``AND`` or ``OR`` of at least one child (Java's ``CompoundPredicate``)."""

    function: str
    children: tuple[Leaf | Compound, ...]

    def columns(self) -> list[str]:
        return [c for child in self.children for c in child.columns()]


Predicate: TypeAlias = Leaf | Compound


# ---- what is supported -----------------------------------------------------------------------------


#: Argument kinds: ``str`` a string column, literal or null; ``pos`` an INT column, an integer (or its
#: text, as Java's ``Integer.parseInt`` reads it) or null.
@dataclass(frozen=True, slots=True)
class _Spec:
    layout: str  # "ref": one "fieldRef"; "inputs": a list; "none": no argument
    kinds: tuple[str, ...] = ()  # per input position; the last repeats for variadic transforms
    arity: tuple[int, int] = (1, 1)  # inclusive bounds on the number of inputs
    output: DataType | None = None  # None: FIELD_REF's and CAST's depend on their column and target
    flag: str | None = None  # the member naming a mode
    flags: tuple[str, ...] = ()
    ref_types: tuple[TypeRoot, ...] = ()  # for "ref" layouts: the column types taken (empty: any)


_DATE_PARTS = (
    "YEAR", "MONTH", "DAY", "HOUR", "MINUTE", "SECOND", "QUARTER", "DAY_OF_YEAR", "WEEKDAY",
    "ISO_DAY_OF_WEEK", "DAY_OF_WEEK", "WEEK", "YEAR_OF_WEEK",
)  # fmt: skip
#: Every transform this module evaluates (the set pypaimon 2.1.0 applies); any other name is refused.
TRANSFORMS: dict[str, _Spec] = {
    "FIELD_REF": _Spec("ref"),
    "CAST": _Spec("ref"),
    "NULL": _Spec("none", arity=(0, 0), output=BOOLEAN()),
    "UPPER": _Spec("inputs", ("str",), output=STRING()),
    "LOWER": _Spec("inputs", ("str",), output=STRING()),
    "CONCAT": _Spec("inputs", ("str",), (1, 1 << 16), STRING()),
    "CONCAT_WS": _Spec("inputs", ("str",), (2, 1 << 16), STRING()),
    "LENGTH": _Spec("inputs", ("str",), output=INT()),
    "BIT_LENGTH": _Spec("inputs", ("str",), output=INT()),
    "TRANSLATE": _Spec("inputs", ("str", "str", "str"), (3, 3), STRING()),
    "SUBSTRING": _Spec("inputs", ("str", "pos", "pos"), (2, 3), STRING()),
    "OVERLAY": _Spec("inputs", ("str", "str", "pos", "pos"), (3, 4), STRING()),
    "PAD": _Spec("inputs", ("str", "pos", "str"), (3, 3), STRING(), "direction", ("LEFT", "RIGHT")),
    "TRIM": _Spec("inputs", ("str", "str"), (1, 2), STRING(), "trimFlag", ("BOTH", "LEADING", "TRAILING")),
    **{p: _Spec("ref", output=INT(), ref_types=DATETIMES) for p in _DATE_PARTS},
}


@dataclass(frozen=True, slots=True)
class _Function:
    literals: tuple[int, int]  # inclusive bounds on the number of literals
    types: tuple[TypeRoot, ...] | None  # the transform output types taken (None: any)


#: Every leaf function this module evaluates (pypaimon 2.1.0's set); any other name is refused.
FUNCTIONS: dict[str, _Function] = {
    **{f: _Function((1, 1), ORDERED) for f in ("EQUAL", "NOT_EQUAL", "LESS_THAN", "LESS_OR_EQUAL")},
    **{f: _Function((1, 1), ORDERED) for f in ("GREATER_THAN", "GREATER_OR_EQUAL")},
    **{f: _Function((2, 2), ORDERED) for f in ("BETWEEN", "NOT_BETWEEN")},
    **{f: _Function((0, 1 << 16), ORDERED) for f in ("IN", "NOT_IN")},
    **{f: _Function((1, 1), STRINGS) for f in ("STARTS_WITH", "ENDS_WITH", "CONTAINS", "LIKE")},
    **{f: _Function((0, 0), None) for f in ("IS_NULL", "IS_NOT_NULL", "TRUE", "FALSE")},
    "IS_NAN": _Function((0, 0), FLOATS),
}


# ---- entry points ------------------------------------------------------------------------------------


def parse_row_filter(text: str, fields: Sequence[DataField]) -> Predicate:
    """A row filter's predicate JSON bound to ``fields`` (the table's columns); PolicyRuleError naming
    what is wrong."""
    data = _load(text, ROW_FILTER)
    return _Binder(ROW_FILTER, fields).predicate(data, "$", 0)


def parse_column_mask(text: str, fields: Sequence[DataField], column: str) -> Transform:
    """A column mask's transform JSON bound to ``fields``, whose output can replace ``column``."""
    binder = _Binder(COLUMN_MASK, fields)
    target = binder.field(column, "onColumn")
    transform = binder.transform(_load(text, COLUMN_MASK), "$", 0)
    if transform.name != "NULL" and not _same_family(transform.output, target.type):
        raise PolicyRuleError(
            f"column mask on {column!r}: {transform.name} produces {transform.output}, the column is "
            f"{target.type}",
            rule=COLUMN_MASK,
            reason="type",
            name=transform.name,
            column=column,
        )
    return transform


def to_json(rule: Predicate | Transform) -> str:
    """The canonical JSON of a bound rule (compact, field references with their current position and
    type, literals as written)."""
    return json.dumps(_predicate_json(rule) if not isinstance(rule, Transform) else rule.to_json(),
                      separators=(",", ":"), default=_json_default)  # fmt: skip


def _predicate_json(p: Predicate) -> dict[str, Any]:
    if isinstance(p, Compound):
        return {
            "kind": "COMPOUND",
            "function": p.function,
            "children": [_predicate_json(c) for c in p.children],
        }
    return {
        "kind": "LEAF",
        "transform": p.transform.to_json(),
        "function": p.function,
        "literals": list(p.written),
    }


def _json_default(value: Any) -> Any:
    if isinstance(value, Decimal):
        return float(value) if value != value.to_integral_value() else int(value)
    raise TypeError(f"not JSON: {value!r}")


# ---- parsing ---------------------------------------------------------------------------------------------


def _load(text: str, rule: str) -> Any:
    if not isinstance(text, str) or not text.strip():
        raise PolicyRuleError(f"{rule}: empty rule", rule=rule, reason="json")
    if len(text.encode("utf-8")) > MAX_RULE_BYTES:
        raise PolicyRuleError(f"{rule}: longer than {MAX_RULE_BYTES} bytes", rule=rule, reason="json")
    try:
        return json.loads(text, parse_float=Decimal, parse_constant=_no_constant, object_pairs_hook=_unique)
    except (ValueError, RecursionError) as e:
        raise PolicyRuleError(f"{rule}: malformed JSON: {e}", rule=rule, reason="json") from None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"member {key!r} appears twice")
        out[key] = value
    return out


class _Binder:
    def __init__(self, rule: str, fields: Sequence[DataField]) -> None:
        self.rule = rule
        self.fields = {f.name: (i, f) for i, f in enumerate(fields)}

    def error(self, message: str, reason: str, at: str, **fields: Any) -> PolicyRuleError:
        return PolicyRuleError(
            f"{self.rule}: {message} (at {at})", rule=self.rule, reason=reason, at=at, **fields
        )

    def obj(self, data: Any, at: str, allowed: set[str]) -> dict[str, Any]:
        if not isinstance(data, dict):
            raise self.error(f"expected a JSON object, got {_short(data)}", "json", at)
        extra = set(data) - allowed
        if extra:
            raise self.error(f"unknown member(s) {sorted(extra)}", "json", at)
        return data

    def field(self, name: str, at: str) -> DataField:
        hit = self.fields.get(name)
        if hit is None:
            raise self.error(
                f"column {name!r} does not exist (renamed or dropped?)", "column", at, column=name
            )
        return hit[1]

    def ref(self, data: Any, at: str) -> FieldRef:
        d = self.obj(data, at, {"index", "name", "type"})
        name, index = d.get("name"), d.get("index")
        if not isinstance(name, str):
            raise self.error("a field reference needs a string 'name'", "json", at)
        if isinstance(index, bool) or not isinstance(index, int):
            raise self.error(f"field {name!r} needs an integer 'index'", "json", at, column=name)
        try:
            written = parse_type(d.get("type"))
        except ValidationError as e:
            raise self.error(f"field {name!r} has no valid 'type': {e}", "json", at, column=name) from None
        position, field = self.fields.get(name, (None, None))
        if field is None or position is None:
            raise self.error(
                f"column {name!r} does not exist (renamed or dropped?)", "column", at, column=name
            )
        if not _same_family(written, field.type):
            raise self.error(
                f"column {name!r} is {field.type}, the rule was written for {written}",
                "type",
                at,
                column=name,
            )
        return FieldRef(position, name, field.type)

    # -- predicates --

    def predicate(self, data: Any, at: str, depth: int) -> Predicate:
        if depth > MAX_DEPTH:
            raise self.error(f"nested deeper than {MAX_DEPTH}", "json", at)
        kind = data.get("kind") if isinstance(data, dict) else None
        if kind == "COMPOUND":
            d = self.obj(data, at, {"kind", "function", "children"})
            function, children = d.get("function"), d.get("children")
            if function not in ("AND", "OR"):
                raise self.error(f"unknown compound function {function!r}", "unknown", at, name=str(function))
            if not isinstance(children, list) or not children:
                raise self.error(f"{function} needs a non-empty list of children", "arity", at, name=function)
            return Compound(
                function,
                tuple(self.predicate(c, f"{at}.children[{i}]", depth + 1) for i, c in enumerate(children)),
            )
        if kind != "LEAF":
            raise self.error(f"unknown predicate kind {_short(kind)}", "unknown", at)
        d = self.obj(data, at, {"kind", "transform", "function", "literals"})
        name = d.get("function")
        function = FUNCTIONS.get(name) if isinstance(name, str) else None
        if function is None or not isinstance(name, str):
            raise self.error(
                f"leaf function {_short(name)} is not supported", "unsupported", at, name=str(name)
            )
        transform = self.transform(d.get("transform"), f"{at}.transform", depth + 1)
        written = d.get("literals", [])
        if not isinstance(written, list):
            raise self.error(f"{name}: 'literals' must be a list", "json", at, name=name)
        low, high = function.literals
        if not low <= len(written) <= high:
            expected = str(low) if low == high else f"{low} to {high}"
            raise self.error(
                f"{name} takes {expected} literal(s), got {len(written)}", "arity", at, name=name
            )
        output = transform.output
        if function.types is not None and transform.name != "NULL" and output.root not in function.types:
            raise self.error(f"{name} does not apply to a {output} value", "type", at, name=name)
        values = tuple(
            literals.convert(v, output, rule=self.rule, at=f"{at}.literals[{i}]")
            for i, v in enumerate(written)
        )
        if name == "LIKE" and values[0] is not None:
            _check_like(values[0], self, at)
        return Leaf(transform, name, values, tuple(written))

    # -- transforms --

    def transform(self, data: Any, at: str, depth: int) -> Transform:
        if depth > MAX_DEPTH:
            raise self.error(f"nested deeper than {MAX_DEPTH}", "json", at)
        name = data.get("name") if isinstance(data, dict) else None
        spec = TRANSFORMS.get(name) if isinstance(name, str) else None
        if spec is None or name is None:
            raise self.error(
                f"transform {_short(name)} is not one this service evaluates (supported: "
                f"{', '.join(sorted(TRANSFORMS))})",
                "unsupported",
                at,
                name=str(name),
            )
        if spec.layout == "none":
            self.obj(data, at, {"name"})
            return Transform(name, (), BOOLEAN())
        if spec.layout == "ref":
            d = self.obj(data, at, {"name", "fieldRef", "type"} if name == "CAST" else {"name", "fieldRef"})
            ref = self.ref(d.get("fieldRef"), f"{at}.fieldRef")
            if name == "FIELD_REF":
                return Transform(name, (ref,), ref.type)
            if name == "CAST":
                return self._cast(d, ref, at)
            if ref.type.root not in spec.ref_types:
                raise self.error(
                    f"{name} does not apply to column {ref.name!r} ({ref.type})", "type", at, name=name
                )
            assert spec.output is not None
            return Transform(name, (ref,), spec.output)
        allowed = {"name", "inputs"} | ({spec.flag} if spec.flag else set())
        d = self.obj(data, at, allowed)
        raw = d.get("inputs")
        if not isinstance(raw, list):
            raise self.error(f"{name} needs a list of 'inputs'", "json", at, name=name)
        low, high = spec.arity
        if not low <= len(raw) <= high:
            expected = (
                str(low) if low == high else f"{low} to {high}" if high < 1 << 16 else f"at least {low}"
            )
            raise self.error(f"{name} takes {expected} input(s), got {len(raw)}", "arity", at, name=name)
        inputs = tuple(
            self.input(v, spec.kinds[min(i, len(spec.kinds) - 1)], f"{at}.inputs[{i}]", name)
            for i, v in enumerate(raw)
        )
        flag = None
        if spec.flag is not None:
            flag = d.get(spec.flag)
            if flag not in spec.flags:
                raise self.error(
                    f"{name} needs '{spec.flag}' in {list(spec.flags)}, got {_short(flag)}",
                    "json",
                    at,
                    name=name,
                )
        assert spec.output is not None
        return Transform(name, inputs, spec.output, flag=flag)

    def input(self, value: Any, kind: str, at: str, name: str) -> Input:
        if value is None:
            return None
        if isinstance(value, dict):
            ref = self.ref(value, at)
            wanted = STRINGS if kind == "str" else (T.INT,)
            if ref.type.root not in wanted:
                what = "a string" if kind == "str" else "an INT"
                raise self.error(
                    f"{name}: column {ref.name!r} is {ref.type}, not {what}",
                    "type",
                    at,
                    name=name,
                    column=ref.name,
                )
            return ref
        if kind == "str":
            if not isinstance(value, str):
                raise self.error(f"{name}: {_short(value)} is not a string literal", "literal", at, name=name)
            return value
        if _java_int(value) is None:
            raise self.error(f"{name}: {_short(value)} is not an integer position", "literal", at, name=name)
        position: int | str = value
        return position

    def _cast(self, d: dict[str, Any], ref: FieldRef, at: str) -> Transform:
        try:
            target = parse_type(d.get("type"))
        except ValidationError as e:
            raise self.error(f"CAST needs a valid target 'type': {e}", "json", at, name="CAST") from None
        if (
            not (ref.type.root in ORDERED and target.root in ORDERED)
            or resolve_cast(ref.type, target) is None
        ):
            raise self.error(f"CAST from {ref.type} to {target} is not supported", "type", at, name="CAST")
        return Transform("CAST", (ref,), target, cast_to=target)


def position_value(value: Input) -> int | None:
    """A literal position as Java reads it (an int, or text ``Integer.parseInt`` accepts); None for a
    column or null."""
    return None if value is None or isinstance(value, FieldRef) else _java_int(value)


_JAVA_INT = re.compile(r"[+-]?[0-9]+")


def _java_int(value: Any) -> int | None:
    """An int as Java's ``Integer.parseInt`` reads it (ASCII digits here), within int range; else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str) and _JAVA_INT.fullmatch(value):
        value = int(value)
    if not isinstance(value, int):
        return None
    return value if -(2**31) <= value < 2**31 else None


def _same_family(a: DataType, b: DataType) -> bool:
    """Whether a rule written for type ``a`` applies to a column of type ``b``: character strings of any
    length count as one type, and so do byte strings; otherwise the same type (precision and scale
    included), nullability aside."""
    if a.root in STRINGS and b.root in STRINGS:
        return True
    if a.root in (T.BINARY, T.VARBINARY) and b.root in (T.BINARY, T.VARBINARY):
        return True
    if a.root is not b.root:
        return False
    if isinstance(a, AtomicType) and isinstance(b, AtomicType):
        return (a.precision, a.scale) == (b.precision, b.scale)
    return a.with_nullable(True) == b.with_nullable(True)


def _check_like(pattern: str, binder: _Binder, at: str) -> None:
    """Java's ``Like.sqlToRegexLike``: a backslash escapes only ``_``, ``%`` or itself."""
    i = 0
    while i < len(pattern):
        if pattern[i] == "\\":
            if i + 1 >= len(pattern) or pattern[i + 1] not in "_%\\":
                raise binder.error(
                    f"LIKE pattern {pattern!r}: invalid escape at {i}", "literal", at, name="LIKE"
                )
            i += 1
        i += 1


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
