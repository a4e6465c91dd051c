"""The commit log partitioned by time (issue 39 item 6): ``paimon_commit_events`` becomes a table
declaratively partitioned ``BY RANGE (created_at)``, so that events older than a catalog's retention can be
archived and then dropped a whole partition at a time (``paimon_meta.metastore.event_partitions``).

* The existing table becomes the first partition, ``paimon_commit_events_p0``, for ``FROM (MINVALUE) TO
  (X)``, X the start of the next period after the migration (periods of 7 days aligned on Mondays 00:00
  UTC); the partitioned parent takes the old name, columns, defaults, CHECK constraints, indexes (as
  partitioned indexes: p0's own indexes are attached to them, not rebuilt), the append-only statement
  trigger (0001; created on every partition too, since a statement sent to a partition directly does not
  fire the parent's) and the feed NOTIFY trigger (0011). Two partitions ahead, [X, X+7d) and [X+7d,
  X+14d), are created; the service makes the next ones ahead (``EventPartitions.ensure_ahead``). There is
  no DEFAULT partition: an event at a time no partition covers is refused (Postgres ``no partition of
  relation``, mapped to ``EventLogPartitionMissing``) rather than parked where every later partition
  creation would have to scan it.
* ``pk_paimon_commit_events`` is (event_id, created_at): a partitioned table's unique indexes must include
  the partition key. Event ids stay unique: one sequence gives them all. The sequence is re-owned by the
  parent's column, so dropping a partition never drops it.
* The two database backstops that cannot be partitioned indexes (their keys do not include created_at):
  "no snapshot id is published twice" and "a commit publishes at most one snapshot" are enforced by
  ``paimon_published_snapshots``, an unpartitioned ledger of the publishing events filled by a row trigger
  on the log in the inserting transaction, whose unique indexes carry the old names
  (``uq_paimon_commit_events_table_snapshot``, ``uq_paimon_commit_events_commit_published``): a second
  publishing event fails its INSERT with the same IntegrityError as before. The ledger is filled here
  from the existing publishing events.
* ``paimon_event_partitions`` (the registry: every partition made, by whom, when it was dropped, by whom)
  and ``paimon_event_archives`` (which catalog's events of a partition were archived into which snapshot
  of the catalog's ``system.commit_log``, by whom): plain tables, the audit of the partition lifecycle.
* The views over the log (``paimon_commit_history``, ``_conflicts``, ``_retries``) are re-bound to the
  parent (a view follows the table it was created on: after the rename it would read p0 alone).

Cost: one transaction holding the log's ACCESS EXCLUSIVE lock (writes of the commit log wait for it) that
validates ``CHECK (created_at < X)`` on the old table (one sequential scan; the ATTACH then skips its own
scan), builds p0's new primary key (event_id, created_at) (one index build) and copies the publishing
events into the ledger (a scan of the old unique index). On a huge log, an operator shortens the lock to
catalog changes by doing the slow parts first, online, while the previous release runs::

    CREATE UNIQUE INDEX CONCURRENTLY paimon_commit_events_p0_pkey
        ON paimon_commit_events (event_id, created_at);
    ALTER TABLE paimon_commit_events ADD CONSTRAINT ck_paimon_commit_events_p0_range
        CHECK (created_at < 'NEXT-MONDAY 00:00:00+00') NOT VALID;      -- a bound after the upgrade
    ALTER TABLE paimon_commit_events VALIDATE CONSTRAINT ck_paimon_commit_events_p0_range;

The migration then uses the index as p0's primary key (``ADD PRIMARY KEY USING INDEX``) and the validated
constraint's bound as X (if it is still in the future), instead of building and scanning.

Kind: expand (changes the structure the previous release writes, keeping every name it uses): a replica
of the previous release keeps working on it. Its SQL on the log is plain INSERT ... RETURNING and SELECT
(none is ON CONFLICT on the log, which would need an arbiter index the parent cannot have): INSERT routes
to the partition of ``created_at`` (its default, ``clock_timestamp()``, lies in a partition made ahead),
SELECTs read every partition, and its handling of a second publish matches the unique index names,
which the ledger keeps.

Downgrade: the log is copied back into a plain table (every partition still present; partitions dropped
after archiving stay archived), with its 0023 primary key, indexes and triggers; the ledger and registry
tables are dropped.

Revision ID: 0024
Revises: 0023
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0024"
down_revision: str | None = "0023"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# The whole upgrade is one PL/pgSQL block so that it reads the database it runs on (the time, the
# operator's pre-built index and range constraint, the indexes and views of the log as they are) the same
# way online and in an offline script (``alembic upgrade --sql``). The period, its anchor and the
# partition names are those of paimon_meta.metastore.event_partitions as they are at this revision.
UPGRADE = r"""
DO $migration$
DECLARE
    period constant interval := interval '7 days';
    anchor constant timestamptz := make_timestamptz(2000, 1, 3, 0, 0, 0, 'UTC');  -- a Monday
    ahead constant integer := 2;
    now_at timestamptz;
    bound timestamptz;
    range_def text;
    range_valid boolean;
    prebuilt boolean;
    view_names text[] := '{}';
    view_bodies text[] := '{}';
    index_names text[] := '{}';
    index_defs text[] := '{}';
    r record;
    i integer;
    part_start timestamptz;
    part_end timestamptz;
    part_name text;
BEGIN
    LOCK TABLE paimon_commit_events IN ACCESS EXCLUSIVE MODE;
    now_at := clock_timestamp();
    bound := anchor + (floor(extract(epoch FROM now_at - anchor) / extract(epoch FROM period)) + 1) * period;
    -- An operator's validated range constraint (see the header) sets the bound if it is still ahead.
    SELECT pg_get_constraintdef(c.oid), c.convalidated INTO range_def, range_valid FROM pg_constraint c
     WHERE c.conrelid = 'paimon_commit_events'::regclass AND c.conname = 'ck_paimon_commit_events_p0_range';
    IF range_def IS NOT NULL THEN
        IF range_valid AND range_def ~ '^CHECK \(\(created_at < ''[^'']+''::timestamp with time zone\)\)$'
           AND substring(range_def FROM '''([^'']+)''')::timestamptz > now_at THEN
            bound := substring(range_def FROM '''([^'']+)''')::timestamptz;
        ELSE
            ALTER TABLE paimon_commit_events DROP CONSTRAINT ck_paimon_commit_events_p0_range;
            range_def := NULL;
        END IF;
    END IF;
    FOR r IN SELECT DISTINCT v.relname::text AS name, pg_get_viewdef(v.oid) AS body FROM pg_depend d
               JOIN pg_rewrite w ON w.oid = d.objid JOIN pg_class v ON v.oid = w.ev_class
              WHERE d.refobjid = 'paimon_commit_events'::regclass AND v.relkind = 'v' ORDER BY 1 LOOP
        view_names := view_names || r.name;
        view_bodies := view_bodies || r.body;
    END LOOP;
    FOR r IN SELECT indexname::text AS name, indexdef AS def FROM pg_indexes
              WHERE schemaname = current_schema() AND tablename = 'paimon_commit_events'
                AND indexname NOT IN ('pk_paimon_commit_events', 'paimon_commit_events_p0_pkey',
                                      'uq_paimon_commit_events_table_snapshot',
                                      'uq_paimon_commit_events_commit_published')
              ORDER BY 1 LOOP
        index_names := index_names || r.name;
        index_defs := index_defs || r.def;
    END LOOP;
    prebuilt := to_regclass('paimon_commit_events_p0_pkey') IS NOT NULL;

    -- The old table becomes p0: its indexes and primary key free their names for the parent's.
    ALTER TABLE paimon_commit_events RENAME TO paimon_commit_events_p0;
    ALTER TABLE paimon_commit_events_p0
        RENAME CONSTRAINT pk_paimon_commit_events TO paimon_commit_events_p0_old_pkey;
    FOR i IN 1 .. coalesce(array_length(index_names, 1), 0) LOOP
        EXECUTE 'ALTER INDEX ' || quote_ident(index_names[i])
                || ' RENAME TO ' || quote_ident(index_names[i] || '_p0');
    END LOOP;
    DROP TRIGGER paimon_commit_events_feed_notify ON paimon_commit_events_p0;  -- the parent's fires

    -- The ledger of publishing events, under the two unique indexes' names, filled from p0.
    CREATE TABLE paimon_published_snapshots (
        event_id bigint NOT NULL,
        created_at timestamptz NOT NULL,
        table_id bigint NOT NULL,
        branch text NOT NULL,
        timeline integer NOT NULL,
        snapshot_id bigint NOT NULL,
        commit_id uuid NOT NULL,
        event_type text NOT NULL,
        CONSTRAINT pk_paimon_published_snapshots PRIMARY KEY (event_id),
        CONSTRAINT ck_paimon_published_snapshots_event_type
            CHECK (event_type IN ('snapshot_published', 'external'))
    );
    CREATE INDEX ix_paimon_published_snapshots_created_at ON paimon_published_snapshots (created_at);
    INSERT INTO paimon_published_snapshots
        (event_id, created_at, table_id, branch, timeline, snapshot_id, commit_id, event_type)
    SELECT event_id, created_at, table_id, branch, timeline, snapshot_id, commit_id, event_type
      FROM paimon_commit_events_p0 WHERE event_type IN ('snapshot_published', 'external');
    DROP INDEX uq_paimon_commit_events_table_snapshot;
    DROP INDEX uq_paimon_commit_events_commit_published;
    CREATE UNIQUE INDEX uq_paimon_commit_events_table_snapshot
        ON paimon_published_snapshots (table_id, branch, timeline, snapshot_id);
    CREATE UNIQUE INDEX uq_paimon_commit_events_commit_published
        ON paimon_published_snapshots (commit_id) WHERE event_type = 'snapshot_published';

    -- p0's primary key includes the partition key; its range is a validated CHECK (no scan at ATTACH).
    ALTER TABLE paimon_commit_events_p0 DROP CONSTRAINT paimon_commit_events_p0_old_pkey;
    IF prebuilt THEN
        ALTER TABLE paimon_commit_events_p0
            ADD CONSTRAINT paimon_commit_events_p0_pkey PRIMARY KEY USING INDEX paimon_commit_events_p0_pkey;
    ELSE
        ALTER TABLE paimon_commit_events_p0
            ADD CONSTRAINT paimon_commit_events_p0_pkey PRIMARY KEY (event_id, created_at);
    END IF;
    IF range_def IS NULL THEN
        EXECUTE 'ALTER TABLE paimon_commit_events_p0 ADD CONSTRAINT ck_paimon_commit_events_p0_range '
                || 'CHECK (created_at < ' || quote_literal(bound) || '::timestamptz)';
    END IF;

    -- The parent, under the old name: p0's columns, defaults and CHECK constraints (its range excepted).
    CREATE TABLE paimon_commit_events
        (LIKE paimon_commit_events_p0 INCLUDING DEFAULTS INCLUDING CONSTRAINTS)
        PARTITION BY RANGE (created_at);
    ALTER TABLE paimon_commit_events DROP CONSTRAINT ck_paimon_commit_events_p0_range;
    ALTER TABLE paimon_commit_events
        ADD CONSTRAINT pk_paimon_commit_events PRIMARY KEY (event_id, created_at);
    FOR i IN 1 .. coalesce(array_length(index_defs, 1), 0) LOOP
        EXECUTE index_defs[i];  -- "CREATE INDEX <name> ON <schema>.paimon_commit_events ...": the parent now
    END LOOP;
    -- Owned by the parent's column: dropping a partition never drops the sequence.
    ALTER SEQUENCE paimon_commit_events_event_id_seq OWNED BY paimon_commit_events.event_id;
    EXECUTE 'ALTER TABLE paimon_commit_events ATTACH PARTITION paimon_commit_events_p0 '
            || 'FOR VALUES FROM (MINVALUE) TO (' || quote_literal(bound) || ')';
    ALTER TABLE paimon_commit_events_p0 DROP CONSTRAINT ck_paimon_commit_events_p0_range;

    CREATE TRIGGER trg_paimon_commit_events_append_only BEFORE UPDATE OR DELETE OR TRUNCATE
        ON paimon_commit_events FOR EACH STATEMENT EXECUTE FUNCTION paimon_reject_event_mutation();
    CREATE TRIGGER paimon_commit_events_feed_notify AFTER INSERT ON paimon_commit_events
        FOR EACH STATEMENT EXECUTE FUNCTION paimon_meta_feed_notify();
    CREATE FUNCTION paimon_commit_events_publish() RETURNS trigger LANGUAGE plpgsql AS $fn$
    BEGIN
        INSERT INTO paimon_published_snapshots
            (event_id, created_at, table_id, branch, timeline, snapshot_id, commit_id, event_type)
        VALUES (NEW.event_id, NEW.created_at, NEW.table_id, NEW.branch, NEW.timeline, NEW.snapshot_id,
                NEW.commit_id, NEW.event_type);
        RETURN NULL;
    END $fn$;
    CREATE TRIGGER trg_paimon_commit_events_published AFTER INSERT ON paimon_commit_events FOR EACH ROW
        WHEN (NEW.event_type IN ('snapshot_published', 'external'))
        EXECUTE FUNCTION paimon_commit_events_publish();
    FOR i IN 1 .. coalesce(array_length(view_names, 1), 0) LOOP
        EXECUTE 'CREATE OR REPLACE VIEW ' || quote_ident(view_names[i]) || ' AS ' || view_bodies[i];
    END LOOP;

    CREATE TABLE paimon_event_partitions (
        name text NOT NULL,
        log text NOT NULL DEFAULT 'commit',
        range_start timestamptz,
        range_end timestamptz NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        created_by text,
        dropped_at timestamptz,
        dropped_by text,
        CONSTRAINT pk_paimon_event_partitions PRIMARY KEY (name),
        CONSTRAINT ck_paimon_event_partitions_log CHECK (log IN ('commit')),
        CONSTRAINT ck_paimon_event_partitions_range CHECK (range_start IS NULL OR range_start < range_end),
        CONSTRAINT ck_paimon_event_partitions_dropped_by CHECK ((dropped_at IS NULL) = (dropped_by IS NULL))
    );
    CREATE TABLE paimon_event_archives (
        partition_name text NOT NULL,
        catalog_key character varying(255) NOT NULL,
        snapshot_id bigint NOT NULL,
        row_count bigint NOT NULL,
        archived_at timestamptz NOT NULL DEFAULT now(),
        archived_by text NOT NULL,
        CONSTRAINT pk_paimon_event_archives PRIMARY KEY (partition_name, catalog_key),
        CONSTRAINT fk_paimon_event_archives_partition_name_paimon_event_partitions
            FOREIGN KEY (partition_name) REFERENCES paimon_event_partitions (name),
        CONSTRAINT ck_paimon_event_archives_snapshot_id_positive CHECK (snapshot_id >= 1),
        CONSTRAINT ck_paimon_event_archives_row_count_non_negative CHECK (row_count >= 0)
    );
    INSERT INTO paimon_event_partitions (name, range_start, range_end, created_by)
    VALUES ('paimon_commit_events_p0', NULL, bound, 'migration 0024');
    part_start := bound;
    FOR i IN 1 .. ahead LOOP
        part_end := part_start + period;
        part_name := 'paimon_commit_events_p' || to_char(part_start AT TIME ZONE 'UTC', 'YYYYMMDD');
        EXECUTE 'CREATE TABLE ' || quote_ident(part_name) || ' PARTITION OF paimon_commit_events '
                || 'FOR VALUES FROM (' || quote_literal(part_start)
                || ') TO (' || quote_literal(part_end) || ')';
        EXECUTE 'CREATE TRIGGER trg_paimon_commit_events_append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON '
                || quote_ident(part_name)
                || ' FOR EACH STATEMENT EXECUTE FUNCTION paimon_reject_event_mutation()';
        INSERT INTO paimon_event_partitions (name, range_start, range_end, created_by)
        VALUES (part_name, part_start, part_end, 'migration 0024');
        part_start := part_end;
    END LOOP;
END
$migration$
"""

DOWNGRADE = r"""
DO $migration$
DECLARE
    view_names text[] := '{}';
    view_bodies text[] := '{}';
    index_defs text[] := '{}';
    r record;
    i integer;
BEGIN
    LOCK TABLE paimon_commit_events IN ACCESS EXCLUSIVE MODE;
    FOR r IN SELECT DISTINCT v.relname::text AS name, pg_get_viewdef(v.oid) AS body FROM pg_depend d
               JOIN pg_rewrite w ON w.oid = d.objid JOIN pg_class v ON v.oid = w.ev_class
              WHERE d.refobjid = 'paimon_commit_events'::regclass AND v.relkind = 'v' ORDER BY 1 LOOP
        view_names := view_names || r.name;
        view_bodies := view_bodies || r.body;
    END LOOP;
    FOR r IN SELECT indexdef AS def FROM pg_indexes
              WHERE schemaname = current_schema() AND tablename = 'paimon_commit_events'
                AND indexname <> 'pk_paimon_commit_events' ORDER BY indexname LOOP
        index_defs := index_defs || replace(r.def, ' ON ONLY ', ' ON ');
    END LOOP;
    -- Every event still in a partition is copied back into one plain table.
    CREATE TABLE paimon_commit_events_flat
        (LIKE paimon_commit_events INCLUDING DEFAULTS INCLUDING CONSTRAINTS);
    INSERT INTO paimon_commit_events_flat SELECT * FROM paimon_commit_events ORDER BY event_id;
    ALTER SEQUENCE paimon_commit_events_event_id_seq OWNED BY NONE;
    FOR i IN 1 .. coalesce(array_length(view_names, 1), 0) LOOP
        EXECUTE 'DROP VIEW ' || quote_ident(view_names[i]);
    END LOOP;
    DROP TABLE paimon_event_archives;
    DROP TABLE paimon_event_partitions;
    DROP TABLE paimon_commit_events;  -- with every partition and its triggers
    DROP FUNCTION paimon_commit_events_publish();
    DROP TABLE paimon_published_snapshots;
    ALTER TABLE paimon_commit_events_flat RENAME TO paimon_commit_events;
    ALTER SEQUENCE paimon_commit_events_event_id_seq OWNED BY paimon_commit_events.event_id;
    ALTER TABLE paimon_commit_events ADD CONSTRAINT pk_paimon_commit_events PRIMARY KEY (event_id);
    FOR i IN 1 .. coalesce(array_length(index_defs, 1), 0) LOOP
        EXECUTE index_defs[i];
    END LOOP;
    CREATE UNIQUE INDEX uq_paimon_commit_events_table_snapshot
        ON paimon_commit_events (table_id, branch, timeline, snapshot_id)
        WHERE event_type IN ('snapshot_published', 'external');
    CREATE UNIQUE INDEX uq_paimon_commit_events_commit_published
        ON paimon_commit_events (commit_id) WHERE event_type = 'snapshot_published';
    CREATE TRIGGER trg_paimon_commit_events_append_only BEFORE UPDATE OR DELETE OR TRUNCATE
        ON paimon_commit_events FOR EACH STATEMENT EXECUTE FUNCTION paimon_reject_event_mutation();
    CREATE TRIGGER paimon_commit_events_feed_notify AFTER INSERT ON paimon_commit_events
        FOR EACH STATEMENT EXECUTE FUNCTION paimon_meta_feed_notify();
    FOR i IN 1 .. coalesce(array_length(view_names, 1), 0) LOOP
        EXECUTE 'CREATE VIEW ' || quote_ident(view_names[i]) || ' AS ' || view_bodies[i];
    END LOOP;
END
$migration$
"""


def upgrade() -> None:
    op.execute(UPGRADE)


def downgrade() -> None:
    op.execute(DOWNGRADE)
