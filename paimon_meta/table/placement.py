"""Table options that place files: checked when a table is created and when an option is set.

Several options become parts of the paths a table's writers create (and, for Java's writers and
ours, of what its readers and deleters open): a relative directory (``data-file.path-directory``),
parts of file names (``data-file.prefix``, ``changelog-file.prefix``, the format and compression
extensions), branch, tag and consumer names (``branch``, ``scan.fallback-branch``, ``scan.tag-name``,
``consumer-id``, ...), and locations outside the table (``data-file.external-paths`` and the other
external locations below). Whoever may create or alter one table must not be able to point any of them
at another table's directory or anywhere else: ``data-file.path-directory = ../../db2.db/t2`` put a
table's files in ``db2.t2``'s bucket directory.

So, for every such option set (at creation: every option; at an ALTER: the options it sets):

* a directory is relative, its segments plain names (no ``..``, ``.``, empty segment, ``\\``, ``:``,
  NUL or control character): it stays below the table's root;
* a name (prefix, extension, branch, tag, consumer) is one plain name fragment (no separator at all);
* an external location is accepted only when the catalog names an allowlist of external roots
  (:data:`EXTERNAL_ROOTS_ALLOWED`) and it is an absolute URI without ``.``/``..`` segments lying under one
  of them and neither inside nor around the warehouse (where the other tables are);
* ``path`` (Java's table-path option) may only name the table's own location.

Tables that already carry such options (written by Java, or before this check) are read and expired
with the roots they configure (:mod:`paimon_meta.table.file_guard`); only creating and altering refuse.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from paimon_meta.errors import ValidationError
from paimon_meta.table.containment import EXTERNAL_PATHS, is_under, name_problem, parse_external_roots
from paimon_meta.table.paths import DATA_FILE_PATH_DIRECTORY, compression_extension, validate_branch_name
from paimon_meta.table.tags import validate_tag_name

#: Catalog option (``connect(..., **options)``, ``paimon-meta serve -o``): comma-separated roots under
#: which tables may place files outside the warehouse; unset: no table may.
EXTERNAL_ROOTS_ALLOWED = "external-roots.allowed"

#: Options naming a location outside the table (Java writes, or reads, files there).
EXTERNAL_LOCATION_OPTIONS = (
    EXTERNAL_PATHS,  # comma-separated roots of new data files
    "blob-external-storage-path",  # blob files of blob-external-storage-field columns
    "global-index.external-path",  # global index files
    "object-location",  # the files an object table lists
)
#: Options that become part of a file name.
NAME_FRAGMENT_OPTIONS = ("data-file.prefix", "changelog-file.prefix")
#: Options whose value is a file-name extension (a format or a compression codec).
EXTENSION_OPTIONS = ("file.format", "changelog-file.format", "file.compression", "changelog-file.compression")
#: ``<level>:<value>`` lists of extensions.
PER_LEVEL_EXTENSION_OPTIONS = ("file.format.per.level", "file.compression.per.level")
#: Options naming a branch (a directory ``branch/branch-<name>``).
BRANCH_OPTIONS = (
    "branch",
    "scan.fallback-branch",
    "scan.fallback-snapshot-branch",
    "scan.fallback-delta-branch",
    "scan.primary-branch",
)
TAG_OPTIONS = ("scan.tag-name",)  # tag/tag-<name>
CONSUMER_OPTIONS = ("consumer-id",)  # consumer/consumer-<id>
PATH = "path"


def _refuse(key: str, value: str, why: str) -> ValidationError:
    return ValidationError(
        f"table option {key}={repr(value)[:300]} is refused: {why}", option=key, value=str(value)[:1000]
    )


def _check_fragment(key: str, value: str, fragment: str) -> None:
    # "x" around the fragment: a prefix or extension is only ever a part of a name, never a whole one
    problem = name_problem(f"x{fragment}x")
    if problem is not None:
        raise _refuse(key, value, f"it becomes part of file names and {problem}")


def _check_directory(key: str, value: str) -> None:
    if value.startswith(("/", "\\")):
        raise _refuse(key, value, "an absolute directory; it must be relative to the table's directory")
    for segment in value.split("/"):
        problem = name_problem(segment)
        if problem is not None or segment in (".", ".."):
            raise _refuse(key, value, f"segment {segment!r}: {problem}; the directory must stay in the table")


def check_path_option(key: str, value: str, *, table_path: str | None = None) -> None:
    """``ValidationError`` naming ``key`` unless ``value`` keeps the files it places inside the table.
    External locations are only checked for form here (see :func:`check_external_location`)."""
    if not isinstance(value, str):
        raise _refuse(key, str(value), "not a string")
    if key == DATA_FILE_PATH_DIRECTORY:
        _check_directory(key, value)
    elif key in NAME_FRAGMENT_OPTIONS:
        _check_fragment(key, value, value)
    elif key in EXTENSION_OPTIONS:
        extension = compression_extension(value) if "compression" in key else value.lower()
        if extension:
            _check_fragment(key, value, "." + extension)
    elif key in PER_LEVEL_EXTENSION_OPTIONS:
        for item in value.split(","):
            _, _, extension = item.partition(":")
            if extension.strip():
                ext = compression_extension(extension.strip()) if "compression" in key else extension.strip()
                _check_fragment(key, value, "." + (ext or ""))
    elif key in BRANCH_OPTIONS:
        if value.strip():
            try:
                validate_branch_name(value.strip())
            except ValidationError as e:
                raise _refuse(key, value, e.message) from None
            _check_fragment(key, value, value.strip())
    elif key in TAG_OPTIONS:
        if value.strip():
            try:
                validate_tag_name(value.strip())
            except ValidationError as e:
                raise _refuse(key, value, e.message) from None
    elif key in CONSUMER_OPTIONS:
        if value.strip():
            _check_fragment(key, value, value.strip())
    elif key in EXTERNAL_LOCATION_OPTIONS:
        for root in parse_external_roots(value):
            # is_under(p, p) holds exactly for an absolute URI without "."/".." segments or controls
            if not is_under(root, root):
                raise _refuse(key, value, f"{root!r} is not an absolute URI without '.'/'..' segments")
    elif (
        key == PATH
        and table_path is not None
        and not (is_under(value, table_path) and is_under(table_path, value))
    ):
        raise _refuse(key, value, f"the catalog places the table at {table_path}; no other path may be named")


def check_external_location(
    key: str, value: str, *, allowed_roots: Sequence[str], warehouse: str | None = None
) -> None:
    """``ValidationError`` naming ``key`` unless every location of ``value`` lies under one of
    ``allowed_roots`` (the catalog's :data:`EXTERNAL_ROOTS_ALLOWED`) and not inside or around the
    ``warehouse``."""
    check_path_option(key, value)
    for root in parse_external_roots(value):
        if not allowed_roots:
            raise _refuse(
                key,
                value,
                f"files outside the warehouse are only accepted under roots the catalog allows (catalog "
                f"option {EXTERNAL_ROOTS_ALLOWED}, unset here)",
            )
        if not any(is_under(root, allowed) for allowed in allowed_roots):
            raise _refuse(key, value, f"{root!r} is not under an allowed external root {list(allowed_roots)}")
        if warehouse is not None and (is_under(root, warehouse) or is_under(warehouse, root)):
            raise _refuse(key, value, f"{root!r} overlaps the warehouse {warehouse}, where other tables live")


def check_placement_options(
    options: Mapping[str, str],
    *,
    keys: Iterable[str] | None = None,
    table_path: str | None = None,
    allowed_roots: Sequence[str] | None = None,
    warehouse: str | None = None,
) -> None:
    """Check the options of ``keys`` (default: all of ``options``) that place files. External locations
    are checked against ``allowed_roots`` when it is given (the catalog's allowlist; an empty one refuses
    every external location), else for form only (an ALTER through ``schema_change`` alone)."""
    for key in options if keys is None else keys:
        if key not in options:
            continue
        value = options[key]
        if key in EXTERNAL_LOCATION_OPTIONS and allowed_roots is not None:
            check_external_location(key, value, allowed_roots=allowed_roots, warehouse=warehouse)
        else:
            check_path_option(key, value, table_path=table_path)


def parse_allowed_roots(value: str | None) -> tuple[str, ...]:
    """The catalog's allowlist (``EXTERNAL_ROOTS_ALLOWED``); ``ValidationError`` naming a root that is not
    an absolute URI without ``.``/``..`` segments."""
    roots = parse_external_roots(value)
    for root in roots:
        if not is_under(root, root):
            raise ValidationError(
                f"catalog option {EXTERNAL_ROOTS_ALLOWED}: {root!r} is not an absolute URI without '.'/'..' "
                "segments",
                option=EXTERNAL_ROOTS_ALLOWED,
            )
    return roots
