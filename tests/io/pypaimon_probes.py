"""pypaimon 2.1.0's storage calls with vended credentials, run in its own venv (``run_pypaimon``).

pypaimon reaches S3 only through ``pypaimon.filesystem.pyarrow_file_io.PyArrowFileIO`` over pyarrow's
``S3FileSystem`` (pyarrow 19 in that venv). :data:`FILE_IO_PROBE` calls the methods its readers and
writers use (``new_input_stream``, ``exists``, ``get_file_status``, ``list_status``, ``new_output_stream``
into an existing and into a new directory (the latter goes through ``mkdirs`` -> pyarrow's recursive
``create_dir``), ``write_parquet``, ``try_to_write_atomic`` (a write and a ``rename``: pyarrow's copy +
delete) and ``delete``) on each target; :data:`TABLE_ROUND_TRIP` writes, commits and reads a whole table
opened with ``FileStoreTable.from_path`` (no catalog: pypaimon commits by renaming snapshot files, a
superset of the files it writes under a REST catalog, where the server commits).

Each outcome is ``"ok"``, ``"denied"`` (pyarrow reported ACCESS_DENIED / HTTP 403) or ``"error: ..."``.
"""

from __future__ import annotations

FILE_IO_PROBE = r"""
import json, sys, uuid
import pyarrow as pa
from pypaimon.common.options import Options
from pypaimon.filesystem.pyarrow_file_io import PyArrowFileIO

spec = json.load(sys.stdin)


def outcome(call):
    try:
        result = call()
    except Exception as e:
        text = f"{type(e).__name__}: {e}"
        if "ACCESS_DENIED" in text or "AccessDenied" in text or "403" in text:
            return "denied"
        return "error: " + text[:400]
    if result is False:
        return "error: returned False"
    return "ok"


def write_stream(fio, path):
    with fio.new_output_stream(path) as out:
        out.write(b"x")


out = {}
for run, setup in spec["runs"].items():
    fio = PyArrowFileIO(setup["root"], Options(setup["options"]))
    results = {}
    for target, root in setup["targets"].items():
        u = uuid.uuid4().hex[:8]
        seeded = f"{root}/schema/schema-0"
        listed = lambda: "schema-0" in [i.path.rsplit("/", 1)[-1] for i in fio.list_status(f"{root}/schema")]
        results[target] = {
            "read": outcome(lambda: fio.new_input_stream(seeded).read() is not None),
            "exists": outcome(lambda: fio.exists(seeded)),
            "status": outcome(lambda: fio.get_file_status(seeded) is not None),
            "list": outcome(listed),
            "write-existing-dir": outcome(lambda: write_stream(fio, f"{root}/schema/new-{u}")),
            "write-new-dir": outcome(
                lambda: fio.write_parquet(f"{root}/bucket-{u}/data-{u}.parquet", pa.table({"a": [1, 2]}))
            ),
            "atomic-write": outcome(lambda: fio.try_to_write_atomic(f"{root}/schema/atomic-{u}", "x")),
            "delete": outcome(lambda: fio.delete(setup["victims"][target])),
        }
    out[run] = results
print(json.dumps(out))
"""

FILE_IO_OPERATIONS = (
    "read",
    "exists",
    "status",
    "list",
    "write-existing-dir",
    "write-new-dir",
    "atomic-write",
    "delete",
)
FILE_IO_READS = ("read", "exists", "status", "list")

TABLE_ROUND_TRIP = r"""
import json, sys
import pyarrow as pa
from pypaimon.table.file_store_table import FileStoreTable

spec = json.load(sys.stdin)
out = {}
for step in spec["steps"]:
    result = {"rows": None, "error": None}
    try:
        table = FileStoreTable.from_path(step["table"], step["options"])
        for round in range(step["write_rounds"]):
            builder = table.new_batch_write_builder()
            write, commit = builder.new_write(), builder.new_commit()
            ids = [10 * round + i for i in range(3)]
            write.write_arrow(pa.table({"id": pa.array(ids, pa.int64()), "v": [f"r{round}"] * 3}))
            commit.commit(write.prepare_commit())
            write.close()
            commit.close()
        if step["read"]:
            builder = table.new_read_builder()
            rows = builder.new_read().to_arrow(builder.new_scan().plan().splits())
            result["rows"] = sorted(rows.column("id").to_pylist())
    except Exception as e:
        text = f"{type(e).__name__}: {e}"
        denied = "ACCESS_DENIED" in text or "AccessDenied" in text
        result["error"] = ("denied: " if denied else "error: ") + text[-600:]
    out[step["name"]] = result
print(json.dumps(out))
"""
