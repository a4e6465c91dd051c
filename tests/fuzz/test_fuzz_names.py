"""Table identifiers and partition path escaping: any text in, only ValidationError out; what is accepted
is exactly what the rules allow; escaping round-trips and keeps every value inside one path segment."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from paimon_meta.errors import ValidationError
from paimon_meta.model.identifier import IDENTIFIER_PATTERN, split_identifier, validate_identifier
from paimon_meta.model.types import INT, STRING, DataField
from paimon_meta.table.paths import PartitionComputer, escape_path_name, unescape_path_name
from tests.fuzz.seeds import fuzz_settings

# The documented rule, matched over the whole name (no trailing newline, unlike a "$" anchor).
VALID_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_\-]{0,127}")

names = (
    st.text(max_size=140)
    | st.from_regex(IDENTIFIER_PATTERN)
    | st.from_regex(VALID_NAME, fullmatch=True).map(lambda name: name + "\n")
    | st.sampled_from(["", ".", "..", "a.b", "a" * 128, "a" * 129, "_", "-a", "a-", "a\x00", "ä"])
)


@fuzz_settings(1500)
@given(name=names)
def test_identifiers_accept_exactly_the_rule(name: str) -> None:
    try:
        got = validate_identifier("table", name)
    except ValidationError:
        assert VALID_NAME.fullmatch(name) is None, f"{name!r} follows the rule but was refused"
        return
    assert got == name
    assert VALID_NAME.fullmatch(name), f"{name!r} was accepted but breaks the rule"


@pytest.mark.parametrize("name", ["t\n", "db\n"])
def test_a_trailing_newline_is_not_a_valid_name(name: str) -> None:
    """Regression: the pattern used to be matched with a '$' anchor, which also matches before a final
    newline, so 't\\n' was a valid table name (found by the property test above)."""
    with pytest.raises(ValidationError):
        validate_identifier("table", name)
    with pytest.raises(ValidationError):
        split_identifier(f"db.{name}")


@fuzz_settings(1000)
@given(db=names, table=names, extra=st.sampled_from(["", ".", ".x", "..", " "]))
def test_split_identifier(db: str, table: str, extra: str) -> None:
    text = f"{db}.{table}{extra}"
    try:
        got = split_identifier(text)
    except ValidationError:
        return
    assert ".".join(got) == text
    assert all(VALID_NAME.fullmatch(part) for part in got), f"{text!r} accepted as {got!r}"


values = st.text(st.characters(exclude_categories=["Cs"]), min_size=1, max_size=40)
_ESCAPED_CHARS = {chr(c) for c in range(0x20)} | set("\"#%'*/:=?\\\x7f{}[]^")


@fuzz_settings(1500)
@given(value=values)
def test_escaping_round_trips(value: str) -> None:
    escaped = escape_path_name(value)
    assert unescape_path_name(escaped) == value
    assert not (set(escaped) - {"%"}) & _ESCAPED_CHARS, escaped


@fuzz_settings(500)
@given(text=st.text(max_size=40))
def test_unescape_never_fails(text: str) -> None:
    unescape_path_name(text)


@fuzz_settings(800)
@given(s=st.none() | values, i=st.none() | st.integers(-(2**31), 2**31 - 1))
def test_partition_paths_are_one_segment_per_key(s: str | None, i: int | None) -> None:
    computer = PartitionComputer([DataField(0, "s/=%", STRING()), DataField(1, "i", INT())])
    path = computer.path([s, i])
    parts = path.split("/")
    assert len(parts) == 2
    decoded = []
    for part in parts:
        key, sep, value = part.partition("=")
        assert sep and "=" not in value
        decoded.append((unescape_path_name(key), unescape_path_name(value)))
    assert [k for k, _ in decoded] == ["s/=%", "i"]
    expected = dict(computer.spec([s, i]))
    assert dict(decoded) == expected
