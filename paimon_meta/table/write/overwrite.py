"""What an OVERWRITE commit replaces: Paimon's static and dynamic partition overwrite.

Java (``FileStoreCommitImpl.overwrite``) and pypaimon decide per commit:

* **dynamic** (a partitioned table with ``dynamic-partition-overwrite = true``, the default): only the
  partitions the new files are in are replaced; an overwrite without new files replaces nothing and
  makes no snapshot.
* **static** (an unpartitioned table, or the option off): every live file matching the partition spec
  is replaced (``{}`` = the whole table), even by no new files (an overwrite of nothing empties it).

One addition to Java: new files must lie inside the partition spec in both modes (Java checks it only
in static mode and leaves dynamic mode to the planner); a file outside it is a ``ValidationError``
naming the file, raised before anything is written.

An :class:`OverwriteSpec` is the resolved decision. It is recorded with the commit's ``prepared`` event
(:meth:`to_json`) so that recovery finishes an interrupted OVERWRITE with exactly the same scope.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from paimon_meta.errors import ValidationError
from paimon_meta.model.binary_row import deserialize_row
from paimon_meta.model.schema import TableSchema


@dataclass(frozen=True, slots=True)
class OverwriteSpec:
    """The scope of one OVERWRITE.

    ``partition``: column -> value (values compare as strings, as Java's partition spec); ``{}`` names
    the whole table. ``dynamic``: replace only the partitions the new files are in. ``any_of``: several
    partition specs, a partition matching any of them is replaced (static only, with ``partition``
    ``{}``: Java's ``truncatePartitions``, one OVERWRITE dropping several partitions).
    """

    partition: Mapping[str, str] = field(default_factory=dict)
    dynamic: bool = False
    any_of: tuple[Mapping[str, str], ...] = ()

    def __post_init__(self) -> None:
        if self.any_of and (self.partition or self.dynamic):
            raise ValidationError("an overwrite of several partitions is static and names no other partition")

    @staticmethod
    def partitions(specs: Sequence[Mapping[str, Any]]) -> OverwriteSpec:
        """A static overwrite of every partition matching one of ``specs`` (each a non-empty spec)."""
        if not specs or not all(specs):
            raise ValidationError("an overwrite of several partitions names at least one non-empty spec")
        return OverwriteSpec(any_of=tuple(_as_strings(s) for s in specs))

    @staticmethod
    def static(partition: Mapping[str, Any] | None = None) -> OverwriteSpec:
        return OverwriteSpec(_as_strings(partition or {}), dynamic=False)

    @staticmethod
    def resolve(spec: Mapping[str, Any] | OverwriteSpec, schema: TableSchema) -> OverwriteSpec:
        """A caller's spec, checked against ``schema``; a plain mapping takes the mode from the table's
        ``dynamic-partition-overwrite`` option (dynamic applies to partitioned tables only)."""
        if isinstance(spec, OverwriteSpec):
            dynamic = spec.dynamic and bool(schema.partition_keys)
            resolved = OverwriteSpec(_as_strings(spec.partition), dynamic, spec.any_of)
        else:
            dynamic = bool(schema.partition_keys) and schema.core_options.dynamic_partition_overwrite
            resolved = OverwriteSpec(_as_strings(spec), dynamic)
        named = set(resolved.partition).union(*(set(s) for s in resolved.any_of))
        unknown = sorted(named - set(schema.partition_keys))
        if unknown:
            raise ValidationError(f"overwrite names non-partition columns {unknown}", fields=unknown)
        return resolved

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"partition": dict(self.partition), "dynamic": self.dynamic}
        if self.any_of:
            out["anyOf"] = [dict(s) for s in self.any_of]
        return out

    @staticmethod
    def from_json(data: Any) -> OverwriteSpec:
        """Inverse of :meth:`to_json`; ``ValidationError`` on anything else."""
        if (
            not isinstance(data, Mapping)
            or not isinstance(data.get("partition"), Mapping)
            or not isinstance(data.get("dynamic"), bool)
        ):
            raise ValidationError(f"not an overwrite spec: {data!r}")
        any_of = data.get("anyOf", [])
        if not isinstance(any_of, list) or not all(isinstance(s, Mapping) for s in any_of):
            raise ValidationError(f"not an overwrite spec: {data!r}")
        return OverwriteSpec(
            _as_strings(data["partition"]), data["dynamic"], tuple(_as_strings(s) for s in any_of)
        )


class PartitionMatcher:
    """Tests serialized partitions (BinaryRow bytes) against an :class:`OverwriteSpec`'s partition spec."""

    def __init__(self, spec: OverwriteSpec, schema: TableSchema) -> None:
        self.spec = spec
        self._keys = list(schema.partition_keys)
        self._types = [f.type for f in schema.partition_type.fields]
        self._memo: dict[bytes, bool] = {}

    def matches(self, partition: bytes) -> bool:
        if not self.spec.partition and not self.spec.any_of:
            return True
        hit = self._memo.get(partition)
        if hit is None:
            values = dict(zip(self._keys, deserialize_row(partition, self._types)))
            specs = self.spec.any_of or (self.spec.partition,)
            hit = any(all(str(values[k]) == v for k, v in s.items()) for s in specs)
            self._memo[partition] = hit
        return hit


def _as_strings(spec: Mapping[str, Any]) -> dict[str, str]:
    return {str(k): str(v) for k, v in spec.items()}
