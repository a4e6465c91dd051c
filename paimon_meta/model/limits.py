"""How large the free text the catalog stores may be: the one place of these limits and their checks.

Every text a client chooses and the catalog keeps (a view's query and its dialects, a function's
definitions, comments and column descriptions, options and properties, a database's options) has a
limit in characters, and each object's texts have a limit in all: a client cannot make the catalog
keep, and every listing page carry, megabytes it chose. The catalog checks what it is about to store,
where it stores it (creates and alters of views, functions, tables and databases; the properties of a
commit); an object already stored (by Java, or before these limits) is read as it is, and an alter of
it is refused only for the texts it changes or the totals it grows.

A text over its limit raises :class:`~paimon_meta.errors.FieldTooLargeError` naming the field (the
service answers 413).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from paimon_meta.errors import FieldTooLargeError
from paimon_meta.model.catalog_objects import FunctionSpec, SemanticViewDefinition, ViewSchema
from paimon_meta.model.schema import TableSchema
from paimon_meta.model.types import DataField

#: A query or body: a view's query, each dialect's, a function definition's body.
QUERY = 1 << 20
#: A comment or a column's description.
COMMENT = 64 << 10
#: A name the client chooses inside an object: an option's or property's key, a dialect's or a
#: definition's name, a language, a class or function name, a resource type.
NAME = 1024
#: An option's or a property's value.
VALUE = 64 << 10
#: A function's file resource.
URI = 4096
#: Entries of one map (options, properties, dialects, definitions) or list (file resources).
ENTRIES = 1024
#: A semantic view's document, in bytes of UTF-8 (Java's ``SemanticViewDefinition.MAX_CONTENT_BYTES``).
SEMANTIC_CONTENT = 1 << 20
#: All the free text of one object (a view, a function, a table's schema, a database's options, a
#: commit's properties).
OBJECT = 4 << 20


@dataclass(frozen=True, slots=True)
class Text:
    """One text of an object: where it is (``field``, as the protocol names it), its value, its limit."""

    field: str
    value: str | None
    limit: int


@dataclass(frozen=True, slots=True)
class Count:
    """How many entries a map or list of an object has."""

    field: str
    count: int


Part = Text | Count


def check(what: str, parts: Iterable[Part], before: Iterable[Part] = ()) -> None:
    """Check the ``parts`` of ``what`` (an object about to be stored); ``before``: its parts as stored
    (an alter), whose unchanged texts, counts not grown and total not grown are let be.

    Raises:
        FieldTooLargeError: naming the first field over its limit (or the object, over ``OBJECT``).
    """
    old = {(type(p), p.field): p for p in before}
    total = 0
    for part in parts:
        if isinstance(part, Count):
            was = old.get((Count, part.field))
            grew = not isinstance(was, Count) or part.count > was.count
            if part.count > ENTRIES and grew:
                raise FieldTooLargeError(
                    f"{part.field} has {part.count} entries, over the limit of {ENTRIES}",
                    field=part.field,
                    limit=ENTRIES,
                )
            continue
        size = len(part.value or "")
        total += size
        if size > part.limit and old.get((Text, part.field)) != part:
            raise FieldTooLargeError(
                f"{part.field} has {size} characters, over the limit of {part.limit}",
                field=part.field,
                limit=part.limit,
            )
    if total > OBJECT and total > sum(len(p.value or "") for p in old.values() if isinstance(p, Text)):
        raise FieldTooLargeError(
            f"the {what}'s text ({total} characters in all) is over the limit of {OBJECT}",
            field=what,
            limit=OBJECT,
        )


def mapping(field: str, values: Mapping[str, str] | None, *, value_limit: int = VALUE) -> list[Part]:
    """The parts of a map of strings: its count, each key (``NAME``) and each value."""
    values = values or {}
    out: list[Part] = [Count(field, len(values))]
    for key, value in values.items():
        out.append(Text(f"{field} key", key, NAME))
        out.append(Text(f"{field}.{key[:64]}", value, value_limit))
    return out


def _fields(field: str, fields: Iterable[DataField] | None) -> list[Part]:
    return [Text(f"{field}.{f.name[:64]}.description", f.description, COMMENT) for f in fields or ()]


def view_parts(schema: ViewSchema) -> list[Part]:
    return [
        Text("schema.query", schema.query, QUERY),
        *mapping("schema.dialects", schema.dialects, value_limit=QUERY),
        Text("schema.comment", schema.comment, COMMENT),
        *mapping("schema.options", schema.options),
        *_fields("schema.fields", schema.fields),
    ]


def function_parts(spec: FunctionSpec) -> list[Part]:
    out: list[Part] = [
        Count("definitions", len(spec.definitions)),
        Text("comment", spec.comment, COMMENT),
        *mapping("options", spec.options),
        *_fields("inputParams", spec.input_params),
        *_fields("returnParams", spec.return_params),
    ]
    for name, definition in spec.definitions.items():
        where = f"definitions.{name[:64]}"
        out.append(Text("definitions key", name, NAME))
        for member, value in definition.items():
            if member == "fileResources":
                resources = value or []
                out.append(Count(f"{where}.fileResources", len(resources)))
                for i, res in enumerate(resources):
                    out.append(Text(f"{where}.fileResources[{i}].uri", res.get("uri"), URI))
                    out.append(
                        Text(f"{where}.fileResources[{i}].resourceType", res.get("resourceType"), NAME)
                    )
            elif isinstance(value, str):
                out.append(Text(f"{where}.{member}", value, QUERY if member == "definition" else NAME))
    return out


def table_parts(schema: TableSchema) -> list[Part]:
    return [
        Text("schema.comment", schema.comment, COMMENT),
        *mapping("schema.options", schema.options),
        *_fields("schema.fields", schema.fields),
    ]


def check_view(schema: ViewSchema, before: ViewSchema | None = None) -> None:
    check("view", view_parts(schema), view_parts(before) if before is not None else ())


def check_function(spec: FunctionSpec, before: FunctionSpec | None = None) -> None:
    check("function", function_parts(spec), function_parts(before) if before is not None else ())


def check_semantic_view(
    definition: SemanticViewDefinition, before: SemanticViewDefinition | None = None
) -> None:
    """``definition.format`` a name (``NAME`` characters), ``definition.content`` at most
    ``SEMANTIC_CONTENT`` bytes of UTF-8 (Java's limit; the client refuses more, so this catches others)."""
    del before  # an upsert replaces the whole document: every one is checked whole
    check("semantic view", [Text("definition.format", definition.format, NAME)])
    size = len(definition.content.encode("utf-8"))
    if size > SEMANTIC_CONTENT:
        raise FieldTooLargeError(
            f"definition.content has {size} bytes of UTF-8, over the limit of 1 MiB ({SEMANTIC_CONTENT})",
            field="definition.content",
            limit=SEMANTIC_CONTENT,
        )


def check_table(schema: TableSchema, before: TableSchema | None = None) -> None:
    check("table schema", table_parts(schema), table_parts(before) if before is not None else ())


def check_options(
    what: str, field: str, values: Mapping[str, str], before: Mapping[str, str] | None = None
) -> None:
    """A database's options, a commit's properties (``field`` names them)."""
    check(what, mapping(field, values), mapping(field, before) if before is not None else ())
