"""A Paimon predicate, as Java serializes it (``JsonSerdeUtil.toFlatJson(predicate)``), evaluated on
partition specs: what ``listPartitionsByFilter`` filters by.

The JSON is Java's ``Predicate`` tree: ``{"kind": "COMPOUND", "function": "AND"|"OR", "children": [...]}``
and ``{"kind": "LEAF", "transform": {"name": "FIELD_REF", "fieldRef": {"index", "name", "type"}},
"function": "EQUAL", "literals": [...]}`` (literals as Java objects: strings, numbers, booleans).

The protocol lets the answer be a superset of the matching partitions (clients evaluate the predicate
again), so a part this module cannot decide is taken as "may match" rather than refused: a transform
other than a field reference, a function Java has but this module does not evaluate (``LIKE``, the
array functions), a column type other than strings, integers and booleans, a literal of another JSON
type. What is refused (``ValidationError`` naming ``filter``): text that is not such a tree, a function
Java does not have, a column that is not a partition key.

A comparison with a null partition value (``partition.default-name``) is SQL's unknown. The tree has
no NOT, so an unknown excludes a partition exactly as false does (unknown AND x is false or unknown,
unknown OR x is x or unknown): it is taken as false.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from enum import Enum
from typing import Any

from paimon_meta.errors import ValidationError
from paimon_meta.model.schema import TableSchema
from paimon_meta.model.types import TypeRoot

FIELD = "filter"


class Outcome(Enum):
    """A predicate's value on one partition: true, false (SQL's unknown included: see the module's
    docstring), or MAYBE (not decided here)."""

    TRUE = "true"
    FALSE = "false"
    MAYBE = "maybe"


#: Java's ``LeafFunction`` names (``LeafFunction.fromJson``'s registry).
JAVA_LEAF_FUNCTIONS = frozenset(
    {
        "EQUAL",
        "NOT_EQUAL",
        "LESS_THAN",
        "LESS_OR_EQUAL",
        "GREATER_THAN",
        "GREATER_OR_EQUAL",
        "IS_NULL",
        "IS_NOT_NULL",
        "STARTS_WITH",
        "ENDS_WITH",
        "CONTAINS",
        "ARRAY_CONTAINS",
        "ARRAYS_OVERLAP",
        "ARRAY_CONTAINS_ALL",
        "LIKE",
        "IN",
        "NOT_IN",
        "BETWEEN",
        "NOT_BETWEEN",
        "TRUE",
        "FALSE",
    }
)
_INTEGERS = frozenset({TypeRoot.TINYINT, TypeRoot.SMALLINT, TypeRoot.INT, TypeRoot.BIGINT})
_STRINGS = frozenset({TypeRoot.CHAR, TypeRoot.VARCHAR})

Node = Callable[[Mapping[str, str]], Outcome]


def parse_partition_filter(
    text: str, schema: TableSchema, default_name: str
) -> Callable[[Mapping[str, str]], bool]:
    """A test of partition specs: False only for a spec the predicate ``text`` certainly excludes."""
    try:
        tree = json.loads(text)
    except (ValueError, TypeError) as e:
        raise ValidationError(f"filter is not JSON: {e}", field=FIELD) from None
    types = {f.name: f.type.root for f in schema.fields if f.name in schema.partition_keys}
    node = _node(tree, types, default_name, "filter")
    return lambda spec: node(spec) in (Outcome.TRUE, Outcome.MAYBE)


def _bad(where: str, why: str) -> ValidationError:
    return ValidationError(f"{where}: {why}", field=FIELD)


def _node(tree: Any, types: Mapping[str, TypeRoot], default_name: str, where: str) -> Node:
    if not isinstance(tree, dict):
        raise _bad(where, "a predicate is a JSON object")
    kind = tree.get("kind")
    if kind == "COMPOUND":
        function, children = tree.get("function"), tree.get("children")
        if function not in ("AND", "OR") or not isinstance(children, list) or not children:
            raise _bad(where, "a COMPOUND predicate has function AND or OR and a non-empty children list")
        nodes = [_node(c, types, default_name, f"{where}.children[{i}]") for i, c in enumerate(children)]
        return _and(nodes) if function == "AND" else _or(nodes)
    if kind == "LEAF":
        return _leaf(tree, types, default_name, where)
    raise _bad(where, f"kind must be LEAF or COMPOUND, got {kind!r}")


def _and(nodes: Sequence[Node]) -> Node:
    def run(spec: Mapping[str, str]) -> Outcome:
        outcomes = [n(spec) for n in nodes]
        if Outcome.FALSE in outcomes:
            return Outcome.FALSE
        return Outcome.MAYBE if Outcome.MAYBE in outcomes else Outcome.TRUE

    return run


def _or(nodes: Sequence[Node]) -> Node:
    def run(spec: Mapping[str, str]) -> Outcome:
        outcomes = [n(spec) for n in nodes]
        if Outcome.TRUE in outcomes:
            return Outcome.TRUE
        return Outcome.MAYBE if Outcome.MAYBE in outcomes else Outcome.FALSE

    return run


def _leaf(tree: Mapping[str, Any], types: Mapping[str, TypeRoot], default_name: str, where: str) -> Node:
    function = tree.get("function")
    if function not in JAVA_LEAF_FUNCTIONS:
        raise _bad(where, f"unknown predicate function {function!r}")
    if function in ("TRUE", "FALSE"):
        outcome = Outcome.TRUE if function == "TRUE" else Outcome.FALSE
        return lambda spec: outcome
    transform = tree.get("transform")
    if not isinstance(transform, dict):
        raise _bad(where, "a LEAF predicate has a transform")
    if transform.get("name") != "FIELD_REF":
        return lambda spec: Outcome.MAYBE  # CAST, CONCAT, ...: not evaluated here
    ref = transform.get("fieldRef")
    column = ref.get("name") if isinstance(ref, dict) else None
    if not isinstance(column, str):
        raise _bad(where, "a FIELD_REF transform names its field (fieldRef.name)")
    if column not in types:
        raise _bad(where, f"column {column!r} is not a partition key ({sorted(types)})")
    literals = tree.get("literals") or []
    if not isinstance(literals, list):
        raise _bad(where, "literals is a list")
    root = types[column]
    decode = _decoder(root)
    if decode is None or not all(_literal_fits(root, v) for v in literals):
        return lambda spec: Outcome.MAYBE
    test = _test(function, literals)
    if test is None:
        return lambda spec: Outcome.MAYBE

    def run(spec: Mapping[str, str]) -> Outcome:
        text = spec.get(column)
        if text is None:
            return Outcome.MAYBE
        try:
            value = None if text == default_name else decode(text)
        except ValueError:
            return Outcome.MAYBE
        return test(value)

    return run


def _decoder(root: TypeRoot) -> Callable[[str], Any] | None:
    if root in _STRINGS:
        return str
    if root in _INTEGERS:
        return int
    if root is TypeRoot.BOOLEAN:
        return _boolean
    return None


def _boolean(text: str) -> bool:
    lowered = text.lower()
    if lowered not in ("true", "false"):
        raise ValueError(text)
    return lowered == "true"


def _literal_fits(root: TypeRoot, value: Any) -> bool:
    if value is None:
        return True
    if root in _STRINGS:
        return isinstance(value, str)
    if root in _INTEGERS:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, bool)


def _sql(result: bool | None) -> Outcome:
    """SQL's true/false/unknown (None), unknown taken as false."""
    return Outcome.TRUE if result else Outcome.FALSE


def _test(function: str, literals: list[Any]) -> Callable[[Any], Outcome] | None:
    """The leaf's test on one decoded value (None: SQL null), or None when it is not evaluated here."""
    if function == "IS_NULL":
        return lambda v: _sql(v is None)
    if function == "IS_NOT_NULL":
        return lambda v: _sql(v is not None)
    if function in ("IN", "NOT_IN"):
        present = [x for x in literals if x is not None]
        has_null = len(present) < len(literals)

        def member(v: Any) -> Outcome:
            if v is None:
                return Outcome.FALSE
            if v in present:
                return _sql(function == "IN")
            return Outcome.FALSE if has_null else _sql(function == "NOT_IN")

        return member
    binary: dict[str, Callable[[Any, Any], bool]] = {
        "EQUAL": lambda v, x: bool(v == x),
        "NOT_EQUAL": lambda v, x: bool(v != x),
        "LESS_THAN": lambda v, x: bool(v < x),
        "LESS_OR_EQUAL": lambda v, x: bool(v <= x),
        "GREATER_THAN": lambda v, x: bool(v > x),
        "GREATER_OR_EQUAL": lambda v, x: bool(v >= x),
        "STARTS_WITH": lambda v, x: bool(v.startswith(x)),
        "ENDS_WITH": lambda v, x: bool(v.endswith(x)),
        "CONTAINS": lambda v, x: x in v,
    }
    if function in ("STARTS_WITH", "ENDS_WITH", "CONTAINS") and not all(isinstance(x, str) for x in literals):
        return None  # on strings only (a string literal fits only a string column)
    if function in binary and len(literals) == 1:
        compare, literal = binary[function], literals[0]
        return lambda v: Outcome.FALSE if v is None or literal is None else _sql(compare(v, literal))
    if function in ("BETWEEN", "NOT_BETWEEN") and len(literals) == 2:
        low, high = literals

        def between(v: Any) -> Outcome:
            if v is None or low is None or high is None:
                return Outcome.FALSE
            inside = bool(low <= v <= high)
            return _sql(inside if function == "BETWEEN" else not inside)

        return between
    return None
