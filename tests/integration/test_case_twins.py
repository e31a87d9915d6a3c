"""A column spelt `Age` in old files and `age` in new ones (pandas' frames, written with its
defaults): `convert` says so in one line naming both spellings and a file of each, and converts
the data as it is; two such columns side by side in one file are two columns, said nothing of
(decision 0027)."""

from __future__ import annotations

import os
import subprocess
import sys

import pandas as pd

from tfx_tabular.conversion.source_metadata import read_source_metadata

CLI = os.path.join(os.path.dirname(sys.executable), "tfx-tabular")
NOTICE = "differ only in case"


def cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run([CLI, *args], capture_output=True, text=True, timeout=600)


def test_a_column_renamed_in_case_across_files_is_said_once(tmp_path):
    data = tmp_path / "data"
    for folder, column, ages in (("2023", "Age", [31, 45]), ("2024", "age", [27, 60])):
        (data / folder).mkdir(parents=True)
        pd.DataFrame({column: ages, "y": [0, 1]}).to_parquet(data / folder / "part-0.parquet")
    out = str(tmp_path / "examples")
    done = cli("convert", str(data), out)
    assert done.returncode == 0, done.stderr
    (line,) = [line for line in done.stderr.splitlines() if NOTICE in line]
    assert "'Age' in 2023/part-0.parquet" in line and "'age' in 2024/part-0.parquet" in line
    assert "--exclude-columns" in line
    assert sorted(read_source_metadata(out).schema.names) == ["Age", "age", "y"]


def test_case_twins_in_one_file_are_two_columns(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    pd.DataFrame({"Age": [31, 45], "age": [3, 4], "y": [0, 1]}).to_parquet(data / "p.parquet")
    pd.DataFrame({"Age": [27], "y": [1]}).to_parquet(data / "q.parquet")
    done = cli("infer-schema", str(data), "-o", str(tmp_path / "schema.pbtxt"))
    assert done.returncode == 0, done.stderr
    assert NOTICE not in done.stderr
