"""The service's ``Access`` decides on the assignments that may reach the resource (an index by the
resource they name), not on all of them: the answers are exactly ``governance.evaluate.decide``'s and
``sees``' on every assignment, for random sets of assignments of every type, with groups and expiries,
and every resource type and access."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

from paimon_meta.governance.evaluate import Subject, decide, sees
from paimon_meta.governance.permissions import (
    APPLICABLE,
    Assignment,
    ColumnRange,
    Resource,
    ResourceType,
)
from paimon_meta.metastore.principals import Access as ServiceAccess
from paimon_meta.metastore.principals import Held

R = ResourceType
NOW = datetime(2030, 1, 1, tzinfo=UTC)
DATABASES, OBJECTS = ("d1", "d2"), ("a", "b")


def _resources() -> list[Resource]:
    out = [Resource.catalog(), Resource.catalog_all()]
    for db in DATABASES:
        out += [Resource.of_database(db), Resource.database_all(db)]
        for name in OBJECTS:
            out += [Resource.table(db, name), Resource.view(db, name), Resource.function(db, name)]
            out.append(Resource.column(db, name))
    return out


RESOURCES = _resources()


def _random_assignment(rng: random.Random, principals: tuple[str, ...]) -> Assignment:
    resource = rng.choice(RESOURCES)
    access = rng.choice(sorted(APPLICABLE[resource.type]))
    columns = None
    if resource.type is R.COLUMN:
        names = rng.sample(["x", "y", "z"], rng.randint(1, 3))
        columns = ColumnRange.allowlist(names) if rng.random() < 0.5 else ColumnRange.denylist(names)
    expire = rng.choice([None, None, NOW - timedelta(seconds=1), NOW, NOW + timedelta(seconds=1)])
    return Assignment(rng.choice(principals), resource, access, columns=columns, expire_time=expire)


def test_the_index_answers_as_deciding_on_every_assignment() -> None:
    rng = random.Random(36)
    subject = Subject("alice", ("group:g",))
    checked = 0
    for _ in range(300):
        assignments = tuple(
            _random_assignment(rng, ("alice", "group:g", "bob")) for _ in range(rng.randint(0, 12))
        )
        access = ServiceAccess(
            "alice", (), groups=("group:g",), held=tuple(Held(None, a) for a in assignments)
        )
        for resource in RESOURCES:
            if resource.type is R.COLUMN:
                continue
            for needs in sorted(APPLICABLE[resource.type]):
                full = decide(assignments, subject, resource, needs, at=NOW)
                assert access.decide(resource, needs, at=NOW) == full, (assignments, resource, needs)
                checked += 1
        for db in (*DATABASES, "d3"):
            assert access.sees(db, at=NOW) == sees(assignments, subject, db, NOW)
    assert checked > 10_000
