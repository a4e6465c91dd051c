"""Views and functions as the REST protocol carries them (apache/paimon ``ViewSchema``, ``ViewChange``,
``Function``, ``FunctionDefinition``, ``FunctionChange``), parsed from and written to their JSON, and the
protocol's changes applied to them. Pure data: no IO.

Every parser names the member it refuses (``ValidationError`` with ``field``); a change list is applied
all or nothing (the first failing change raises and nothing is returned), with Java's errors: adding a
dialect or definition that exists is ``...AlreadyExistsError``, updating or dropping one that does not
is ``...NotFoundError`` (Java's ``RESTCatalogServer`` answers 409 / 404 with resource type ``DIALECT`` /
``DEFINITION`` and the dialect's or definition's name), and an unknown ``action`` is a 400 naming it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from paimon_meta.errors import (
    DefinitionAlreadyExistsError,
    DefinitionNotFoundError,
    DialectAlreadyExistsError,
    DialectNotFoundError,
    ValidationError,
)
from paimon_meta.model.types import DataField

# ---- JSON members --------------------------------------------------------------------------------------


def _text(obj: Mapping[str, Any], key: str, where: str, *, nullable: bool = False) -> Any:
    value = obj.get(key)
    if value is None and nullable:
        return None
    if not isinstance(value, str):
        raise ValidationError(f"{where}.{key} must be a string, got {value!r}", field=f"{where}.{key}")
    return value


def _strings(value: Any, where: str) -> dict[str, str]:
    """A JSON object of strings (options, dialects); null is empty."""
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise ValidationError(f"{where} must be an object of strings", field=where)
    return dict(value)


def _fields(value: Any, where: str) -> tuple[DataField, ...]:
    """A list of Paimon ``DataField`` JSON (``id``, ``name``, ``type``), each checked by the library's
    type parser."""
    if not isinstance(value, list):
        raise ValidationError(f"{where} must be a list of fields", field=where)
    out = []
    for i, obj in enumerate(value):
        try:
            out.append(DataField.from_json(obj))
        except ValidationError as e:
            raise ValidationError(f"{where}[{i}]: {e.message}", field=f"{where}[{i}]") from e
    return tuple(out)


def _object(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ValidationError(f"{where} must be an object, got {value!r}", field=where)
    return value


def _action(change: Any, where: str) -> tuple[Mapping[str, Any], str]:
    obj = _object(change, where)
    action = obj.get("action")
    if not isinstance(action, str) or not action:
        raise ValidationError(f"{where} needs an 'action', got {change!r}", field=f"{where}.action")
    return obj, action


# ---- views ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ViewSchema:
    """The protocol's ``ViewSchema``: the view's columns, its query, the query per SQL dialect, a
    comment and options. Java's ``JdbcCatalog`` stores exactly this JSON (``paimon_views.view_schema``)."""

    fields: tuple[DataField, ...]
    query: str
    dialects: dict[str, str] = field(default_factory=dict)
    comment: str | None = None
    options: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The JSON object (``comment`` left out when null, as Java's ``@JsonInclude(NON_NULL)``)."""
        out: dict[str, Any] = {"fields": [f.to_json() for f in self.fields], "query": self.query}
        out["dialects"] = dict(self.dialects)
        if self.comment is not None:
            out["comment"] = self.comment
        out["options"] = dict(self.options)
        return out

    def to_text(self) -> str:
        return json.dumps(self.to_json(), ensure_ascii=False, separators=(",", ":"))

    @staticmethod
    def from_json(obj: Any, where: str = "schema") -> ViewSchema:
        body = _object(obj, where)
        return ViewSchema(
            fields=_fields(body.get("fields", []), f"{where}.fields"),
            query=_text(body, "query", where),
            dialects=_strings(body.get("dialects"), f"{where}.dialects"),
            comment=_text(body, "comment", where, nullable=True),
            options=_strings(body.get("options"), f"{where}.options"),
        )

    @staticmethod
    def from_text(text: str) -> ViewSchema:
        """Parse stored JSON text (a row Java wrote included)."""
        try:
            obj = json.loads(text)
        except ValueError as e:
            raise ValidationError(f"view schema is not JSON: {e}", field="view_schema") from e
        return ViewSchema.from_json(obj, "view_schema")


def apply_view_changes(schema: ViewSchema, changes: Sequence[Any]) -> ViewSchema:
    """``schema`` with the protocol's ``ViewChange`` objects applied in order (all or nothing)."""
    options, dialects, comment = dict(schema.options), dict(schema.dialects), schema.comment
    for i, change in enumerate(changes):
        where = f"changes[{i}]"
        obj, action = _action(change, where)
        if action == "setOption":
            options[_text(obj, "key", where)] = _text(obj, "value", where)
        elif action == "removeOption":
            options.pop(_text(obj, "key", where), None)
        elif action == "updateComment":
            comment = _text(obj, "comment", where, nullable=True)
        elif action == "addDialect":
            dialect, query = _text(obj, "dialect", where), _text(obj, "query", where)
            if dialect in dialects:
                raise DialectAlreadyExistsError(f"dialect {dialect!r} already exists", resource_name=dialect)
            dialects[dialect] = query
        elif action == "updateDialect":
            dialect, query = _text(obj, "dialect", where), _text(obj, "query", where)
            if dialect not in dialects:
                raise DialectNotFoundError(f"dialect {dialect!r} does not exist", resource_name=dialect)
            dialects[dialect] = query
        elif action == "dropDialect":
            dialect = _text(obj, "dialect", where)
            if dialects.pop(dialect, None) is None:
                raise DialectNotFoundError(f"dialect {dialect!r} does not exist", resource_name=dialect)
        else:
            raise ValidationError(
                f"{where}: unknown view change action {action!r} (known: setOption, removeOption, "
                "updateComment, addDialect, updateDialect, dropDialect)",
                field=f"{where}.action",
            )
    return replace(schema, options=options, dialects=dialects, comment=comment)


# ---- functions -----------------------------------------------------------------------------------------

#: ``FunctionDefinition.type`` -> its members besides ``type`` (the spec's File/SQL/Lambda definitions).
DEFINITION_MEMBERS: dict[str, tuple[str, ...]] = {
    "file": ("fileResources", "language", "className", "functionName"),
    "sql": ("definition",),
    "lambda": ("definition", "language"),
}


def definition_from_json(obj: Any, where: str) -> dict[str, Any]:
    """A ``FunctionDefinition`` checked and kept as its JSON object (its members only: a ``type`` the
    spec names, strings or null, and ``fileResources`` as ``{resourceType, uri}`` objects)."""
    body = _object(obj, where)
    kind = body.get("type")
    if kind not in DEFINITION_MEMBERS:
        raise ValidationError(
            f"{where}.type must be one of {sorted(DEFINITION_MEMBERS)}, got {kind!r}", field=f"{where}.type"
        )
    out: dict[str, Any] = {"type": kind}
    for member in DEFINITION_MEMBERS[kind]:
        if member == "fileResources":
            out[member] = _file_resources(body.get(member), f"{where}.{member}")
        else:
            out[member] = _text(body, member, where, nullable=True)
    return out


def _file_resources(value: Any, where: str) -> list[dict[str, Any]] | None:
    if value is None:
        return None
    if not isinstance(value, list):
        raise ValidationError(f"{where} must be a list", field=where)
    out = []
    for i, item in enumerate(value):
        res = _object(item, f"{where}[{i}]")
        out.append(
            {
                "resourceType": _text(res, "resourceType", f"{where}[{i}]", nullable=True),
                "uri": _text(res, "uri", f"{where}[{i}]", nullable=True),
            }
        )
    return out


def _definitions(value: Any, where: str) -> dict[str, dict[str, Any]]:
    if value is None:
        return {}
    body = _object(value, where)
    return {str(name): definition_from_json(d, f"{where}.{name}") for name, d in body.items()}


@dataclass(frozen=True, slots=True)
class FunctionSpec:
    """The protocol's ``Function`` without its identity: parameters (null: not declared), whether it is
    deterministic, a definition per dialect name, a comment and options."""

    input_params: tuple[DataField, ...] | None = None
    return_params: tuple[DataField, ...] | None = None
    deterministic: bool = False
    definitions: dict[str, dict[str, Any]] = field(default_factory=dict)
    comment: str | None = None
    options: dict[str, str] = field(default_factory=dict)

    @staticmethod
    def from_request(body: Mapping[str, Any]) -> FunctionSpec:
        """From a ``CreateFunctionRequest``'s members (``name`` is the caller's)."""
        deterministic = body.get("deterministic", False)
        if not isinstance(deterministic, bool):
            raise ValidationError("deterministic must be a boolean", field="deterministic")
        return FunctionSpec(
            input_params=_params(body.get("inputParams"), "inputParams"),
            return_params=_params(body.get("returnParams"), "returnParams"),
            deterministic=deterministic,
            definitions=_definitions(body.get("definitions"), "definitions"),
            comment=_text(body, "comment", "function", nullable=True),
            options=_strings(body.get("options"), "options"),
        )

    def to_json(self) -> dict[str, Any]:
        """The members as ``GetFunctionResponse`` carries them."""
        return {
            "inputParams": params_json(self.input_params),
            "returnParams": params_json(self.return_params),
            "deterministic": self.deterministic,
            "definitions": {k: dict(v) for k, v in self.definitions.items()},
            "comment": self.comment,
            "options": dict(self.options),
        }


def _params(value: Any, where: str) -> tuple[DataField, ...] | None:
    return None if value is None else _fields(value, where)


def params_json(params: tuple[DataField, ...] | None) -> list[dict[str, Any]] | None:
    """Parameters as their JSON list (null when not declared)."""
    return None if params is None else [f.to_json() for f in params]


def apply_function_changes(spec: FunctionSpec, changes: Sequence[Any]) -> FunctionSpec:
    """``spec`` with the protocol's ``FunctionChange`` objects applied in order (all or nothing)."""
    options, definitions, comment = dict(spec.options), dict(spec.definitions), spec.comment
    for i, change in enumerate(changes):
        where = f"changes[{i}]"
        obj, action = _action(change, where)
        if action == "setOption":
            options[_text(obj, "key", where)] = _text(obj, "value", where)
        elif action == "removeOption":
            options.pop(_text(obj, "key", where), None)
        elif action == "updateComment":
            comment = _text(obj, "comment", where, nullable=True)
        elif action in ("addDefinition", "updateDefinition"):
            name = _text(obj, "name", where)
            definition = definition_from_json(obj.get("definition"), f"{where}.definition")
            if action == "addDefinition" and name in definitions:
                raise DefinitionAlreadyExistsError(f"definition {name!r} already exists", resource_name=name)
            if action == "updateDefinition" and name not in definitions:
                raise DefinitionNotFoundError(f"definition {name!r} does not exist", resource_name=name)
            definitions[name] = definition
        elif action == "dropDefinition":
            name = _text(obj, "name", where)
            if definitions.pop(name, None) is None:
                raise DefinitionNotFoundError(f"definition {name!r} does not exist", resource_name=name)
        else:
            raise ValidationError(
                f"{where}: unknown function change action {action!r} (known: setOption, removeOption, "
                "updateComment, addDefinition, updateDefinition, dropDefinition)",
                field=f"{where}.action",
            )
    return replace(spec, options=options, definitions=definitions, comment=comment)


# ---- semantic views ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SemanticViewDefinition:
    """A semantic view's definition as Java's ``SemanticViewDefinition`` carries it: ``format`` names the
    model's syntax and encoding (e.g. ``databricks-yaml``), ``content`` the document, kept verbatim (the
    catalog neither parses nor normalises it). Both are non-blank (``ValidationError`` naming the field);
    their sizes are ``model.limits``' to check."""

    format: str
    content: str

    def __post_init__(self) -> None:
        for name in ("format", "content"):
            if not getattr(self, name).strip():
                raise ValidationError(f"definition.{name} must not be blank", field=f"definition.{name}")

    def to_json(self) -> dict[str, str]:
        return {"format": self.format, "content": self.content}
