"""Converters between manifest spec objects and the records (dicts keyed by Paimon's field names) that
the Avro and ORC codecs read and write.

Readers look fields up by name, so a writer's extra fields are skipped and optional fields it does not
have read as None (0.9 manifests lack ``_VALUE_STATS_COLS`` and later fields). The field-level layout
follows Java's ``DataFileMetaSerializer``, ``ManifestEntrySerializer``, ``ManifestFileMetaSerializer``
and ``IndexManifestEntrySerializer``. Errors here are plain ValueError/TypeError/KeyError: the codecs
turn them into CorruptMetadataError (decoding) or ValidationError (encoding) naming the file/record.
"""

from __future__ import annotations

from typing import Any

from paimon_meta.model.manifest import (
    MANIFEST_ENTRY_VERSION,
    MANIFEST_FILE_META_VERSION,
    DataFileMeta,
    DeletionVectorMeta,
    FileKind,
    FileSource,
    GlobalIndexMeta,
    IndexFileMeta,
    IndexManifestEntry,
    ManifestEntry,
    ManifestFileMeta,
    SimpleStats,
)

# IndexManifestEntrySerializer's FORMAT_IDENTIFIER (ManifestEntry and ManifestFileMeta use 2).
INDEX_MANIFEST_ENTRY_VERSION = 1

_INT_MIN, _INT_MAX = -(2**31), 2**31 - 1


def _int32(value: int, name: str) -> int:
    # fastavro writes any Python int into an Avro int; Java would then fail to read the file.
    if not _INT_MIN <= value <= _INT_MAX:
        raise ValueError(f"{name}={value} does not fit a 32-bit int")
    return value


def _opt_tuple(value: Any) -> tuple[Any, ...] | None:
    return None if value is None else tuple(value)


def _check_version(found: Any, expected: int, what: str) -> None:
    # Java's serializers reject any other format identifier (1 = a layout from before Paimon 0.4).
    if found != expected:
        raise ValueError(f"unsupported {what} _VERSION {found!r} (expected {expected})")


# ---- SimpleStats -------------------------------------------------------------------------------------


def stats_to_record(s: SimpleStats) -> dict[str, Any]:
    return {"_MIN_VALUES": s.min_values, "_MAX_VALUES": s.max_values, "_NULL_COUNTS": s.null_counts}


def stats_from_record(r: dict[str, Any]) -> SimpleStats:
    return SimpleStats(r["_MIN_VALUES"], r["_MAX_VALUES"], _opt_tuple(r.get("_NULL_COUNTS")))


# ---- DataFileMeta / ManifestEntry --------------------------------------------------------------------


def data_file_to_record(f: DataFileMeta) -> dict[str, Any]:
    source = f.file_source
    return {
        "_FILE_NAME": f.file_name,
        "_FILE_SIZE": f.file_size,
        "_ROW_COUNT": f.row_count,
        "_MIN_KEY": f.min_key,
        "_MAX_KEY": f.max_key,
        "_KEY_STATS": stats_to_record(f.key_stats),
        "_VALUE_STATS": stats_to_record(f.value_stats),
        "_MIN_SEQUENCE_NUMBER": f.min_sequence_number,
        "_MAX_SEQUENCE_NUMBER": f.max_sequence_number,
        "_SCHEMA_ID": f.schema_id,
        "_LEVEL": _int32(f.level, "_LEVEL"),
        "_EXTRA_FILES": f.extra_files,
        "_CREATION_TIME": f.creation_time,
        "_DELETE_ROW_COUNT": f.delete_row_count,
        "_EMBEDDED_FILE_INDEX": f.embedded_index,
        "_FILE_SOURCE": None if source is None else int(source),
        "_VALUE_STATS_COLS": f.value_stats_cols,
        "_EXTERNAL_PATH": f.external_path,
        "_FIRST_ROW_ID": f.first_row_id,
        "_WRITE_COLS": f.write_cols,
        "_WRITE_COLS_SEQUENCES": f.write_cols_sequences,
    }


def data_file_from_record(r: dict[str, Any]) -> DataFileMeta:
    get = r.get
    source = get("_FILE_SOURCE")
    return DataFileMeta(
        file_name=r["_FILE_NAME"],
        file_size=r["_FILE_SIZE"],
        row_count=r["_ROW_COUNT"],
        min_key=r["_MIN_KEY"],
        max_key=r["_MAX_KEY"],
        key_stats=stats_from_record(r["_KEY_STATS"]),
        value_stats=stats_from_record(r["_VALUE_STATS"]),
        min_sequence_number=r["_MIN_SEQUENCE_NUMBER"],
        max_sequence_number=r["_MAX_SEQUENCE_NUMBER"],
        schema_id=r["_SCHEMA_ID"],
        level=r["_LEVEL"],
        extra_files=tuple(r["_EXTRA_FILES"]),
        creation_time=get("_CREATION_TIME"),
        delete_row_count=get("_DELETE_ROW_COUNT"),
        embedded_index=get("_EMBEDDED_FILE_INDEX"),
        file_source=None if source is None else FileSource(source),
        value_stats_cols=_opt_tuple(get("_VALUE_STATS_COLS")),
        external_path=get("_EXTERNAL_PATH"),
        first_row_id=get("_FIRST_ROW_ID"),
        write_cols=_opt_tuple(get("_WRITE_COLS")),
        write_cols_sequences=_opt_tuple(get("_WRITE_COLS_SEQUENCES")),
    )


def entry_to_record(e: ManifestEntry) -> dict[str, Any]:
    return {
        "_VERSION": MANIFEST_ENTRY_VERSION,
        "_KIND": int(e.kind),
        "_PARTITION": e.partition,
        "_BUCKET": _int32(e.bucket, "_BUCKET"),
        "_TOTAL_BUCKETS": _int32(e.total_buckets, "_TOTAL_BUCKETS"),
        "_FILE": data_file_to_record(e.file),
    }


def entry_from_record(r: dict[str, Any]) -> ManifestEntry:
    _check_version(r["_VERSION"], MANIFEST_ENTRY_VERSION, "ManifestEntry")
    return ManifestEntry(
        kind=FileKind(r["_KIND"]),
        partition=r["_PARTITION"],
        bucket=r["_BUCKET"],
        total_buckets=r["_TOTAL_BUCKETS"],
        file=data_file_from_record(r["_FILE"]),
        version=MANIFEST_ENTRY_VERSION,
    )


# ---- ManifestFileMeta --------------------------------------------------------------------------------


def _opt_int32(value: int | None, name: str) -> int | None:
    return None if value is None else _int32(value, name)


def file_meta_to_record(m: ManifestFileMeta) -> dict[str, Any]:
    return {
        "_VERSION": MANIFEST_FILE_META_VERSION,
        "_FILE_NAME": m.file_name,
        "_FILE_SIZE": m.file_size,
        "_NUM_ADDED_FILES": m.num_added_files,
        "_NUM_DELETED_FILES": m.num_deleted_files,
        "_PARTITION_STATS": stats_to_record(m.partition_stats),
        "_SCHEMA_ID": m.schema_id,
        "_MIN_BUCKET": _opt_int32(m.min_bucket, "_MIN_BUCKET"),
        "_MAX_BUCKET": _opt_int32(m.max_bucket, "_MAX_BUCKET"),
        "_MIN_LEVEL": _opt_int32(m.min_level, "_MIN_LEVEL"),
        "_MAX_LEVEL": _opt_int32(m.max_level, "_MAX_LEVEL"),
        "_MIN_ROW_ID": m.min_row_id,
        "_MAX_ROW_ID": m.max_row_id,
    }


def file_meta_from_record(r: dict[str, Any]) -> ManifestFileMeta:
    _check_version(r["_VERSION"], MANIFEST_FILE_META_VERSION, "ManifestFileMeta")
    get = r.get
    # pypaimon 2.1 also writes _TOTAL_BUCKETS and _EXTRA_FILES here; Java has neither, so they are skipped.
    return ManifestFileMeta(
        file_name=r["_FILE_NAME"],
        file_size=r["_FILE_SIZE"],
        num_added_files=r["_NUM_ADDED_FILES"],
        num_deleted_files=r["_NUM_DELETED_FILES"],
        partition_stats=stats_from_record(r["_PARTITION_STATS"]),
        schema_id=r["_SCHEMA_ID"],
        min_bucket=get("_MIN_BUCKET"),
        max_bucket=get("_MAX_BUCKET"),
        min_level=get("_MIN_LEVEL"),
        max_level=get("_MAX_LEVEL"),
        min_row_id=get("_MIN_ROW_ID"),
        max_row_id=get("_MAX_ROW_ID"),
        version=MANIFEST_FILE_META_VERSION,
    )


# ---- IndexManifestEntry ------------------------------------------------------------------------------


def _dv_to_record(d: DeletionVectorMeta) -> dict[str, Any]:
    return {
        "f0": d.data_file_name,
        "f1": _int32(d.offset, "offset"),
        "f2": _int32(d.length, "length"),
        "_CARDINALITY": d.cardinality,
    }


def _dv_from_record(r: dict[str, Any] | None) -> DeletionVectorMeta:
    if r is None:
        raise ValueError("null element in _DELETIONS_VECTORS_RANGES")
    return DeletionVectorMeta(r["f0"], r["f1"], r["f2"], r.get("_CARDINALITY"))


def _global_to_record(g: GlobalIndexMeta) -> dict[str, Any]:
    return {
        "_ROW_RANGE_START": g.row_range_start,
        "_ROW_RANGE_END": g.row_range_end,
        "_INDEX_FIELD_ID": _int32(g.index_field_id, "_INDEX_FIELD_ID"),
        "_EXTRA_FIELD_IDS": g.extra_field_ids,
        "_INDEX_META": g.index_meta,
        "_SOURCE_META": g.source_meta,
    }


def _global_from_record(r: dict[str, Any]) -> GlobalIndexMeta:
    return GlobalIndexMeta(
        row_range_start=r["_ROW_RANGE_START"],
        row_range_end=r["_ROW_RANGE_END"],
        index_field_id=r["_INDEX_FIELD_ID"],
        extra_field_ids=_opt_tuple(r.get("_EXTRA_FIELD_IDS")),
        index_meta=r.get("_INDEX_META"),
        source_meta=r.get("_SOURCE_META"),
    )


def index_entry_to_record(e: IndexManifestEntry) -> dict[str, Any]:
    f = e.index_file
    return {
        "_VERSION": INDEX_MANIFEST_ENTRY_VERSION,
        "_KIND": int(e.kind),
        "_PARTITION": e.partition,
        "_BUCKET": _int32(e.bucket, "_BUCKET"),
        "_INDEX_TYPE": f.index_type,
        "_FILE_NAME": f.file_name,
        "_FILE_SIZE": f.file_size,
        "_ROW_COUNT": f.row_count,
        "_DELETIONS_VECTORS_RANGES": None if f.dv_ranges is None else [_dv_to_record(d) for d in f.dv_ranges],
        "_EXTERNAL_PATH": f.external_path,
        "_GLOBAL_INDEX": None if f.global_index is None else _global_to_record(f.global_index),
    }


def index_entry_from_record(r: dict[str, Any]) -> IndexManifestEntry:
    _check_version(r["_VERSION"], INDEX_MANIFEST_ENTRY_VERSION, "IndexManifestEntry")
    dvs = r.get("_DELETIONS_VECTORS_RANGES")
    glob = r.get("_GLOBAL_INDEX")
    return IndexManifestEntry(
        kind=FileKind(r["_KIND"]),
        partition=r["_PARTITION"],
        bucket=r["_BUCKET"],
        index_file=IndexFileMeta(
            index_type=r["_INDEX_TYPE"],
            file_name=r["_FILE_NAME"],
            file_size=r["_FILE_SIZE"],
            row_count=r["_ROW_COUNT"],
            dv_ranges=None if dvs is None else tuple(_dv_from_record(d) for d in dvs),
            external_path=r.get("_EXTERNAL_PATH"),
            global_index=None if glob is None else _global_from_record(glob),
        ),
    )
