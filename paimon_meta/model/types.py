"""Paimon data types, parsed from and printed to the type strings of Paimon's schema JSON.

Matches ``org.apache.paimon.types.*`` (``asSQLString``) and ``DataTypeJsonParser``: atomic types are JSON
strings such as ``"INT NOT NULL"``, ``"DECIMAL(23, 5)"``, ``"TIMESTAMP(6) WITH LOCAL TIME ZONE"``; nested
types are JSON objects ``{"type": "ARRAY", "element": ...}``, ``{"type": "MAP", "key": ..., "value": ...}``,
``{"type": "ROW", "fields": [...]}`` and ``{"type": "MULTISET", "element": ...}`` (the ``type`` string may
carry ``NOT NULL``).
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, replace
from typing import Any

from paimon_meta.errors import ValidationError

MAX_LENGTH = 2147483647  # Java Integer.MAX_VALUE: VARCHAR(MAX) prints as STRING, VARBINARY(MAX) as BYTES


class TypeRoot(enum.Enum):
    BOOLEAN = "BOOLEAN"
    TINYINT = "TINYINT"
    SMALLINT = "SMALLINT"
    INT = "INT"
    BIGINT = "BIGINT"
    FLOAT = "FLOAT"
    DOUBLE = "DOUBLE"
    DECIMAL = "DECIMAL"
    CHAR = "CHAR"
    VARCHAR = "VARCHAR"
    BINARY = "BINARY"
    VARBINARY = "VARBINARY"
    DATE = "DATE"
    TIME = "TIME"
    TIMESTAMP = "TIMESTAMP"
    TIMESTAMP_LTZ = "TIMESTAMP_LTZ"
    VARIANT = "VARIANT"
    BLOB = "BLOB"
    ARRAY = "ARRAY"
    MULTISET = "MULTISET"
    MAP = "MAP"
    ROW = "ROW"

    # Members are singletons compared by identity, so the identity hash is consistent with equality;
    # Enum's default hashes the name in Python code, which dominated encoding rows field by field.
    __hash__ = object.__hash__


FIXED_WIDTH_ROOTS = frozenset(
    {
        TypeRoot.BOOLEAN,
        TypeRoot.TINYINT,
        TypeRoot.SMALLINT,
        TypeRoot.INT,
        TypeRoot.BIGINT,
        TypeRoot.FLOAT,
        TypeRoot.DOUBLE,
        TypeRoot.DATE,
        TypeRoot.TIME,
    }
)


@dataclass(frozen=True, slots=True)
class DataType:
    """Base of every Paimon type. ``nullable`` is part of the type, as in Java."""

    nullable: bool

    @property
    def root(self) -> TypeRoot:
        raise NotImplementedError

    def with_nullable(self, nullable: bool) -> DataType:
        return replace(self, nullable=nullable)

    def sql(self) -> str:
        """The type string without nullability (``DECIMAL(10, 2)``)."""
        raise NotImplementedError

    def to_json(self) -> Any:
        """The JSON form used in schema files: a string for atomic types, an object for nested ones."""
        return self.sql() + ("" if self.nullable else " NOT NULL")

    def __str__(self) -> str:
        return self.sql() + ("" if self.nullable else " NOT NULL")


@dataclass(frozen=True, slots=True)
class AtomicType(DataType):
    """A type with no children. ``length`` for CHAR/VARCHAR/BINARY/VARBINARY, ``precision``/``scale`` for
    DECIMAL, ``precision`` for TIME/TIMESTAMP/TIMESTAMP_LTZ."""

    type_root: TypeRoot
    length: int | None = None
    precision: int | None = None
    scale: int | None = None

    @property
    def root(self) -> TypeRoot:
        return self.type_root

    def sql(self) -> str:
        r = self.type_root
        if r is TypeRoot.VARCHAR and self.length == MAX_LENGTH:
            return "STRING"
        if r is TypeRoot.VARBINARY and self.length == MAX_LENGTH:
            return "BYTES"
        if r in (TypeRoot.CHAR, TypeRoot.VARCHAR, TypeRoot.BINARY, TypeRoot.VARBINARY):
            return f"{r.value}({self.length})"
        if r is TypeRoot.DECIMAL:
            return f"DECIMAL({self.precision}, {self.scale})"
        if r in (TypeRoot.TIME, TypeRoot.TIMESTAMP):
            return f"{r.value}({self.precision})"
        if r is TypeRoot.TIMESTAMP_LTZ:
            return f"TIMESTAMP({self.precision}) WITH LOCAL TIME ZONE"
        return str(r.value)


@dataclass(frozen=True, slots=True)
class ArrayType(DataType):
    element: DataType

    @property
    def root(self) -> TypeRoot:
        return TypeRoot.ARRAY

    def sql(self) -> str:
        return f"ARRAY<{self.element}>"

    def to_json(self) -> Any:
        return {"type": "ARRAY" + ("" if self.nullable else " NOT NULL"), "element": self.element.to_json()}


@dataclass(frozen=True, slots=True)
class MultisetType(DataType):
    element: DataType

    @property
    def root(self) -> TypeRoot:
        return TypeRoot.MULTISET

    def sql(self) -> str:
        return f"MULTISET<{self.element}>"

    def to_json(self) -> Any:
        return {
            "type": "MULTISET" + ("" if self.nullable else " NOT NULL"),
            "element": self.element.to_json(),
        }


@dataclass(frozen=True, slots=True)
class MapType(DataType):
    key: DataType
    value: DataType

    @property
    def root(self) -> TypeRoot:
        return TypeRoot.MAP

    def sql(self) -> str:
        return f"MAP<{self.key}, {self.value}>"

    def to_json(self) -> Any:
        return {
            "type": "MAP" + ("" if self.nullable else " NOT NULL"),
            "key": self.key.to_json(),
            "value": self.value.to_json(),
        }


@dataclass(frozen=True, slots=True)
class DataField:
    """A named, id-carrying field of a row type or table schema (``org.apache.paimon.types.DataField``)."""

    id: int
    name: str
    type: DataType
    description: str | None = None
    default_value: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "name": self.name, "type": self.type.to_json()}
        if self.description is not None:
            out["description"] = self.description
        if self.default_value is not None:
            out["defaultValue"] = self.default_value
        return out

    @staticmethod
    def from_json(obj: Any) -> DataField:
        if not isinstance(obj, dict):
            raise ValidationError(f"a data field must be a JSON object, got {obj!r}")
        try:
            fid, name, typ = obj["id"], obj["name"], obj["type"]
        except KeyError as e:
            raise ValidationError(f"data field {obj!r} lacks {e.args[0]!r}", field=e.args[0]) from e
        if not isinstance(fid, int) or not isinstance(name, str):
            raise ValidationError(f"data field {obj!r} has a bad id or name")
        return DataField(fid, name, parse_type(typ), obj.get("description"), obj.get("defaultValue"))


@dataclass(frozen=True, slots=True)
class RowType(DataType):
    fields: tuple[DataField, ...]

    @property
    def root(self) -> TypeRoot:
        return TypeRoot.ROW

    def sql(self) -> str:
        return "ROW<" + ", ".join(f"{f.name} {f.type}" for f in self.fields) + ">"

    def to_json(self) -> Any:
        return {
            "type": "ROW" + ("" if self.nullable else " NOT NULL"),
            "fields": [f.to_json() for f in self.fields],
        }

    @property
    def field_names(self) -> list[str]:
        return [f.name for f in self.fields]

    def field(self, name: str) -> DataField:
        for f in self.fields:
            if f.name == name:
                return f
        raise ValidationError(f"no field named {name!r}", field=name)


# ---- constructors -------------------------------------------------------------------------------------


def _atomic(root: TypeRoot, nullable: bool = True, **kw: int | None) -> AtomicType:
    return AtomicType(nullable, root, **kw)


def BOOLEAN(nullable: bool = True) -> AtomicType:
    return _atomic(TypeRoot.BOOLEAN, nullable)


def TINYINT(nullable: bool = True) -> AtomicType:
    return _atomic(TypeRoot.TINYINT, nullable)


def SMALLINT(nullable: bool = True) -> AtomicType:
    return _atomic(TypeRoot.SMALLINT, nullable)


def INT(nullable: bool = True) -> AtomicType:
    return _atomic(TypeRoot.INT, nullable)


def BIGINT(nullable: bool = True) -> AtomicType:
    return _atomic(TypeRoot.BIGINT, nullable)


def FLOAT(nullable: bool = True) -> AtomicType:
    return _atomic(TypeRoot.FLOAT, nullable)


def DOUBLE(nullable: bool = True) -> AtomicType:
    return _atomic(TypeRoot.DOUBLE, nullable)


def DECIMAL(precision: int, scale: int, nullable: bool = True) -> AtomicType:
    return _atomic(TypeRoot.DECIMAL, nullable, precision=precision, scale=scale)


def STRING(nullable: bool = True) -> AtomicType:
    return _atomic(TypeRoot.VARCHAR, nullable, length=MAX_LENGTH)


def VARCHAR(length: int, nullable: bool = True) -> AtomicType:
    return _atomic(TypeRoot.VARCHAR, nullable, length=length)


def CHAR(length: int, nullable: bool = True) -> AtomicType:
    return _atomic(TypeRoot.CHAR, nullable, length=length)


def BYTES(nullable: bool = True) -> AtomicType:
    return _atomic(TypeRoot.VARBINARY, nullable, length=MAX_LENGTH)


def VARBINARY(length: int, nullable: bool = True) -> AtomicType:
    return _atomic(TypeRoot.VARBINARY, nullable, length=length)


def BINARY(length: int, nullable: bool = True) -> AtomicType:
    return _atomic(TypeRoot.BINARY, nullable, length=length)


def DATE(nullable: bool = True) -> AtomicType:
    return _atomic(TypeRoot.DATE, nullable)


def TIME(precision: int = 0, nullable: bool = True) -> AtomicType:
    return _atomic(TypeRoot.TIME, nullable, precision=precision)


def TIMESTAMP(precision: int = 6, nullable: bool = True) -> AtomicType:
    return _atomic(TypeRoot.TIMESTAMP, nullable, precision=precision)


def TIMESTAMP_LTZ(precision: int = 6, nullable: bool = True) -> AtomicType:
    return _atomic(TypeRoot.TIMESTAMP_LTZ, nullable, precision=precision)


# ---- parsing --------------------------------------------------------------------------------------------

_NOT_NULL = re.compile(r"\s+NOT\s+NULL\s*$", re.IGNORECASE)
_NULL = re.compile(r"\s+NULL\s*$", re.IGNORECASE)
_ATOMIC = re.compile(
    r"^\s*(?P<name>[A-Z_]+(?:\s+[A-Z_]+)*?)\s*(?:\(\s*(?P<a>\d+)\s*(?:,\s*(?P<b>\d+)\s*)?\))?"
    r"(?P<ltz>\s+WITH\s+LOCAL\s+TIME\s+ZONE)?\s*$",
    re.IGNORECASE,
)

_SIMPLE = {
    "BOOLEAN": TypeRoot.BOOLEAN,
    "TINYINT": TypeRoot.TINYINT,
    "SMALLINT": TypeRoot.SMALLINT,
    "INT": TypeRoot.INT,
    "INTEGER": TypeRoot.INT,
    "BIGINT": TypeRoot.BIGINT,
    "FLOAT": TypeRoot.FLOAT,
    "DOUBLE": TypeRoot.DOUBLE,
    "DOUBLE PRECISION": TypeRoot.DOUBLE,
    "DATE": TypeRoot.DATE,
    "VARIANT": TypeRoot.VARIANT,
    "BLOB": TypeRoot.BLOB,
}


def _split_nullability(text: str) -> tuple[str, bool]:
    if _NOT_NULL.search(text):
        return _NOT_NULL.sub("", text), False
    if _NULL.search(text):
        return _NULL.sub("", text), True
    return text.strip(), True


def _parse_atomic(text: str) -> DataType:
    body, nullable = _split_nullability(text)
    upper = body.upper()
    if upper.startswith(("ARRAY<", "MAP<", "ROW<", "MULTISET<")):
        return _parse_angle(body, nullable)
    m = _ATOMIC.match(body)
    if not m:
        raise ValidationError(f"cannot parse Paimon type {text!r}", type=text)
    name = " ".join(m.group("name").upper().split())
    a = int(m.group("a")) if m.group("a") is not None else None
    b = int(m.group("b")) if m.group("b") is not None else None
    ltz = m.group("ltz") is not None
    if name in _SIMPLE and a is None and not ltz:
        return _atomic(_SIMPLE[name], nullable)
    if name == "STRING" and a is None:
        return STRING(nullable)
    if name == "BYTES" and a is None:
        return BYTES(nullable)
    if name in ("VARCHAR", "CHAR", "BINARY", "VARBINARY"):
        length = a if a is not None else 1
        if length < 1:
            raise ValidationError(f"{name} length must be >= 1 in {text!r}", type=text)
        return _atomic(TypeRoot[name], nullable, length=length)
    if name in ("DECIMAL", "DEC", "NUMERIC"):
        p = a if a is not None else 10
        s = b if b is not None else 0
        if not (1 <= p <= 38 and 0 <= s <= p):
            raise ValidationError(f"bad DECIMAL precision/scale in {text!r}", type=text)
        return DECIMAL(p, s, nullable)
    if name == "TIME" and not ltz:
        return TIME(a if a is not None else 0, nullable)
    if name in ("TIMESTAMP", "TIMESTAMP_LTZ", "TIMESTAMP WITHOUT TIME ZONE"):
        p = a if a is not None else 6
        if not 0 <= p <= 9:
            raise ValidationError(f"timestamp precision must be 0..9 in {text!r}", type=text)
        if ltz or name == "TIMESTAMP_LTZ":
            return TIMESTAMP_LTZ(p, nullable)
        return TIMESTAMP(p, nullable)
    raise ValidationError(f"unknown Paimon type {text!r}", type=text)


def _split_top_level(text: str) -> list[str]:
    """Split on commas that are not nested inside <> or ()."""
    parts: list[str] = []
    depth = 0
    start = 0
    for i, ch in enumerate(text):
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts]


def _parse_angle(body: str, nullable: bool) -> DataType:
    """Parse the SQL forms ``ARRAY<T>``, ``MAP<K, V>``, ``MULTISET<T>``, ``ROW<name T, ...>``."""
    lt = body.index("<")
    if not body.rstrip().endswith(">"):
        raise ValidationError(f"cannot parse Paimon type {body!r}", type=body)
    kind = body[:lt].strip().upper()
    inner = body[lt + 1 : body.rstrip().rfind(">")]
    if kind == "ARRAY":
        return ArrayType(nullable, parse_type(inner))
    if kind == "MULTISET":
        return MultisetType(nullable, parse_type(inner))
    if kind == "MAP":
        parts = _split_top_level(inner)
        if len(parts) != 2:
            raise ValidationError(f"MAP needs a key and a value type: {body!r}", type=body)
        return MapType(nullable, parse_type(parts[0]), parse_type(parts[1]))
    fields = []
    for i, part in enumerate(_split_top_level(inner)):
        name, _, typ = part.partition(" ")
        fields.append(DataField(i, name.strip("`"), parse_type(typ)))
    return RowType(nullable, tuple(fields))


def parse_type(obj: Any) -> DataType:
    """Parse a type from its schema-JSON form (string or object). Raises ValidationError naming it."""
    if isinstance(obj, str):
        return _parse_atomic(obj)
    if not isinstance(obj, dict) or not isinstance(obj.get("type"), str):
        raise ValidationError(f"cannot parse Paimon type {obj!r}", type=repr(obj))
    kind, nullable = _split_nullability(obj["type"])
    kind = kind.upper()
    try:
        if kind == "ARRAY":
            return ArrayType(nullable, parse_type(obj["element"]))
        if kind == "MULTISET":
            return MultisetType(nullable, parse_type(obj["element"]))
        if kind == "MAP":
            return MapType(nullable, parse_type(obj["key"]), parse_type(obj["value"]))
        if kind == "ROW":
            fields = obj["fields"]
            if not isinstance(fields, list):
                raise ValidationError(f"ROW type 'fields' must be a list, got {fields!r}", type=repr(obj))
            return RowType(nullable, tuple(DataField.from_json(f) for f in fields))
    except KeyError as e:
        raise ValidationError(f"type {obj!r} lacks {e.args[0]!r}", type=repr(obj)) from e
    return _parse_atomic(obj["type"])
