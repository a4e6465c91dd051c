"""The commit log's archive: events past a catalog's retention copied, before their partition of
``paimon_commit_events`` is dropped, into a Paimon table of the catalog's own warehouse
(``system.commit_log``), written through this service's own commit path (docs/OPERATIONS.md, "The commit
log's archive"; the audit views' archive twins: docs/AUDIT.md).

* ``store``: the seam to the partitioned event log (``metastore.event_partitions``), as a Protocol;
* ``table``: the archive table (its schema, options, and the event rows as Arrow);
* ``retention``: the catalog option ``paimon-meta.events.retention``;
* ``archiver``: archive then drop, exactly once across a crash at any step;
* ``lease``: one archiver at a time per metastore (an advisory lock), for ``serve``'s background loop;
* ``twins``: the audit views' answers computed over archived rows (what ``paimon-meta audit --archive``
  prints, and what the tests compare with the live views).
"""
