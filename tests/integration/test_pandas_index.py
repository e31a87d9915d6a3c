"""pandas' index columns, as pandas writes them (ours, pinned, and the newest in the writers'
environment): a filtered or sorted frame's index as `__index_level_0__`, a named index under its
name. pandas reads them back as the index, so `convert` and `infer-schema` leave them out, say so
once on stderr, and keep them with --keep-index-columns; a RangeIndex is metadata only."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from tfx_tabular.conversion.source_metadata import read_source_metadata

WRITERS = Path(__file__).resolve().parent.parent / "writers"
CLI = os.path.join(os.path.dirname(sys.executable), "tfx-tabular")
NOTICE = "ignoring pandas index column(s)"
# The frames users write: sorted (an unnamed index in a new order), indexed by a column, fresh.
FRAMES = textwrap.dedent(
    """
    import sys
    import pandas as pd
    out = sys.argv[1]
    df = pd.DataFrame({"id": [30, 10, 20, 40], "x": [0.5, 1.5, 2.5, 3.5], "y": [1, 0, 1, 0]})
    df.sort_values("id").to_parquet(out + "/sorted/part-0.parquet")
    df.set_index("id").to_parquet(out + "/named/part-0.parquet")
    df.to_parquet(out + "/fresh/part-0.parquet")
    """
)


def cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run([CLI, *args], capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module", params=["pinned", "writers"])
def written(request, tmp_path_factory) -> Path:
    """The frames written by our pinned pandas, or by the writers' environment's newest."""
    out = tmp_path_factory.mktemp(request.param)
    for case in ("sorted", "named", "fresh"):
        (out / case).mkdir()
    script = out / "write.py"
    script.write_text(FRAMES)
    if request.param == "writers":
        sys.path.insert(0, str(WRITERS))
        from environment import writers_python

        python = writers_python()
    else:
        python = sys.executable
    subprocess.run([python, str(script), str(out)], check=True, timeout=300)
    return out


@pytest.mark.parametrize("case, index", [("sorted", "__index_level_0__"), ("named", "id")])
def test_convert_leaves_the_index_out_and_says_so_once(written, case, index, tmp_path):
    data = written / case
    assert index in pq.read_schema(data / "part-0.parquet").pandas_metadata["index_columns"]
    out = str(tmp_path / "examples")
    done = cli("convert", str(data), out)
    assert done.returncode == 0, done.stderr
    assert done.stderr.count(NOTICE) == 1, done.stderr
    (notice,) = [line for line in done.stderr.splitlines() if NOTICE in line]
    assert index in notice and "--keep-index-columns" in notice
    # The features are the columns pandas itself reads back (the index is not one of them).
    assert read_source_metadata(out).schema.names == list(pd.read_parquet(data).columns)
    assert index not in read_source_metadata(out).schema.names


@pytest.mark.parametrize("case, index", [("sorted", "__index_level_0__"), ("named", "id")])
def test_keep_index_columns_keeps_them_as_features(written, case, index, tmp_path):
    out = str(tmp_path / "examples")
    done = cli("convert", str(written / case), out, "--keep-index-columns")
    assert done.returncode == 0, done.stderr
    assert NOTICE not in done.stderr
    assert index in read_source_metadata(out).schema.names
    schema = str(tmp_path / "schema.pbtxt")
    kept = cli("infer-schema", str(written / case), "-o", schema, "--keep-index-columns", "-q")
    assert kept.returncode == 0, kept.stderr
    assert f'name: "{index}"' in Path(schema).read_text()


def test_infer_schema_leaves_the_index_out_too(written, tmp_path):
    schema = str(tmp_path / "schema.pbtxt")
    done = cli("infer-schema", str(written / "sorted"), "-o", schema)
    assert done.returncode == 0, done.stderr
    assert done.stderr.count(NOTICE) == 1
    assert "__index_level_0__" not in Path(schema).read_text()


def test_a_range_index_is_no_column_and_no_notice(written, tmp_path):
    done = cli("infer-schema", str(written / "fresh"), "-o", str(tmp_path / "schema.pbtxt"))
    assert done.returncode == 0, done.stderr
    assert NOTICE not in done.stderr
    assert pq.read_schema(written / "fresh" / "part-0.parquet").names == ["id", "x", "y"]
