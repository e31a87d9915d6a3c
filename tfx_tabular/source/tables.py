"""Table formats: a folder that is a Delta Lake table (`_delta_log/`) or an Apache Iceberg table
(`metadata/*.metadata.json`) is read as its current snapshot (or a given version / snapshot id):
only the data files its log or metadata lists, with partition values as the table records them.
The folder's other files (replaced by an overwrite, not yet vacuumed) are never read.

The logs are read by the formats' maintained libraries, `deltalake` (delta-rs) and `pyiceberg`,
which install beside our pinned pyarrow 10 (neither needs pyarrow to plan a scan). They are
imported only when a folder is such a table. A table feature whose rows this reader could not
reproduce (deletion vectors, row-level deletes, column mapping, type changes, renames) is an
InputError that names it.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import posixpath
import re
import urllib.parse
from typing import Mapping, Optional

import pyarrow as pa
import pyarrow.fs as pafs

from tfx_tabular.source.errors import InputError

DELTA = "Delta Lake"
ICEBERG = "Iceberg"

# Delta reader features whose tables read correctly from their data files as listed (a variant
# column itself has no tf.Example type: the column's type says so).
_DELTA_READABLE_FEATURES = {"timestampNtz", "vacuumProtocolCheck", "v2Checkpoint", "variantType"}
_DELTA_TYPES = {
    "string": pa.string(),
    "long": pa.int64(),
    "integer": pa.int32(),
    "short": pa.int16(),
    "byte": pa.int8(),
    "boolean": pa.bool_(),
    "float": pa.float32(),
    "double": pa.float64(),
    "date": pa.date32(),
    "timestamp": pa.timestamp("us", "UTC"),
    "timestamp_ntz": pa.timestamp("us"),
    "binary": pa.binary(),
}
_DECIMAL = re.compile(r"^decimal\((\d+),\s*(\d+)\)$")
_METADATA_VERSION = re.compile(r"^v?(\d+)[-.]")


@dataclasses.dataclass(frozen=True)
class TableFile:
    """A data file of the snapshot: its path under the table folder ('/'-separated) and its
    partition values as text (None for null), as the table records them."""

    relative: str
    partitions: tuple[tuple[str, Optional[str]], ...] = ()


@dataclasses.dataclass(frozen=True)
class Snapshot:
    """What a table's log or metadata says one version of it is."""

    format: str  # DELTA or ICEBERG
    version: int  # the Delta version or Iceberg snapshot id read
    files: tuple[TableFile, ...]
    columns: tuple[str, ...]  # the version's top-level columns; others in the files are not its
    partition_types: Mapping[str, pa.DataType]


def table_format(filesystem: pafs.FileSystem, base: str) -> Optional[str]:
    """DELTA or ICEBERG when `base` is such a table's folder, otherwise None."""
    log = filesystem.get_file_info(posixpath.join(base, "_delta_log"))
    if log.type == pafs.FileType.Directory:
        return DELTA
    metadata = filesystem.get_file_info(posixpath.join(base, "metadata"))
    if metadata.type == pafs.FileType.Directory and _iceberg_metadata_files(filesystem, base):
        return ICEBERG
    return None


def log_files(filesystem: pafs.FileSystem, base: str) -> list[pafs.FileInfo]:
    """The files of the table's log (Delta `_delta_log/`) or metadata (Iceberg `metadata/`) at
    `base`, sorted; none when `base` is no table. Every change to the table adds one, also a
    change that only removes data files (which stay in the folder)."""
    kind = table_format(filesystem, base)
    if kind is None:
        return []
    folder = posixpath.join(base, "_delta_log" if kind == DELTA else "metadata")
    infos = filesystem.get_file_info(pafs.FileSelector(folder, recursive=True))
    return sorted((i for i in infos if i.type == pafs.FileType.File), key=lambda i: i.path)


def read_snapshot(
    filesystem: pafs.FileSystem, base: str, version: Optional[int] = None
) -> Optional[Snapshot]:
    """The snapshot of the table at `base` (its current one, or `version`: a Delta version or an
    Iceberg snapshot id); None when `base` is no table."""
    kind = table_format(filesystem, base)
    if kind is None:
        if version is not None:
            raise InputError(f"{base} is neither a Delta Lake nor an Iceberg table; a table "
                             "version applies to those only")  # fmt: skip
        return None
    reader = _delta_snapshot if kind == DELTA else _iceberg_snapshot
    return reader(filesystem, base, version)


def _delta_type(type_json, column: str) -> pa.DataType:
    if isinstance(type_json, str) and type_json in _DELTA_TYPES:
        return _DELTA_TYPES[type_json]
    match = _DECIMAL.match(type_json) if isinstance(type_json, str) else None
    if match:
        return pa.decimal128(int(match.group(1)), int(match.group(2)))
    raise InputError(f"partition column {column!r} has Delta type {type_json!r}, not supported")


def _as_text(value) -> Optional[str]:
    """A typed partition value as the text `dataset.partition_value` reads back."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime.datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, datetime.date):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.decode("utf-8", "surrogateescape")
    return str(value)


def _check_deletion_vectors(table, base: str) -> None:
    """Deletion vectors delete rows without rewriting the file: its rows are not the table's."""
    try:
        files = table.deletion_vectors().read_all().column("filepath").to_pylist()
    except Exception as e:  # the library's own errors (a deletion vector file missing)
        raise InputError(
            f"{base}: the Delta table's deletion vectors cannot be read "
            f"({str(e).splitlines()[0]}); deletion vectors are not supported"
        ) from None
    if files:
        raise InputError(
            f"{base}: {files[0]} has a Delta deletion vector (rows deleted in place); deletion "
            "vectors are not supported: rewrite the table without them (REORG TABLE ... APPLY "
            "(PURGE))"
        )


def _check_delta_features(table, base: str) -> None:
    protocol = table.protocol()
    unsupported = sorted(set(protocol.reader_features or ()) - _DELTA_READABLE_FEATURES)
    unsupported = [f for f in unsupported if f != "deletionVectors"]  # refused only if used
    if protocol.min_reader_version > 3 or unsupported:
        raise InputError(
            f"{base}: Delta reader features {unsupported or protocol.min_reader_version} are not "
            "supported (their rows cannot be read from the data files as listed)"
        )
    if "deletionVectors" in (protocol.reader_features or ()):
        _check_deletion_vectors(table, base)
    mode = table.metadata().configuration.get("delta.columnMapping.mode", "none")
    if mode != "none":
        raise InputError(
            f"{base}: Delta column mapping (delta.columnMapping.mode={mode}) is not supported: "
            "the files' column names are not the table's"
        )


def _delta_snapshot(filesystem: pafs.FileSystem, base: str, version: Optional[int]) -> Snapshot:
    import deltalake  # imported here: only table reads pay its import

    try:
        table = deltalake.DeltaTable(base, version=version)
    except Exception as e:  # the library's own errors: a missing version, a corrupt log
        raise InputError(f"{base}: cannot read the Delta log ({str(e).splitlines()[0]})") from None
    _check_delta_features(table, base)
    schema = json.loads(table.schema().to_json())
    partition_columns = table.metadata().partition_columns
    types = {f["name"]: f["type"] for f in schema["fields"]}
    actions = table.get_add_actions(flatten=True)
    paths = actions.column("path").to_pylist()
    values = {c: actions.column(f"partition.{c}").to_pylist() for c in partition_columns}
    files = []
    for i, path in enumerate(paths):
        if "://" in path or path.startswith("/"):
            raise InputError(f"{base}: data file {path} lies outside the table folder")
        partitions = tuple((c, _as_text(values[c][i])) for c in partition_columns)
        files.append(TableFile(urllib.parse.unquote(path), partitions))
    return Snapshot(
        DELTA,
        table.version(),
        tuple(files),
        tuple(f["name"] for f in schema["fields"]),
        {c: _delta_type(types[c], c) for c in partition_columns},
    )


def _iceberg_metadata_files(filesystem: pafs.FileSystem, base: str) -> list[str]:
    folder = posixpath.join(base, "metadata")
    infos = filesystem.get_file_info(pafs.FileSelector(folder, allow_not_found=True))
    return [i.path for i in infos if i.base_name.endswith(".metadata.json")]


def _current_iceberg_metadata(filesystem: pafs.FileSystem, base: str) -> str:
    """The newest `metadata/*.metadata.json`: the one `version-hint.text` names (Hadoop
    tables), else the highest version number (`00012-<uuid>` or `v12`)."""
    hint = posixpath.join(base, "metadata", "version-hint.text")
    if filesystem.get_file_info(hint).type == pafs.FileType.File:
        with filesystem.open_input_stream(hint) as handle:
            number = handle.read().decode().strip()
        return posixpath.join(base, "metadata", f"v{number}.metadata.json")
    versions = {}
    for path in _iceberg_metadata_files(filesystem, base):
        match = _METADATA_VERSION.match(posixpath.basename(path))
        if match:
            versions[int(match.group(1))] = path
    if not versions:
        raise InputError(f"{base}/metadata holds no numbered Iceberg metadata file")
    return versions[max(versions)]


def _check_iceberg_schemas(metadata, base: str) -> None:
    """Columns are matched by name: every column id must keep its name and type in every
    schema the table had (adding columns is fine: older files read them as null)."""
    seen: dict[int, tuple[str, str]] = {}
    for schema in metadata.schemas:
        for field in schema.fields:
            now = (field.name, str(field.field_type))
            before = seen.setdefault(field.field_id, now)
            if before != now:
                raise InputError(
                    f"{base}: Iceberg column {before[0]!r} ({before[1]}) became {now[0]!r} "
                    f"({now[1]}); renamed or retyped columns are not supported"
                )


def _iceberg_snapshot(filesystem: pafs.FileSystem, base: str, version: Optional[int]) -> Snapshot:
    from pyiceberg.table import StaticTable  # imported here: only table reads pay its import

    location = _current_iceberg_metadata(filesystem, base)
    try:
        table = StaticTable.from_metadata(location)
    except Exception as e:  # the library's own errors
        raise InputError(f"{location}: not readable Iceberg metadata ({e})") from None
    metadata = table.metadata
    _check_iceberg_schemas(metadata, base)
    snapshot = table.snapshot_by_id(version) if version is not None else table.current_snapshot()
    if snapshot is None:
        wanted = "has no snapshot" if version is None else f"has no snapshot {version}"
        raise InputError(f"{base}: the Iceberg table {wanted}")
    schema = next(s for s in metadata.schemas if s.schema_id == snapshot.schema_id)
    root = metadata.location.rstrip("/")
    files = []
    for task in table.scan(snapshot_id=snapshot.snapshot_id).plan_files():
        path = task.file.file_path
        if task.delete_files:
            raise InputError(
                f"{base}: {path} has Iceberg delete files (row-level deletes), which are not "
                "supported; compact the table (rewrite_data_files) first"
            )
        if str(task.file.file_format).upper().split(".")[-1] != "PARQUET":
            raise InputError(f"{base}: {path} is {task.file.file_format}, not Parquet")
        if not path.startswith(root + "/"):
            raise InputError(f"{base}: data file {path} lies outside the table's {root}")
        files.append(TableFile(path[len(root) + 1 :]))
    columns = tuple(f.name for f in schema.fields)
    return Snapshot(ICEBERG, snapshot.snapshot_id, tuple(files), columns, {})
