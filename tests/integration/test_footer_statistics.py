"""Schemas from footers that lack what inference reads, through `tfx-tabular infer-schema` as users
run it: a zero-row file beside real ones, files written without column statistics (pyarrow's
write_statistics=False; fastparquet writes no min/max), and int64 sentinels whose domain a double
cannot hold. Each must give the schema the same data with full footers gives (or, where only
doubles are known, a domain that holds every value), and never another task for the label."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from google.protobuf import text_format
from tensorflow_metadata.proto.v0 import schema_pb2

from tfx_tabular.training.loop import check_label
from tfx_tabular.training.task import BINARY, kind_of

WRITERS = Path(__file__).resolve().parent.parent / "writers"
CLI = os.path.join(os.path.dirname(sys.executable), "tfx-tabular")
ROWS = 300
# Integers a double cannot hold, or whose double lies outside int64: "valid until forever".
SENTINELS = {
    "ends": [-(2**63), 2**63 - 1],
    "past_2_53": [0, 2**53 + 1],
    "past_2_62": [-(2**62 + 1), 2**62 + 1],
}


def cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run([CLI, *args], capture_output=True, text=True, timeout=600)


def frame(rows: int = ROWS) -> pd.DataFrame:
    """A label with values 0/1 and no nulls, beside an integer, a float and a text column."""
    keys = np.arange(rows)
    return pd.DataFrame(
        {
            "k": keys,
            "price": keys / 4 - 10.0,
            "y": keys % 2,
            "city": np.where(keys % 3 == 0, "Oslo", "Lima"),
        }
    )


def infer(data, *flags) -> schema_pb2.Schema:
    out = f"{data}.pbtxt"
    done = cli("infer-schema", str(data), "-o", out, "--label", "y", *flags)
    assert done.returncode == 0, done.stderr
    return text_format.Parse(Path(out).read_text(), schema_pb2.Schema())


def by_name(schema: schema_pb2.Schema) -> dict[str, schema_pb2.Feature]:
    return {f.name: f for f in schema.feature}


@pytest.fixture(scope="module")
def full(tmp_path_factory) -> schema_pb2.Schema:
    """The schema of the data with full footers (pandas' defaults), which the others must equal."""
    data = tmp_path_factory.mktemp("full")
    frame().to_parquet(data / "part-0.parquet")
    schema = infer(data)
    assert by_name(schema)["y"].int_domain.max == 1 and by_name(schema)["y"].shape.dim
    return schema


def test_a_zero_row_file_beside_real_ones_does_not_count(full, tmp_path):
    df = frame()
    df.to_parquet(tmp_path / "part-0.parquet")
    df[df.k > ROWS].to_parquet(tmp_path / "part-1.parquet")  # a filter that left nothing
    assert pq.read_metadata(tmp_path / "part-1.parquet").num_rows == 0
    assert infer(tmp_path) == full


def test_files_written_without_statistics_read_those_columns(full, tmp_path):
    table = pa.Table.from_pandas(frame())
    pq.write_table(table.slice(0, 100), tmp_path / "part-0.parquet")
    pq.write_table(table.slice(100), tmp_path / "part-1.parquet", write_statistics=False)
    out = str(tmp_path / "schema.pbtxt")
    done = cli("infer-schema", str(tmp_path), "-o", out, "--label", "y")
    assert done.returncode == 0, done.stderr
    assert "read 4 columns whose footers hold no statistics" in done.stdout
    assert text_format.Parse(Path(out).read_text(), schema_pb2.Schema()) == full


def test_example_statistics_describe_what_the_footers_do_not(full, tmp_path):
    data, examples, stats = tmp_path / "data", str(tmp_path / "ex"), str(tmp_path / "stats")
    data.mkdir()
    pq.write_table(pa.Table.from_pandas(frame()), data / "part-0.parquet", write_statistics=False)
    done = cli("convert", str(data), examples, "--example-statistics", stats, "-q")
    assert done.returncode == 0, done.stderr
    # The conversion read the columns the footers say nothing of into the Examples' side file:
    # the Examples alone give the schema full footers give, and so do their statistics.
    alone = by_name(infer(examples))
    inferred = infer(examples, "--example-statistics", stats)
    schema, expected = by_name(inferred), by_name(full)
    for name in ("k", "y"):
        assert schema[name] == expected[name] == alone[name]
    check_label(inferred, "y")  # the trainer's check: a value in every row
    assert kind_of(inferred, "y") == BINARY
    # Floats as written (float32), as the example statistics always give them.
    assert schema["price"].float_domain.min == -10.0 and schema["price"].shape.dim[0].size == 1


_FASTPARQUET = textwrap.dedent(
    """
    import sys
    import pandas as pd
    keys = range({rows})
    df = pd.DataFrame({{"k": list(keys), "price": [k / 4 - 10.0 for k in keys],
                       "y": pd.Categorical([k % 2 for k in keys]),
                       "city": ["Oslo" if k % 3 == 0 else "Lima" for k in keys]}})
    df.to_parquet(sys.argv[1] + "/part-0.parquet", engine="fastparquet")
    """
)


@pytest.fixture(scope="module")
def fastparquet_data(tmp_path_factory) -> Path:
    """The frame with a categorical 0/1 label, written by fastparquet (the writers' environment)
    with its defaults: no min/max in the footer."""
    sys.path.insert(0, str(WRITERS))
    from environment import writers_python

    root = tmp_path_factory.mktemp("fastparquet")
    script, data = root / "write.py", root / "data"
    script.write_text(_FASTPARQUET.format(rows=ROWS))
    data.mkdir()
    subprocess.run([writers_python(), str(script), str(data)], check=True, timeout=300)
    footer = pq.read_metadata(data / "part-0.parquet").row_group(0)
    label_chunk = footer.column(pq.read_schema(data / "part-0.parquet").names.index("y"))
    assert not label_chunk.statistics.has_min_max  # what fastparquet writes
    return data


def test_a_categorical_label_written_by_fastparquet_stays_binary(fastparquet_data):
    schema = infer(fastparquet_data)
    label = by_name(schema)["y"]
    assert (label.int_domain.min, label.int_domain.max) == (0, 1) and label.shape.dim
    check_label(schema, "y")
    assert kind_of(schema, "y") == BINARY


def test_run_trains_fastparquets_categorical_label_as_binary(fastparquet_data, tmp_path):
    root = str(tmp_path / "root")
    args = ["--data-root", str(fastparquet_data), "--pipeline-root", root, "--label", "y"]
    done = cli("run", *args, "--train-steps", "2", "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    assert set(json.loads(done.stdout)["training"]["eval"]) == {"auc", "accuracy", "loss"}


@pytest.fixture(scope="module")
def sentinels(tmp_path_factory) -> Path:
    data = tmp_path_factory.mktemp("sentinels")
    table = pa.table({name: pa.array(values, pa.int64()) for name, values in SENTINELS.items()})
    pq.write_table(table.append_column("y", pa.array([0, 1])), data / "part-0.parquet")
    return data


def _domains(schema: schema_pb2.Schema) -> dict[str, list[int]]:
    return {
        f.name: [f.int_domain.min, f.int_domain.max] for f in schema.feature if f.name in SENTINELS
    }


def test_int64_domains_are_exact_from_footers(sentinels):
    assert _domains(infer(sentinels)) == SENTINELS


def test_int64_domains_are_exact_with_example_statistics(sentinels, tmp_path):
    examples, stats = str(tmp_path / "ex"), str(tmp_path / "stats")
    done = cli("convert", str(sentinels), examples, "--example-statistics", stats, "-q")
    assert done.returncode == 0, done.stderr
    assert _domains(infer(examples, "--example-statistics", stats)) == SENTINELS
    assert _domains(infer(str(sentinels), "--example-statistics", stats)) == SENTINELS


def test_int64_domains_are_exact_from_examples_of_footers_without_statistics(sentinels, tmp_path):
    """Footers without statistics: the conversion reads those columns into the Examples' side
    file, so the domains inferred from the Examples are exact, with or without the example
    statistics (whose doubles cannot hold 2^53 + 1)."""
    data, examples, stats = tmp_path / "data", str(tmp_path / "ex"), str(tmp_path / "stats")
    data.mkdir()
    table = pq.read_table(sentinels / "part-0.parquet")
    pq.write_table(table, data / "part-0.parquet", write_statistics=False)
    done = cli("convert", str(data), examples, "--example-statistics", stats, "-q")
    assert done.returncode == 0, done.stderr
    assert _domains(infer(examples, "--example-statistics", stats)) == SENTINELS
    assert _domains(infer(examples)) == SENTINELS
    # From the Parquet folder itself the columns are read: exact again.
    assert _domains(infer(data)) == SENTINELS


def test_a_column_missing_from_older_files_keeps_its_domain(tmp_path):
    """A file without the column holds no values of it: its nulls count, not its silence."""
    df = frame()
    df.drop(columns=["price"]).iloc[:100].to_parquet(tmp_path / "part-0.parquet")
    df.iloc[100:].reset_index(drop=True).to_parquet(tmp_path / "part-1.parquet")
    price = by_name(infer(tmp_path))["price"]
    assert (price.float_domain.min, price.float_domain.max) == (15.0, 64.75)
    assert not price.HasField("shape") and not price.presence.min_fraction
