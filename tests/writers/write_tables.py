"""Delta Lake (delta-rs, the `deltalake` package) and Apache Iceberg (pyiceberg, a SQLite
catalog) tables: `python write_tables.py OUT [CASE...]` (in the writers' environment).

Each table goes through appends, an overwrite (whose replaced files stay in the folder, no longer
part of the table) and a schema change that adds a column, so the folder holds more than the
current snapshot. Read-backs: OUT/<case>.arrow (the current snapshot) and OUT/<case>@<n>.arrow
(an earlier version / the first snapshot; the metadata says which).
"""

from __future__ import annotations

import shutil

import pyarrow as pa
from common import base_table, dump, main
from deltalake import DeltaTable, QueryBuilder, write_deltalake


def _with_note(table: pa.Table) -> pa.Table:
    """Rows of a later schema: one more column."""
    return table.append_column("note", pa.array([f"n{k}" for k in table["k"].to_pylist()]))


def _delta(out, name: str) -> None:
    path = str(out / name)
    table = base_table()
    write_deltalake(path, table.slice(0, 15), partition_by=["p", "q"])
    write_deltalake(path, table.slice(15, 15), partition_by=["p", "q"], mode="append")
    # Overwrite: the first two commits' files stay in the folder, removed from the table.
    write_deltalake(path, table.slice(5, 25), partition_by=["p", "q"], mode="overwrite")
    DeltaTable(path).create_checkpoint()  # version 2: later readers start from this checkpoint
    write_deltalake(
        path, _with_note(table.slice(30)), partition_by=["p", "q"], mode="append",
        schema_mode="merge",
    )  # fmt: skip
    dump(DeltaTable(path).to_pyarrow_table(), out / f"{name}.arrow", name)
    dump(DeltaTable(path, version=1).to_pyarrow_table(), out / f"{name}@1.arrow", f"{name}@1")


def _delta_temporal_partitions(out, name: str) -> None:
    """Partitioned by a date and a timestamp column: the log records their values as text
    (Delta's own formats), nulls among them."""
    path = str(out / name)
    write_deltalake(path, base_table(), partition_by=["day", "at"])
    dump(DeltaTable(path).to_pyarrow_table(), out / f"{name}.arrow", name)


def _iceberg(out, name: str) -> None:
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.types import StringType

    folder = out / name
    catalog = SqlCatalog(
        "writers", uri=f"sqlite:///{out / (name + '.db')}", warehouse=f"file://{out}"
    )
    catalog.create_namespace("db")
    table = base_table()
    iceberg = catalog.create_table("db.rows", schema=table.schema, location=str(folder))
    with iceberg.update_spec() as spec:
        spec.add_identity("q")
    iceberg.append(table.slice(0, 15))
    first = iceberg.current_snapshot().snapshot_id
    iceberg.append(table.slice(15, 15))
    iceberg.overwrite(table.slice(5, 25))
    with iceberg.update_schema() as schema:
        schema.add_column("note", StringType())
    iceberg.append(_with_note(table.slice(30)))
    dump(iceberg.scan().to_arrow(), out / f"{name}.arrow", name)
    first_rows = iceberg.scan(snapshot_id=first).to_arrow()
    dump(first_rows, out / f"{name}@1.arrow", f"{name}@1", snapshot=str(first))


def _delta_column_mapping(out, name: str) -> None:
    """Column mapping: the files' column names are not the table's (we refuse it)."""
    configuration = {"delta.columnMapping.mode": "name"}
    write_deltalake(str(out / name), base_table(), configuration=configuration)


def _delta_deletion_vectors_enabled(out, name: str) -> None:
    """Deletion vectors enabled (a reader feature), none written: delta-rs rewrites on delete."""
    path = str(out / name)
    write_deltalake(path, base_table(), configuration={"delta.enableDeletionVectors": "true"})
    DeltaTable(path).delete("k < 10")
    # delta-rs's pyarrow reader refuses the reader feature; its DataFusion one reads the table.
    rows = QueryBuilder().register("t", DeltaTable(path)).execute("SELECT * FROM t").read_all()
    dump(pa.table(rows), out / f"{name}.arrow", name)


def _iceberg_renamed(out, name: str) -> None:
    """A renamed column: the older files hold it under its old name (we refuse it)."""
    from pyiceberg.catalog.sql import SqlCatalog

    catalog = SqlCatalog(
        "writers", uri=f"sqlite:///{out / (name + '.db')}", warehouse=f"file://{out}"
    )
    catalog.create_namespace("db")
    iceberg = catalog.create_table("db.rows", schema=base_table().schema, location=str(out / name))
    iceberg.append(base_table())
    with iceberg.update_schema() as schema:
        schema.rename_column("s", "text")


CASES = {
    "delta_table": _delta,
    "delta_temporal_partitions": _delta_temporal_partitions,
    "delta_column_mapping": _delta_column_mapping,
    "delta_deletion_vectors_enabled": _delta_deletion_vectors_enabled,
    "iceberg_table": _iceberg,
    "iceberg_renamed": _iceberg_renamed,
}


def write_cases(out, wanted) -> None:
    for name, write in CASES.items():
        if not wanted or name in wanted:
            shutil.rmtree(out / name, ignore_errors=True)
            (out / f"{name}.db").unlink(missing_ok=True)
            write(out, name)


if __name__ == "__main__":
    main(write_cases)
