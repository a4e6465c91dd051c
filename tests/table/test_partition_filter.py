"""Java's serialized Paimon predicates evaluated on partition specs (``listPartitionsByFilter``): exact
where the module decides, a superset where it cannot (the protocol allows it), refusals naming
``filter`` for what it cannot read."""

from __future__ import annotations

import json
from typing import Any

import pytest

from paimon_meta.errors import ValidationError
from paimon_meta.model.schema import TableSchema
from paimon_meta.model.types import DataField, parse_type
from paimon_meta.table.partition_filter import parse_partition_filter

SCHEMA = TableSchema(
    id=0,
    fields=(
        DataField(0, "k", parse_type("BIGINT NOT NULL")),
        DataField(1, "day", parse_type("STRING")),
        DataField(2, "hr", parse_type("INT")),
        DataField(3, "ts", parse_type("TIMESTAMP(3)")),
    ),
    highest_field_id=3,
    partition_keys=("day", "hr", "ts"),
)
DEFAULT = "__DEFAULT_PARTITION__"
SPECS = [
    {"day": "d1", "hr": "1", "ts": "x"},
    {"day": "d1", "hr": "12", "ts": "x"},
    {"day": "d2", "hr": "3", "ts": "x"},
    {"day": DEFAULT, "hr": "3", "ts": "x"},
    {"day": "e9", "hr": DEFAULT, "ts": "x"},
]


def leaf(function: str, column: str, *literals: Any, type_: str = "STRING") -> dict[str, Any]:
    """A ``LeafPredicate`` as Java's ``JsonSerdeUtil.toFlatJson`` writes it."""
    return {
        "kind": "LEAF",
        "transform": {"name": "FIELD_REF", "fieldRef": {"index": 0, "name": column, "type": type_}},
        "function": function,
        "literals": list(literals),
    }


def compound(function: str, *children: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "COMPOUND", "function": function, "children": list(children)}


def matched(tree: dict[str, Any]) -> list[int]:
    test = parse_partition_filter(json.dumps(tree), SCHEMA, DEFAULT)
    return [i for i, spec in enumerate(SPECS) if test(spec)]


@pytest.mark.parametrize(
    ("tree", "expected"),
    [
        (leaf("EQUAL", "day", "d1"), [0, 1]),
        (leaf("NOT_EQUAL", "day", "d1"), [2, 4]),  # null is unknown: excluded
        (leaf("GREATER_THAN", "hr", 2, type_="INT"), [1, 2, 3]),  # 12 > 2 as integers, not as text
        (leaf("LESS_OR_EQUAL", "hr", 3, type_="INT"), [0, 2, 3]),
        (leaf("IN", "day", "d2", "e9"), [2, 4]),
        (leaf("NOT_IN", "day", "d2", None), []),  # a null in NOT IN: never true
        (leaf("BETWEEN", "hr", 2, 12, type_="INT"), [1, 2, 3]),
        (leaf("NOT_BETWEEN", "hr", 2, 12, type_="INT"), [0]),
        (leaf("IS_NULL", "day"), [3]),
        (leaf("IS_NOT_NULL", "hr", type_="INT"), [0, 1, 2, 3]),
        (leaf("STARTS_WITH", "day", "d"), [0, 1, 2]),
        (leaf("ENDS_WITH", "day", "9"), [4]),
        (leaf("CONTAINS", "day", "2"), [2]),
        (compound("AND", leaf("EQUAL", "day", "d1"), leaf("LESS_THAN", "hr", 5, type_="INT")), [0]),
        (compound("OR", leaf("EQUAL", "day", "d2"), leaf("IS_NULL", "hr", type_="INT")), [2, 4]),
        (compound("OR", leaf("EQUAL", "hr", 3, type_="INT"), leaf("EQUAL", "day", "e9")), [2, 3, 4]),
        ({"kind": "LEAF", "function": "FALSE", "literals": []}, []),
        ({"kind": "LEAF", "function": "TRUE", "literals": []}, [0, 1, 2, 3, 4]),
    ],
)
def test_decided_exactly(tree: dict[str, Any], expected: list[int]) -> None:
    assert matched(tree) == expected


@pytest.mark.parametrize(
    "tree",
    [
        leaf("LIKE", "day", "d%"),  # Java has it; not evaluated here
        leaf("EQUAL", "ts", "2024-01-01 00:00:00"),  # a timestamp column
        leaf("EQUAL", "hr", "3"),  # a literal of another JSON type than the column's
        {**leaf("EQUAL", "day", "zz"), "transform": {"name": "UPPER", "inputs": []}},
    ],
)
def test_undecided_parts_may_match(tree: dict[str, Any]) -> None:
    assert matched(tree) == [0, 1, 2, 3, 4]
    # ... and stay a superset under AND: the decided part still filters
    assert matched(compound("AND", tree, leaf("EQUAL", "day", "d2"))) == [2]


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("not json", "not JSON"),
        ("[]", "JSON object"),
        (json.dumps({"kind": "NOT"}), "kind must be LEAF or COMPOUND"),
        (json.dumps(compound("XOR", leaf("EQUAL", "day", "a"))), "AND or OR"),
        (json.dumps(leaf("SOUNDS_LIKE", "day", "a")), "unknown predicate function 'SOUNDS_LIKE'"),
        (json.dumps(leaf("EQUAL", "k", 1, type_="BIGINT")), "column 'k' is not a partition key"),
        (json.dumps(compound("AND", leaf("EQUAL", "day", "a"), leaf("EQUAL", "nope", "a"))), "children[1]"),
    ],
)
def test_refusals_name_the_filter(text: str, words: str) -> None:
    with pytest.raises(ValidationError, match="filter") as e:
        parse_partition_filter(text, SCHEMA, DEFAULT)
    assert words in str(e.value)
    assert e.value.fields["field"] == "filter"
