"""The audit views' archive twins, for readers without Spark: ``paimon_commit_history``,
``paimon_commit_conflicts`` and ``paimon_commit_retries`` (migrations 0001 and 0018; docs/AUDIT.md)
computed over archived event rows, with the same columns and the same values the SQL views give over the
live log (``spark_jobs/audit_archive.py`` defines the same twins in Spark SQL).

Each function takes event rows as dicts of the archive's columns (``payload`` as JSON text, ``created_at``
as UTC without a zone: :mod:`paimon_meta.archive.table`) and returns the view's rows, timestamps in UTC
without a zone. Conflicts and retries are one row per event: the live view and the twin of one log are
a disjoint union. History is one row per commit: a commit whose events straddle the boundary of two
event log partitions (archived at different times) has a row in each, each over its own events;
:func:`commit_history` over the live and the archived events together is the one answer (what
``paimon-meta audit --archive`` prints).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from paimon_meta.archive.table import IDENTIFIER

_PUBLISHING = ("snapshot_published", "external", "recovered")
_FINAL = ("failed", "aborted", "recovered")
_OUTCOMES = (
    ("snapshot_published", "published"),
    ("external", "external"),
    ("recovered", "recovered"),
    ("failed", "failed"),
    ("aborted", "aborted"),
)

HISTORY_COLUMNS = (
    "commit_id",
    "table_id",
    "table_identifier",
    "commit_user",
    "commit_identifier",
    "commit_kind",
    "outcome",
    "snapshot_id",
    "attempts",
    "retries",
    "conflicts",
    "prepare_ms",
    "conflict_check_ms",
    "publish_ms",
    "retry_wait_ms",
    "final_reason",
    "first_event_at",
    "last_event_at",
    "elapsed_ms",
    "event_count",
    "principal",
)
CONFLICT_COLUMNS = (
    "event_id",
    "commit_id",
    "table_id",
    "table_identifier",
    "commit_user",
    "commit_identifier",
    "commit_kind",
    "attempt",
    "base_snapshot_id",
    "reason",
    "details",
    "created_at",
)
RETRY_COLUMNS = (
    "event_id",
    "commit_id",
    "table_id",
    "table_identifier",
    "commit_user",
    "commit_identifier",
    "commit_kind",
    "attempt",
    "reason",
    "wait_ms",
    "created_at",
)
#: The twins by the view they answer for.
VIEWS = ("paimon_commit_history", "paimon_commit_conflicts", "paimon_commit_retries")
#: Where the twins read from, in every catalog.
SOURCE = IDENTIFIER


def _json(event: Mapping[str, Any]) -> dict[str, Any]:
    payload = event["payload"]
    if isinstance(payload, str):
        parsed = json.loads(payload)
        return parsed if isinstance(parsed, dict) else {}
    return dict(payload)


def _text(value: Any) -> str | None:
    """JSONB ``->>``: a string as is, null as NULL, anything else as its JSON text."""
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, separators=(", ", ": ")) if isinstance(value, dict | list) else json.dumps(value)


def _number(value: Any) -> float | None:
    text = _text(value)
    return None if text is None else float(text)


def _sum(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) if present else None


def _conflict(event: Mapping[str, Any], payload: Mapping[str, Any]) -> bool:
    return event["event_type"] == "conflict_checked" and payload.get("conflict") is True


def commit_history(events: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``paimon_commit_history``: one row per ``commit_id`` of ``events`` (ordered by commit id)."""
    by_commit: dict[str, list[tuple[Mapping[str, Any], dict[str, Any]]]] = defaultdict(list)
    for e in events:
        by_commit[str(e["commit_id"])].append((e, _json(e)))
    out: list[dict[str, Any]] = []
    for commit_id in sorted(by_commit):
        rows = sorted(by_commit[commit_id], key=lambda r: int(r[0]["event_id"]))
        types = {e["event_type"] for e, _ in rows}
        outcome = next((name for t, name in _OUTCOMES if t in types), "pending")
        published = [e["snapshot_id"] for e, _ in rows if e["event_type"] in _PUBLISHING]
        published = [s for s in published if s is not None]
        finals = [p.get("reason") for e, p in reversed(rows) if e["event_type"] in _FINAL]
        principals = [
            e["principal"] for e, _ in rows if e["event_type"] == "prepared" and e["principal"] is not None
        ]
        times: list[datetime] = [e["created_at"] for e, _ in rows]
        first, last = min(times), max(times)

        def ms(kind: str, rows: Sequence[tuple[Mapping[str, Any], dict[str, Any]]] = rows) -> float | None:
            return _sum(e["duration_ms"] for e, _ in rows if e["event_type"] == kind)

        out.append(
            {
                "commit_id": commit_id,
                "table_id": min(e["table_id"] for e, _ in rows),
                "table_identifier": min(e["table_identifier"] for e, _ in rows),
                "commit_user": min(e["commit_user"] for e, _ in rows),
                "commit_identifier": min(e["commit_identifier"] for e, _ in rows),
                "commit_kind": min(e["commit_kind"] for e, _ in rows),
                "outcome": outcome,
                "snapshot_id": max(published) if published else None,
                "attempts": max(e["attempt"] for e, _ in rows),
                "retries": sum(1 for e, _ in rows if e["event_type"] == "retried"),
                "conflicts": sum(1 for e, p in rows if _conflict(e, p)),
                "prepare_ms": ms("prepared"),
                "conflict_check_ms": ms("conflict_checked"),
                "publish_ms": ms("snapshot_published"),
                "retry_wait_ms": _sum(
                    _number(p.get("wait_ms")) for e, p in rows if e["event_type"] == "retried"
                ),
                "final_reason": _text(finals[0]) if finals else None,
                "first_event_at": first,
                "last_event_at": last,
                "elapsed_ms": (last - first).total_seconds() * 1000,
                "event_count": len(rows),
                "principal": principals[0] if principals else None,
            }
        )
    return out


def _event_columns(e: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "event_id": e["event_id"],
        "commit_id": str(e["commit_id"]),
        "table_id": e["table_id"],
        "table_identifier": e["table_identifier"],
        "commit_user": e["commit_user"],
        "commit_identifier": e["commit_identifier"],
        "commit_kind": e["commit_kind"],
        "attempt": e["attempt"],
    }


def commit_conflicts(events: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``paimon_commit_conflicts``: one row per failed conflict check (ordered by event id)."""
    out = []
    for e in sorted(events, key=lambda e: int(e["event_id"])):
        p = _json(e)
        if not _conflict(e, p):
            continue
        base = _text(p.get("base_snapshot_id"))
        out.append(
            {
                **_event_columns(e),
                "base_snapshot_id": None if base is None else int(base),
                "reason": _text(p.get("reason")),
                "details": p,
                "created_at": e["created_at"],
            }
        )
    return out


def commit_retries(events: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``paimon_commit_retries``: one row per retried attempt (ordered by event id)."""
    out = []
    for e in sorted(events, key=lambda e: int(e["event_id"])):
        if e["event_type"] != "retried":
            continue
        p = _json(e)
        out.append(
            {
                **_event_columns(e),
                "reason": _text(p.get("reason")),
                "wait_ms": _number(p.get("wait_ms")),
                "created_at": e["created_at"],
            }
        )
    return out


TWINS = {
    "paimon_commit_history": commit_history,
    "paimon_commit_conflicts": commit_conflicts,
    "paimon_commit_retries": commit_retries,
}
