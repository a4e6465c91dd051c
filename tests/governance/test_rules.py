"""Paimon's predicate and transform JSON: Java's own serialised examples parse and come back unchanged in
the canonical form; every malformed or unsupported rule is refused with a PolicyRuleError naming why
(fail closed). The JSON strings are the facts of apache/paimon's ``PredicateJsonSerdeTest`` and
``TransformJsonSerdeTest`` (``paimon-common/src/test/java/org/apache/paimon/predicate``)."""

from __future__ import annotations

import json

import pytest

from paimon_meta.errors import PolicyConflictError, PolicyRuleError
from paimon_meta.governance.policies import QueryRules
from paimon_meta.governance.rules import parse_column_mask, parse_row_filter, to_json
from paimon_meta.model.types import (
    BIGINT,
    DATE,
    DECIMAL,
    DOUBLE,
    INT,
    STRING,
    TIMESTAMP,
    ArrayType,
    DataField,
)

# PredicateJsonSerdeTest's row type: INT, STRING, STRING, INT, ARRAY<STRING>; with more of ours after it.
FIELDS = [
    DataField(0, "f0", INT()),
    DataField(1, "f1", STRING()),
    DataField(2, "f2", STRING()),
    DataField(3, "f3", INT()),
    DataField(4, "f4", ArrayType(True, STRING())),
    DataField(5, "big", BIGINT()),
    DataField(6, "d", DOUBLE()),
    DataField(7, "day", DATE()),
    DataField(8, "ts", TIMESTAMP(3)),
    DataField(9, "amount", DECIMAL(10, 2)),
]


def ref(i: int, name: str, typ: str = "INT") -> str:
    return f'{{"index":{i},"name":"{name}","type":"{typ}"}}'


F0, F2, F3 = ref(0, "f0"), ref(2, "f2", "STRING"), ref(3, "f3")


def leaf(transform: str, function: str, literals: str = "[]") -> str:
    return f'{{"kind":"LEAF","transform":{transform},"function":"{function}","literals":{literals}}}'


def field(r: str) -> str:
    return f'{{"name":"FIELD_REF","fieldRef":{r}}}'


JAVA_PREDICATES = [
    leaf(field(F0), "EQUAL", "[1]"),
    leaf(field(F0), "NOT_EQUAL", "[1]"),
    leaf(field(F0), "LESS_THAN", "[10]"),
    leaf(field(F0), "LESS_OR_EQUAL", "[10]"),
    leaf(field(F0), "GREATER_THAN", "[5]"),
    leaf(field(F0), "GREATER_OR_EQUAL", "[5]"),
    leaf(field(F0), "IS_NULL"),
    leaf(field(F0), "IS_NOT_NULL"),
    # builder.in(0, [1, 2, 3]): Java writes a short IN as ORs of EQUALs
    '{"kind":"COMPOUND","function":"OR","children":['
    + leaf(field(F0), "EQUAL", "[1]")
    + ',{"kind":"COMPOUND","function":"OR","children":['
    + leaf(field(F0), "EQUAL", "[2]")
    + ","
    + leaf(field(F0), "EQUAL", "[3]")
    + "]}]}",
    leaf(f'{{"name":"CAST","fieldRef":{F0},"type":"BIGINT"}}', "GREATER_THAN", "[10]"),
    leaf(f'{{"name":"UPPER","inputs":[{F2}]}}', "STARTS_WITH", '["ABC"]'),
    leaf(f'{{"name":"LOWER","inputs":[{F2}]}}', "STARTS_WITH", '["abc"]'),
    leaf(f'{{"name":"CONCAT","inputs":[{ref(1, "f1", "STRING")},"-",{F2},null]}}', "CONTAINS", '["m"]'),
    leaf(
        f'{{"name":"CONCAT_WS","inputs":["|",{ref(1, "f1", "STRING")},"X",null,{F2}]}}', "ENDS_WITH", '["z"]'
    ),
    leaf(field(F2), "LIKE", '["%a%b%"]'),
    leaf(field(F2), "STARTS_WITH", '["hello"]'),
    leaf(field(F2), "ENDS_WITH", '["world"]'),
    leaf(field(F2), "CONTAINS", '["foo"]'),
    leaf(field(F0), "BETWEEN", "[3,7]"),
    leaf(field(F0), "NOT_BETWEEN", "[3,7]"),
    leaf('{"name":"NULL"}', "TRUE"),
    leaf('{"name":"NULL"}', "FALSE"),
    leaf(
        f'{{"name":"UPPER","inputs":[{F2}]}}',
        "IN",
        '[null,"S1","S2","S3","S4",null,"S6","S7","S8","S9",null,"S11","S12","S13","S14",null,"S16","S17","S18","S19",null]',
    ),
    # PredicateBuilder.and(equal, in(21 ints), in([]), like, or(equal, isNotNull))
    '{"kind":"COMPOUND","function":"AND","children":[{"kind":"COMPOUND","function":"AND","children":['
    + leaf(field(F0), "EQUAL", "[1]")
    + ","
    + leaf(field(F3), "IN", json.dumps(list(range(21)), separators=(",", ":")))
    + ']},{"kind":"COMPOUND","function":"AND","children":['
    + leaf(field(F3), "IN", "[]")
    + ',{"kind":"COMPOUND","function":"AND","children":['
    + leaf(field(F2), "LIKE", '["%a%b%"]')
    + ',{"kind":"COMPOUND","function":"OR","children":['
    + leaf(field(F0), "EQUAL", "[7]")
    + ","
    + leaf(field(F2), "IS_NOT_NULL")
    + "]}]}]}]}",
    # pypaimon 2.1.0's transforms, in Java's shape
    leaf(f'{{"name":"SUBSTRING","inputs":[{F2},2,3]}}', "EQUAL", '["bc"]'),
    leaf(f'{{"name":"TRIM","inputs":[{F2},"x"],"trimFlag":"LEADING"}}', "EQUAL", '["a"]'),
    leaf(f'{{"name":"LENGTH","inputs":[{F2}]}}', "GREATER_THAN", "[3]"),
    leaf(f'{{"name":"YEAR","fieldRef":{ref(7, "day", "DATE")}}}', "EQUAL", "[2026]"),
    leaf(f'{{"name":"PAD","inputs":[{F2},5,"*"],"direction":"LEFT"}}', "EQUAL", '["***ab"]'),
    leaf(field(ref(7, "day", "DATE")), "GREATER_OR_EQUAL", '["2026-01-31"]'),
    leaf(field(ref(8, "ts", "TIMESTAMP(3)")), "LESS_THAN", "[[2026,1,31,12,0,0,123000000]]"),
    leaf(field(ref(9, "amount", "DECIMAL(10, 2)")), "EQUAL", "[12.5]"),
    leaf(field(ref(6, "d", "DOUBLE")), "IS_NAN"),
]


@pytest.mark.parametrize("text", JAVA_PREDICATES)
def test_javas_predicates_parse_and_come_back_unchanged(text: str) -> None:
    parsed = parse_row_filter(text, FIELDS)
    assert json.loads(to_json(parsed)) == json.loads(text)


JAVA_TRANSFORMS = [
    (field(F0), "f0"),
    (field(ref(1, "f1", "STRING")), "f1"),
    (f'{{"name":"CAST","fieldRef":{F0},"type":"BIGINT"}}', "big"),
    (f'{{"name":"CAST","fieldRef":{F2},"type":"INT"}}', "f3"),
    (f'{{"name":"UPPER","inputs":[{ref(1, "f1", "STRING")}]}}', "f1"),
    (f'{{"name":"CONCAT","inputs":[{ref(1, "f1", "STRING")},{F2}]}}', "f2"),
    (f'{{"name":"CONCAT","inputs":[{ref(1, "f1", "STRING")},"-",{F2},null]}}', "f1"),
    (f'{{"name":"CONCAT_WS","inputs":["|",{ref(1, "f1", "STRING")},{F2}]}}', "f1"),
    (f'{{"name":"CONCAT_WS","inputs":["|",{ref(1, "f1", "STRING")},"X",null,{F2}]}}', "f1"),
    ('{"name":"NULL"}', "amount"),
]


@pytest.mark.parametrize(("text", "column"), JAVA_TRANSFORMS)
def test_javas_transforms_parse_as_masks_and_come_back_unchanged(text: str, column: str) -> None:
    parsed = parse_column_mask(text, FIELDS, column)
    assert json.loads(to_json(parsed)) == json.loads(text)


def test_the_canonical_form_takes_the_tables_positions_and_types() -> None:
    stale = leaf(field(ref(7, "f2", "VARCHAR(10)")), "EQUAL", '["x"]')  # index and length out of date
    assert json.loads(to_json(parse_row_filter(stale, FIELDS)))["transform"]["fieldRef"] == {
        "index": 2,
        "name": "f2",
        "type": "STRING",
    }


REFUSED = [
    # (rule JSON, reason, a fragment of the message)
    ('{"kind":"invalid"}', "unknown", "unknown predicate kind 'invalid'"),
    ('{"kind":"LEAF","function":"unknown"}', "unsupported", "leaf function 'unknown'"),
    (
        leaf(field('{"index":4,"name":"f4","type":{"type":"ARRAY","element":"STRING"}}'), "EQUAL", '["x"]'),
        "type",
        "EQUAL does not apply to a ARRAY<STRING> value",
    ),
    (leaf(field('{"index":0,"name":"f0","type":"NOT A TYPE"}'), "IS_NULL"), "json", "no valid 'type'"),
    (
        '{"kind":"LEAF","transform":{"name":"FIELD_REF","fieldRef":{"index":4,"name":"f4","type":'
        '{"type":"ARRAY","element":"STRING"}}},"function":"ARRAY_CONTAINS","literals":["vip"]}',
        "unsupported",
        "ARRAY_CONTAINS",
    ),
    (leaf('{"name":"HASH_MASK","inputs":[]}', "IS_NULL"), "unsupported", "HASH_MASK"),
    (leaf(field(F0), "EQUAL", "[]"), "arity", "EQUAL takes 1 literal(s), got 0"),
    (leaf(field(F0), "BETWEEN", "[1]"), "arity", "BETWEEN takes 2"),
    (leaf(field(F0), "IS_NULL", "[1]"), "arity", "IS_NULL takes 0"),
    (leaf(f'{{"name":"UPPER","inputs":[{F2},{F2}]}}', "IS_NULL"), "arity", "UPPER takes 1 input"),
    (leaf('{"name":"CONCAT_WS","inputs":["|"]}', "IS_NULL"), "arity", "at least 2"),
    (leaf(f'{{"name":"SUBSTRING","inputs":[{F2}]}}', "IS_NULL"), "arity", "2 to 3"),
    ('{"kind":"COMPOUND","function":"AND","children":[]}', "arity", "non-empty"),
    ('{"kind":"COMPOUND","function":"XOR","children":[]}', "unknown", "XOR"),
    (leaf(field(ref(0, "gone")), "IS_NULL"), "column", "'gone' does not exist"),
    (leaf(field(ref(1, "f1", "INT")), "IS_NULL"), "type", "the rule was written for INT"),
    (leaf(field(F0), "EQUAL", '["1"]'), "literal", "is not an integer"),
    (leaf(field(F0), "EQUAL", "[1.5]"), "literal", "is not an integer"),
    (leaf(field(F0), "EQUAL", "[2147483648]"), "literal", "within INT"),
    (leaf(field(F2), "EQUAL", "[5]"), "literal", "is not a string"),
    (leaf(field(F0), "STARTS_WITH", '["1"]'), "type", "does not apply to a INT"),
    (leaf(field(F2), "IS_NAN"), "type", "IS_NAN"),
    (leaf(f'{{"name":"UPPER","inputs":[{F0}]}}', "IS_NULL"), "type", "not a string"),
    (leaf('{"name":"UPPER","inputs":[1]}', "IS_NULL"), "literal", "not a string literal"),
    (leaf(f'{{"name":"SUBSTRING","inputs":[{F2},"x"]}}', "IS_NULL"), "literal", "integer position"),
    (
        leaf(f'{{"name":"SUBSTRING","inputs":[{F2},{ref(5, "big", "BIGINT")}]}}', "IS_NULL"),
        "type",
        "not an INT",
    ),
    (leaf(f'{{"name":"YEAR","fieldRef":{F0}}}', "IS_NULL"), "type", "YEAR does not apply"),
    (leaf(f'{{"name":"CAST","fieldRef":{F0},"type":"DATE"}}', "IS_NULL"), "type", "CAST from INT to DATE"),
    (leaf(f'{{"name":"TRIM","inputs":[{F2}],"trimFlag":"MIDDLE"}}', "IS_NULL"), "json", "trimFlag"),
    (leaf(field(F2), "LIKE", '["a\\\\b"]'), "literal", "invalid escape"),
    (leaf(field(ref(7, "day", "DATE")), "EQUAL", '["2026-02-30"]'), "literal", "a date"),
    (
        leaf(field(ref(8, "ts", "TIMESTAMP(3)")), "EQUAL", '["2026-01-01T00:00:00.1234"]'),
        "literal",
        "precision",
    ),
    (leaf(field(ref(9, "amount", "DECIMAL(10, 2)")), "EQUAL", "[1.234]"), "literal", "DECIMAL(10, 2)"),
    (leaf(field(F0), "EQUAL", "[1]")[:-1] + ',"negated":true}', "json", "unknown member(s) ['negated']"),
    ('{"kind":"LEAF","kind":"LEAF"}', "json", "appears twice"),
    ('{"kind":"LEAF",', "json", "malformed JSON"),
    ("", "json", "empty rule"),
    (leaf(field(F0), "EQUAL", "[NaN]"), "json", "NaN is not JSON"),
    ('{"kind":"COMPOUND","function":"OR","children":[' * 300 + "]}" * 300, "json", "deeper"),
    (leaf(field(F2), "EQUAL", json.dumps(["x" * 70000])), "json", "longer than"),
]


@pytest.mark.parametrize(("text", "reason", "fragment"), REFUSED)
def test_malformed_or_unsupported_rules_are_refused_naming_why(text: str, reason: str, fragment: str) -> None:
    with pytest.raises(PolicyRuleError) as e:
        parse_row_filter(text, FIELDS)
    assert e.value.fields["reason"] == reason, e.value
    assert fragment in str(e.value)
    assert e.value.fields["rule"] == "row filter"


def test_masks_are_refused_when_they_cannot_replace_their_column() -> None:
    with pytest.raises(PolicyRuleError, match="produces INT, the column is STRING") as e:
        parse_column_mask(f'{{"name":"LENGTH","inputs":[{F2}]}}', FIELDS, "f2")
    assert e.value.fields["column"] == "f2"
    with pytest.raises(PolicyRuleError, match="'gone' does not exist"):
        parse_column_mask('{"name":"NULL"}', FIELDS, "gone")
    with pytest.raises(PolicyRuleError, match="not one this service evaluates"):
        parse_column_mask('{"name":"PARTIAL_MASK","inputs":[]}', FIELDS, "f2")


def test_combining_ands_filters_and_refuses_conflicting_masks() -> None:
    upper = f'{{"name":"UPPER","inputs":[{F2}]}}'
    rules = QueryRules.combine(
        [leaf(field(F0), "IS_NOT_NULL"), leaf(field(F3), "IS_NULL")], [("f2", upper)], FIELDS
    )
    assert len(rules.filters) == 2 and [c for c, _ in rules.masks] == ["f2"]
    with pytest.raises(PolicyConflictError, match="two column masks on 'f2'"):
        QueryRules.combine([], [("f2", upper), ("f2", '{"name":"NULL"}')], FIELDS)
    reads_masked = f'{{"name":"CONCAT","inputs":[{ref(1, "f1", "STRING")},{F2}]}}'
    with pytest.raises(PolicyConflictError, match="reads 'f2', which is masked too"):
        QueryRules.combine([], [("f2", upper), ("f1", reads_masked)], FIELDS)
    # as pypaimon 2.1.0: an /auth answer with a blank rule, a null mask, or not a list is refused
    for filters, masks in [([""], {}), ([], {"f2": ""}), ("x", {}), ([], {"": upper})]:
        with pytest.raises(PolicyRuleError):
            QueryRules.parse(filters, masks, FIELDS)
    assert not QueryRules.parse(None, None, FIELDS).restricted


def test_needed_columns_add_filter_operands_and_inputs_of_selected_masks() -> None:
    concat = f'{{"name":"CONCAT","inputs":[{ref(1, "f1", "STRING")},"-",{ref(5, "big", "BIGINT")}]}}'
    with pytest.raises(PolicyRuleError, match="not a string"):
        QueryRules.combine([], [("f2", concat)], FIELDS)
    concat = f'{{"name":"CONCAT","inputs":[{ref(1, "f1", "STRING")},"-",{F2}]}}'
    rules = QueryRules.combine([leaf(field(F3), "IS_NULL")], [("f2", concat)], FIELDS)
    assert rules.needed_columns(["f0"]) == ["f0", "f3"]
    assert rules.needed_columns(["f2", "f0"]) == ["f2", "f0", "f3", "f1"]
