"""Every command's errors as docs/cli.md promises them: one line naming the file, column or flag,
a hint, exit code 1 for bad input (missing, unreadable, not writable, wrong content), 2 for usage,
3 for a failing task, and a traceback only with --verbose.

The matrix runs the CLI's main() in this process (each case a fraction of a second: the checks
come before any conversion, TFX run or request); a few cases run as a subprocess, to prove that
nothing else (a traceback, TFX's or Beam's logs) reaches stderr. Errors raised inside the
conversion (bad values, a corrupt page) run `convert` as a subprocess with its default runner
mode, at the end."""

import decimal
import os
import re
import subprocess
import sys
import warnings

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import convert_to_examples

from tfx_tabular.cli.app import main

CLI = os.path.join(os.path.dirname(sys.executable), "tfx-tabular")


def cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run([CLI, *args], capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict:
    """The matrix's inputs: a hive-partitioned dataset, its Examples (converted without example
    statistics), a compiled pipeline, files of the wrong content, and an unwritable folder."""
    root = tmp_path_factory.mktemp("cli_errors")
    data = root / "data"
    for day, labels in (("2024-01-01", [0, 1, 0]), ("2024-01-02", [1, 1, 0])):
        (data / f"day={day}").mkdir(parents=True)
        table = pa.table({"label": labels, "plan": ["basic", "pro", "basic"], "x": [1.0, 2.0, 3.0]})
        pq.write_table(table, data / f"day={day}" / "part-0.parquet")
    convert_to_examples(str(data), str(root / "examples"))
    (root / "garbage.txt").write_text("garbage\n")
    (root / "garbage.pbtxt").write_text("garbage\n")
    compiled = str(root / "pipeline.json")
    common = ["--data-root", "gs://b/data", "--pipeline-root", "gs://b/root", "--image", "img:1"]
    assert _main(["compile", "--target", "vertex", *common, "-o", compiled, "-q"]) == 0
    return {
        "data": str(data),
        "examples": str(root / "examples"),
        "garbage": str(root / "garbage.txt"),
        "garbage_pbtxt": str(root / "garbage.pbtxt"),
        "compiled": compiled,
        "out": str(root / "out"),
        "read_only": _read_only_folder(root),
    }


def _read_only_folder(root) -> str:
    """A folder nothing can be written in: a folder without write permission; root ignores
    permissions, so then a kernel file system that refuses new entries (sysfs)."""
    folder = root / "read-only"
    folder.mkdir()
    folder.chmod(0o555)
    for candidate in (str(folder), "/sys"):
        try:
            open(os.path.join(candidate, "probe"), "w").close()
        except OSError:
            return candidate
        os.remove(os.path.join(candidate, "probe"))
    pytest.skip("no folder here refuses writes")


def _main(argv) -> int:
    """The CLI in this process, leaving the warning filters as they were."""
    with warnings.catch_warnings():
        return main(argv)


def _argv(files: dict, line: str) -> list:
    return [word.format(**files) for word in line.split()]


# (command line, exit code, words of the error line, words of the hint line or None)
MATRIX = [
    # convert
    ("convert", 2, ["required: input, output_dir"], None),
    ("convert {out}/missing {out}/c1", 1, ["missing does not exist"], "check the path"),
    ("convert {data} {read_only}/c2", 1, ["c2 is not writable"], "permissions"),
    ("convert {data} {examples}", 1, ["already holds a conversion's output"], None),
    (
        "convert {data} {out}/c3 --exclude-columns plna",
        1,
        ["--exclude-columns 'plna'", "'plan'?"],
        "--exclude-columns",
    ),
    ("convert {data} {out}/c4 --split-by-partition dya", 1, ["'dya'", "'day'?"], "day"),
    ("convert {data} {out}/c5 --partition-filter dy=1", 1, ["--partition-filter 'dy'"], "day"),
    ("convert {data} {out}/c6 --num-shards -1", 2, ["--num-shards", ">= 0"], None),
    ("convert {data} {out}/c7 --split-pattern train", 2, ["--split-pattern takes KEY"], None),
    (
        "convert {data} {out}/c8 --columnar-strings",
        2,
        ["--columnar-strings", "give --columnar-batch-rows too"],
        None,
    ),
    # infer-schema
    ("infer-schema {data} -o {out}/s.pbtxt --label lable", 1, ["'label'?"], "--label takes"),
    ("infer-schema {data} -o {read_only}/s.pbtxt", 1, ["--output", "not writable"], "permis"),
    (
        "infer-schema {data} -o {out}/s.pbtxt --curated-schema {garbage}",
        1,
        ["--curated-schema"],
        "schema.pbtxt",
    ),
    ("infer-schema {out}/missing -o {out}/s.pbtxt --label l", 1, ["does not exist"], "path"),
    # show-schema
    ("show-schema {out}/missing.pbtxt", 1, ["missing.pbtxt does not exist"], "check the path"),
    ("show-schema {garbage}", 1, ["garbage.txt is neither a .pbtxt file nor"], "schema.pbtxt"),
    ("show-schema {garbage_pbtxt}", 1, ["garbage.pbtxt is not a schema in"], "schema.pbtxt"),
    # show-statistics
    ("show-statistics {examples} -o {out}/s.html", 1, ["an Examples folder"], "--example-stat"),
    ("show-statistics {garbage} -o {out}/s.html", 1, ["not TFDV's example stat"], "--example-st"),
    ("show-statistics {examples} -o {read_only}/s.html", 1, ["--output"], "permissions"),
    ("show-statistics {out}/missing -o {out}/s.html", 1, ["does not exist"], "check the path"),
    # head
    ("head {out}/missing", 1, ["does not exist"], "check the path"),
    ("head {data} -n 0", 2, ["-n", ">= 1"], None),
    ("head {examples} --split test", 2, ["--split 'test'", "train"], None),
    ("head {data} --split eval", 2, ["--split is for Examples folders"], None),
    # run
    ("run --data-root {data} --pipeline-root {out}/r --label lable", 1, ["'label'?"], "--label"),
    ("run --data-root {data} --pipeline-root {read_only}/r", 1, ["--pipeline-root"], "permis"),
    ("run --data-root {out}/missing --pipeline-root {out}/r", 1, ["does not exist"], "path"),
    (
        "run --data-root {data} --pipeline-root {out}/r --curated-schema {garbage_pbtxt}",
        1,
        ["--cu"],
        "pb",
    ),
    ("run --data-root {data} --pipeline-root {out}/r --split-by-partition d", 1, ["'d'"], "day"),
    ("run --data-root {data} --pipeline-root {out}/r --columns plan,x", 2, ["leaves out"], None),
    (
        "run --data-root {data} --pipeline-root {out}/r --columns label,pln",
        1,
        ["'plan'?"],
        "--columns takes",
    ),
    ("run --data-root {data} --pipeline-root {out}/r --epochs 0", 2, ["--epochs"], None),
    # demo
    ("demo --workdir {read_only}/demo", 1, ["--workdir", "not writable"], "permissions"),
    ("demo --workdir {out}/demo --rows 50 --label lable", 1, ["'label'?"], "--label"),
    ("demo --rows 0", 2, ["--rows", ">= 1"], None),
    # compile (a local data root is read; a gs:// one, which compiling cannot read, is not)
    (
        "compile --target vertex --data-root {data} --pipeline-root gs://b/r --image i -o {out}/p.json "
        "--label lable",
        1,
        ["--label 'lable'", "'label'?"],
        "--label",
    ),
    (
        "compile --target vertex --data-root gs://b/d --pipeline-root gs://b/r --image i "
        "-o {read_only}/p.json",
        1,
        ["--output"],
        "permissions",
    ),
    (
        "compile --target vertex --data-root gs://b/d --pipeline-root gs://b/r --image i -o {out}/p "
        "--training-job-region us-central1",
        2,
        ["without --training-job-project"],
        None,
    ),
    (
        "compile --target vertex --data-root gs://b/d --pipeline-root gs://b/r --image i -o {out}/p "
        "--training-job-project p --training-job-region us-central1 --training-job-input-workers 0",
        2,
        ["--training-job-input-workers", ">= 1"],
        None,
    ),
    (
        "compile --target vertex --data-root gs://b/d --pipeline-root gs://b/r --image i -o {out}/p "
        "--training-job-project p --training-job-region us-central1 --training-job-input-workers 2 "
        "--data-service h:5050",
        2,
        ["--data-service", "--training-job-input-workers"],
        None,
    ),
    (
        "compile --target vertex --data-root gs://b/d --pipeline-root gs://b/r --image i -o {out}/p "
        "--columns I1,C1",
        2,
        ["--columns leaves out the label 'label'"],
        None,
    ),
    # submit
    ("submit {out}/missing.json --project p --region us-central1", 1, ["does not exist"], "path"),
    ("submit {garbage} --project p --region us-central1", 1, ["no PipelineSpec"], "compile"),
    (
        "submit {compiled} --project p --region us-centrl1 --dry-run",
        2,
        ["'us-centrl1'", "did you mean us-central1"],
        "regions",
    ),
    (
        "submit {compiled} --project p --region us-central1 --param nope=1 --dry-run",
        2,
        ["'nope'"],
        None,
    ),
    ("submit {compiled} --target kubeflow --host ftp://x --dry-run", 2, ["--host"], None),
    # run-compiled
    ("run-compiled {out}/missing.json --pipeline-root {out}/rc", 1, ["does not exist"], "path"),
    ("run-compiled {garbage} --pipeline-root {out}/rc", 1, ["garbage.txt"], "compile"),
    ("run-compiled {compiled} --pipeline-root {read_only}/rc", 1, ["--pipeline-root"], "permis"),
    ("run-compiled {compiled} --pipeline-root {out}/rc --param nope=1", 2, ["'nope'"], None),
]


@pytest.mark.parametrize("line, code, words, hint", MATRIX, ids=[m[0].split()[0] for m in MATRIX])
def test_every_command_fails_in_one_line_with_its_exit_code(files, capsys, line, code, words, hint):
    try:
        returned = _main(_argv(files, line))
    except SystemExit as usage:  # argparse's own usage errors
        returned = usage.code
    lines = capsys.readouterr().err.strip().splitlines()
    assert returned == code, lines
    error = next(i for i, text in enumerate(lines) if "error: " in text)
    assert all(word in lines[error] for word in words), lines
    rest = lines[error + 1 :]
    assert len(rest) == (hint is not None), lines  # the hint, and nothing after it
    if hint is not None:
        assert rest[0].startswith("hint: ") and hint in rest[0], lines
    assert "Traceback" not in "\n".join(lines)


def test_a_gs_data_root_that_compile_cannot_read_is_not_checked(files, capsys):
    argv = _argv(
        files, "compile --target kubeflow --data-root gs://b/data --pipeline-root gs://b/r"
    )
    output = os.path.join(files["out"], "unchecked.yaml")
    assert _main([*argv, "--image", "i", "-o", output, "--label", "lable", "-q"]) == 0
    assert capsys.readouterr().err == ""


def test_only_the_error_reaches_stderr_and_verbose_adds_the_traceback(files):
    argv = _argv(files, "run --data-root {data} --pipeline-root {out}/s --label Label")
    failed = cli(*argv)
    assert failed.returncode == 1
    assert failed.stderr.splitlines() == [
        f"tfx-tabular: error: --label 'Label' is not a column of {files['data']}; "
        "did you mean 'label'?",
        f"hint: --label takes a column of {files['data']}: label, plan, x, day",
    ]
    verbose = cli(*argv, "--verbose")
    assert verbose.returncode == 1 and "Traceback" in verbose.stderr
    region = cli("submit", files["compiled"], "--project", "p", "--region", "europe-west99")
    assert region.returncode == 2 and len(region.stderr.splitlines()) == 2, region.stderr
    assert "frozenset" not in region.stderr and "Traceback" not in region.stderr


def test_a_failing_component_inside_run_is_one_line_and_exit_code_3(files):
    # Beam refuses the runner when ParquetExampleGen starts its conversion: the first component.
    argv = _argv(files, "run --data-root {data} --pipeline-root {out}/failing")
    failed = cli(*argv, "--beam-arg=--runner=NoSuchRunner", "--quiet")
    assert failed.returncode == 3, failed.stderr
    assert failed.stderr.splitlines() == [
        failed.stderr.splitlines()[0],
        "hint: rerun with --verbose for the full message and traceback",
    ]
    assert failed.stderr.startswith("tfx-tabular: error: ValueError: Unexpected pipeline runner")
    assert "ParquetExampleGen" in failed.stderr.splitlines()[0]


# ---- errors raised inside the conversion, through `convert` as users run it
#
# The cases above fail in checks before any work. These fail inside the Beam pass, in a worker
# (a value that cannot convert, a page that cannot be read), so each runs the CLI as a user does:
# `python -m tfx_tabular.cli convert IN OUT` in a process of its own, with the default flags and
# so the default runner mode (a thread per core), beside a large good file whose shards are
# still converting when the bad one fails. Files are written by pyarrow.

GOOD_ROWS = 300_000  # several shards, each busy for a while
DEC20 = pa.decimal128(20, 2)


def _case_data(folder, good: pa.Table, bad: pa.Table, bad_name: str) -> str:
    folder.mkdir(parents=True)
    pq.write_table(good, folder / "good.parquet", row_group_size=GOOD_ROWS // 6)
    pq.write_table(bad, folder / bad_name)
    return str(folder)


def _flip_a_data_page(path, column: int) -> None:
    """Flip the bytes of the first data page's header of `column` (found from the footer): the
    footer stays valid, the page does not."""
    metadata = pq.ParquetFile(path).metadata
    start = metadata.row_group(0).column(column).data_page_offset
    data = bytearray(path.read_bytes())
    data[start : start + 16] = bytes(b ^ 0xFF for b in data[start : start + 16])
    path.write_bytes(bytes(data))


def inside_cases(root) -> dict:
    """Case → (input folder, extra flags, the bad file's name, its bad column)."""
    ids = np.arange(GOOD_ROWS)
    fixed = pa.list_(pa.float32(), 3)
    cases = {
        "uint64_above_int64_max": (
            pa.table({"id": ids, "u": pa.array(ids, pa.uint64())}),
            pa.table({"id": [1, 2], "u": pa.array([5, 2**63 + 1], pa.uint64())}),
            [],
            "u",
        ),
        "null_inside_a_list": (
            pa.table({"id": ids, "l": pa.ListArray.from_arrays(np.arange(GOOD_ROWS + 1), ids)}),
            pa.table({"id": [1], "l": pa.array([[1, None]], pa.list_(pa.int64()))}),
            [],
            "l",
        ),
        "decimal_over_18_digits_as_bytes": (
            pa.table({"id": ids, "d": pa.array(ids.astype(np.int32)).cast(DEC20)}),
            pa.table({"id": [1], "d": pa.array([decimal.Decimal("123456789012345678.91")], DEC20)}),
            ["--decimal-as", "bytes"],
            "d",
        ),
        "null_row_of_a_fixed_size_list": (
            pa.table(
                {
                    "id": ids,
                    "v": pa.FixedSizeListArray.from_arrays(
                        pa.array(np.ones(3 * GOOD_ROWS, np.float32)), 3
                    ),
                }
            ),
            pa.table({"id": [1, 2], "v": pa.array([[1, 2, 3], None], fixed)}),
            [],
            "v",
        ),
    }
    found = {}
    for case, (good, bad, flags, column) in cases.items():
        found[case] = (_case_data(root / case, good, bad, "bad.parquet"), flags, column)
    strings = pa.table({"id": ids, "s": pa.array(ids.astype(str))})
    folder = _case_data(root / "corrupt_data_page", strings, strings, "bad.parquet")
    _flip_a_data_page(root / "corrupt_data_page" / "bad.parquet", column=1)
    found["corrupt_data_page"] = (folder, [], "s")
    return found


@pytest.fixture(scope="module")
def inside(tmp_path_factory) -> dict:
    return inside_cases(tmp_path_factory.mktemp("inside"))


def convert_as_users_do(*args) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "tfx_tabular.cli", "convert", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=600)


# A progress line, printed every 10 s when stderr is not a terminal (`runners/progress.py`).
_PROGRESS_LINE = re.compile(r"^converting: [\d,]+/[\d,]+ rows \(\d+%\), [\d,]+ rows/s")


def assert_one_line_naming(failed, path: str, column: str) -> None:
    """Exit code 1; on stderr the error line naming the file and the column, and at most a
    hint after it; before them only progress lines (a slow run prints some); no traceback
    anywhere."""
    lines = failed.stderr.strip().splitlines()
    while lines and _PROGRESS_LINE.match(lines[0]):
        lines = lines[1:]
    assert failed.returncode == 1, failed.stderr[-3000:]
    assert 1 <= len(lines) <= 2, failed.stderr[-3000:]
    assert lines[0].startswith("tfx-tabular: error: ") and path in lines[0], lines
    assert f"column {column!r}" in lines[0], lines
    assert len(lines) == 1 or lines[1].startswith("hint: "), lines
    assert "Traceback" not in failed.stderr + failed.stdout


def assert_nothing_left(*folders: str) -> None:
    """No output published and no staging folder left in any of `folders`."""
    for folder in folders:
        for _, dirs, files in os.walk(folder):
            assert not [d for d in dirs if d.startswith((".tfx-tabular", "Split-"))], dirs
            assert not files, files


CASES = [
    "uint64_above_int64_max",
    "null_inside_a_list",
    "decimal_over_18_digits_as_bytes",
    "null_row_of_a_fixed_size_list",
    "corrupt_data_page",
]


@pytest.mark.slow  # a process each (~5 s)
@pytest.mark.parametrize("with_statistics", [False, True], ids=["examples", "with_statistics"])
@pytest.mark.parametrize("case", CASES)
def test_errors_inside_the_conversion_are_one_line_with_nothing_left(
    inside, tmp_path, case, with_statistics
):
    source, flags, column = inside[case]
    out, statistics = str(tmp_path / "out"), str(tmp_path / "statistics")
    if with_statistics:
        flags = [*flags, "--example-statistics", statistics]
    failed = convert_as_users_do(source, out, *flags)
    assert_one_line_naming(failed, os.path.join(source, "bad.parquet"), column)
    assert_nothing_left(out, statistics)


@pytest.mark.slow  # worker processes
@pytest.mark.parametrize("case", ["uint64_above_int64_max", "corrupt_data_page"])
def test_errors_inside_the_conversion_on_worker_processes(inside, tmp_path, case):
    source, flags, column = inside[case]
    out, statistics = str(tmp_path / "out"), str(tmp_path / "statistics")
    failed = convert_as_users_do(
        source,
        out,
        *flags,
        "--example-statistics",
        statistics,
        "--beam-arg=--direct_running_mode=multi_processing",
        "--beam-arg=--direct_num_workers=2",
    )
    assert_one_line_naming(failed, os.path.join(source, "bad.parquet"), column)
    assert_nothing_left(out, statistics)


@pytest.mark.slow  # a pipeline run, whose first component fails
def test_an_error_inside_the_conversion_of_a_pipeline_run_is_one_line(inside, tmp_path):
    """ParquetExampleGen runs the same conversion inside `run`: the same line, exit code 1."""
    source, _, column = inside["null_inside_a_list"]
    command = [sys.executable, "-m", "tfx_tabular.cli", "run", "--data-root", source]
    command += ["--pipeline-root", str(tmp_path / "root"), "--label", "id"]
    failed = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert_one_line_naming(failed, os.path.join(source, "bad.parquet"), column)
