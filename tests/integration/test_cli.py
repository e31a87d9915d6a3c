"""The command line as a person and a script use it: flags anywhere, --version, exit codes, short
errors, --json documents, a live bar on a terminal and plain lines in a pipe, light commands."""

import datetime
import decimal
import json
import os
import pty
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tfx_tabular.demo import criteo

CLI = os.path.join(os.path.dirname(sys.executable), "tfx-tabular")
HEAVY = ("tensorflow", "apache_beam", "tfx")


def cli(*args, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([CLI, *args], capture_output=True, text=True, timeout=600, **kwargs)


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> str:
    root = str(tmp_path_factory.mktemp("cli") / "data")
    criteo.write_dataset(root, 4000, days=2, files_per_day=1, row_group_size=1000)
    return root


@pytest.fixture(scope="module")
def examples(data, tmp_path_factory) -> str:
    out = str(tmp_path_factory.mktemp("cli") / "examples")
    assert cli("convert", data, out, "--quiet").returncode == 0
    return out


def test_version_names_the_stack():
    result = cli("--version")
    assert result.returncode == 0
    assert result.stdout.startswith("tfx-tabular 0.1.0 (TFX 1.16.0, TensorFlow 2.16.2, Apache Beam")
    after = cli("convert", "--version")  # after a subcommand, whatever else it lacks
    assert after.returncode == 0 and after.stdout == result.stdout
    document = json.loads(cli("head", "--version", "--json").stdout)
    assert document["version"] == "0.1.0" and document["dependencies"]["tfx"] == "1.16.0"


@pytest.mark.parametrize("where", ["before", "after"])
def test_verbose_and_quiet_go_before_or_after_the_subcommand(data, tmp_path, where):
    args = ["convert", data, str(tmp_path / where), "--num-shards", "2"]
    result = cli(*(["--quiet", *args] if where == "before" else [*args, "--quiet"]))
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""  # --quiet: nothing but errors
    verbose = cli("show-schema", "nope.pbtxt", "--verbose")
    assert verbose.returncode == 1 and "Traceback" in verbose.stderr


def test_exit_codes_and_one_line_errors(data, examples, tmp_path):
    usage = cli("convert", data)  # missing OUTPUT_DIR
    assert usage.returncode == 2 and "required: output_dir" in usage.stderr
    bad = cli("convert", str(tmp_path / "missing"), str(tmp_path / "out"))
    assert bad.returncode == 1
    assert bad.stderr.splitlines() == [
        f"tfx-tabular: error: input folder {tmp_path / 'missing'} does not exist",
        "hint: check the path; gs:// URIs work too",
    ]
    taken = cli("convert", data, examples)
    assert taken.returncode == 1 and "already holds a conversion's output" in taken.stderr
    assert "Traceback" not in taken.stderr and len(taken.stderr.strip().splitlines()) <= 2
    options = cli("head", data, "--split", "eval")  # --split is for Examples folders
    assert options.returncode == 2
    # 3 (a task failed) is tested with a failing compiled task in test_compiled_runner.


def test_json_documents_on_stdout_and_logs_on_stderr(data, examples, tmp_path):
    converted = cli("convert", data, str(tmp_path / "ex"), "--json")
    assert converted.returncode == 0, converted.stderr
    document = json.loads(converted.stdout)
    assert sum(document["rows"].values()) == 4000 and document["files"] == 2
    assert "converting 4,000 rows" in converted.stderr  # the human lines moved to stderr

    schema_path = str(tmp_path / "schema.pbtxt")
    inferred = json.loads(
        cli("infer-schema", examples, "-o", schema_path, "--label", "label", "--json").stdout
    )
    assert inferred["features"] == 43 and inferred["from_examples"] and inferred["rows"] == 4000
    shown = json.loads(cli("show-schema", schema_path, "--json").stdout)
    assert [f["name"] for f in shown["feature"]][:2] == ["label", "I1"]

    compiled = cli(
        "compile",
        "--target",
        "kubeflow",
        "--data-root",
        "gs://b/data",
        "--pipeline-root",
        "gs://b/root",
        "--image",
        "img:1",
        "-o",
        str(tmp_path / "p.yaml"),
        "--json",
    )
    assert compiled.returncode == 0, compiled.stderr
    assert json.loads(compiled.stdout)["tasks"] == [
        "ParquetExampleGen",
        "ParquetSchemaGen",
        "TabularTrainer",
    ]
    submitted = cli(
        "submit",
        str(tmp_path / "p.yaml"),
        "--project",
        "p",
        "--region",
        "us-central1",
        "--dry-run",
        "--json",
    )
    assert submitted.returncode == 0, submitted.stderr
    assert "runtimeConfig" in json.dumps(json.loads(submitted.stdout))


def test_run_json_is_the_ml_metadata_report(data, tmp_path):
    result = cli(
        "run",
        "--data-root",
        data,
        "--pipeline-root",
        str(tmp_path / "root"),
        "--train-steps",
        "2",
        "--batch-size",
        "64",
        "--with-example-statistics",
        "--json",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout)
    assert sum(report["examples"]["rows"].values()) == 4000
    assert report["training"]["total_steps"] == 2
    assert report["training"]["tensorboard"] == f"tensorboard --logdir {report['training']['uri']}"
    assert report["model"]["lineage"][-1].startswith("Model#")
    # ParquetExampleGen's statistics, as TFDV's Facets Overview page in the pipeline root.
    facets = tmp_path / "root" / "example_statistics.html"
    assert report["example_statistics"]["facets"] == str(facets)
    page = facets.read_text()
    assert "facets-overview" in page and len(page) > 10_000
    # Which component runs, done of total, on stderr.
    assert "[1/4] ParquetExampleGen running" in result.stderr
    assert "TabularTrainer running" in result.stderr


def test_pipes_get_plain_progress_lines(data, tmp_path):
    result = cli("convert", data, str(tmp_path / "out"))
    assert result.returncode == 0
    assert "converting: 4,000/4,000 rows (100%)" in result.stderr
    assert "\x1b[" not in result.stdout + result.stderr  # no terminal control codes


def test_a_terminal_gets_a_live_progress_bar(data, tmp_path):
    pid, fd = pty.fork()
    if pid == 0:  # the child: the CLI on a pseudo-terminal, as a person runs it
        os.execv(CLI, [CLI, "convert", data, str(tmp_path / "out")])
    output = b""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        output += chunk
    _, status = os.waitpid(pid, 0)
    text = output.decode("utf-8", "replace")
    assert os.waitstatus_to_exitcode(status) == 0, text
    assert "\x1b[" in text and "━" in text  # rich's live bar: control codes and bar glyphs
    assert "4000/4000" in text and "rows" in text


def _heavy_modules_loaded(args) -> list:
    probe = (
        "import json, sys\n"
        "from tfx_tabular.cli import main\n"
        f"code = main({args!r})\n"
        f"heavy = sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r}))\n"
        "print(json.dumps([code, heavy]), file=sys.stderr)"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    code, heavy = json.loads(result.stderr.strip().splitlines()[-1])
    assert code == 0, result.stderr
    return heavy


@pytest.mark.parametrize("command", ["infer-schema", "show-schema", "head"])
def test_light_commands_load_no_tensorflow_beam_or_tfx(examples, tmp_path, command):
    schema_path = str(tmp_path / "schema.pbtxt")
    assert cli("infer-schema", examples, "-o", schema_path).returncode == 0
    args = {
        "infer-schema": ["infer-schema", examples, "-o", schema_path, "-q"],
        "show-schema": ["show-schema", schema_path, "-q"],
        "head": ["head", examples, "-n", "3", "-q"],
    }[command]
    # What keeps them quick is importing no TensorFlow, Beam or TFX (a wall-time bound here
    # failed on a loaded machine: timings belong in `make bench`).
    assert _heavy_modules_loaded(args) == []


def test_head_shows_examples_and_parquet_rows(data, examples):
    shown = cli("head", examples, "-n", "2", "--split", "eval")
    assert shown.returncode == 0, shown.stderr
    text = " ".join(shown.stdout.split())  # the title wraps to the table's width
    assert "Split-eval, first 2 tf.Examples" in text and "│ C26 " in shown.stdout
    parquet = cli("head", data, "-n", "3")
    assert "first 3 Parquet rows" in " ".join(parquet.stdout.split())
    assert "│ day " in parquet.stdout and "2024-01-01" in parquet.stdout  # the partition column


def test_head_shows_gzip_examples(data, tmp_path):
    out = str(tmp_path / "examples")
    assert cli("convert", data, out, "--compression", "gzip", "-q").returncode == 0
    shown = cli("head", out, "-n", "2", "--split", "train")
    assert shown.returncode == 0, shown.stderr
    assert "Split-train, first 2 tf.Examples" in " ".join(shown.stdout.split())


@pytest.fixture(scope="module")
def odd_values(tmp_path_factory) -> str:
    """Values a terminal renderer or JSON could get wrong: markup, emoji codes, control
    characters, nulls, lists, nanosecond timestamps, decimals, bytes that are not UTF-8, NaN."""
    folder = tmp_path_factory.mktemp("cli") / "odd"
    folder.mkdir()
    table = pa.table(
        {
            "plan": ["[pickup]", "[bold]x[/bold]", None],
            "note": [":thumbs_up:", "a\nb", "tab\there"],
            "tags": pa.array([[1, 2], [], None], pa.list_(pa.int64())),
            "at": pa.array([1_700_000_000_123_456_789, None, 0], pa.timestamp("ns", tz="UTC")),
            "day": pa.array([datetime.date(2024, 1, 31)] * 3),
            "price": pa.array([decimal.Decimal("1.10"), None, decimal.Decimal("-0.01")]),
            "raw": pa.array([b"\xff\x00", b"ok", None], pa.binary()),
            "score": [1.5, float("nan"), float("-inf")],
            "wait": pa.array([90_000_001, None, -1], pa.duration("us")),
        }
    )
    pq.write_table(table, folder / "part-0.parquet", version="2.6")
    return str(folder)


def test_head_prints_values_exactly(odd_values):
    shown = cli("head", odd_values)
    assert shown.returncode == 0, shown.stderr
    rows = {line.split("│")[1].strip(): line for line in shown.stdout.splitlines() if "│" in line}
    assert "[pickup]" in rows["plan"] and "[bold]x[/bold]" in rows["plan"]  # not read as markup
    assert "∅" in rows["plan"] and "[1, 2]" in rows["tags"] and "[]" in rows["tags"]
    assert ":thumbs_up:" in rows["note"] and "a\\nb" in rows["note"]  # no emoji, no line break
    assert "2023-11-14 22:13:20.1234567" in rows["at"] and "\\xff\\x00" in rows["raw"]


def test_head_json_gives_the_rows_losslessly(odd_values):
    shown = cli("head", odd_values, "-n", "3", "--json")
    assert shown.returncode == 0, shown.stderr
    document = json.loads(shown.stdout)  # strict JSON: no bare NaN
    assert document["rows"] == 3 and document["columns"][0] == "plan"
    first, second, third = document["records"]
    assert first == {
        "plan": "[pickup]",
        "note": ":thumbs_up:",
        "tags": [1, 2],
        "at": "2023-11-14T22:13:20.123456789+00:00",
        "day": "2024-01-31",
        "price": "1.10",
        "raw": {"base64": "/wA="},
        "score": 1.5,
        "wait": "PT90.000001S",
    }
    assert second["plan"] == "[bold]x[/bold]" and second["note"] == "a\nb"
    assert second["tags"] == [] and second["at"] is None and second["score"] == "NaN"
    assert second["raw"] == "ok" and third["plan"] is None and third["tags"] is None
    assert third["score"] == "-Infinity" and third["wait"] == "-PT0.000001S"
    assert third["at"] == "1970-01-01T00:00:00+00:00"


def test_convert_writes_example_statistics_and_show_statistics_renders_them(data, tmp_path):
    out, stats = str(tmp_path / "examples"), str(tmp_path / "statistics")
    converted = cli("convert", data, out, "--example-statistics", stats, "--json", "-q")
    assert converted.returncode == 0, converted.stderr
    assert json.loads(converted.stdout)["example_statistics"] == stats
    page = str(tmp_path / "stats.html")
    shown = cli("show-statistics", stats, "-o", page, "--json", "-q")
    assert shown.returncode == 0, shown.stderr
    document = json.loads(shown.stdout)
    assert set(document["splits"]) == {"train", "eval"}  # train beside eval by default
    assert sum(s["examples"] for s in document["splits"].values()) == 4000
    html = open(page).read()
    assert html.startswith("<!DOCTYPE html>") and "facets-overview" in html
    one = cli("show-statistics", os.path.join(stats, "Split-eval"), "-o", page, "-q")
    schema = str(tmp_path / "schema.pbtxt")
    inferred = cli("infer-schema", out, "-o", schema, "--example-statistics", stats, "-q")
    assert inferred.returncode == 0, inferred.stderr
    assert "string_domain" in open(schema).read()  # day: partition values; no C* (16k values)
    assert one.returncode == 0, one.stderr
    wrong = cli("show-statistics", stats, "-o", page, "--split", "test")
    assert wrong.returncode == 2 and "no split 'test'" in wrong.stderr


def test_convert_warns_of_non_finite_values_on_stderr_and_in_its_json(tmp_path):
    """Pandas keeps ±inf and writes NaN as null (no value); pyarrow writes NaN as NaN."""
    import numpy as np
    import pandas as pd

    (tmp_path / "in").mkdir()
    x = np.linspace(0.0, 1.0, 10_000)
    x[:50], x[50:53] = np.inf, np.nan
    pd.DataFrame({"x": x, "y": np.arange(10_000.0)}).to_parquet(tmp_path / "in" / "pandas.parquet")
    pq.write_table(
        pa.table({"x": [float("nan"), -float("inf")], "y": [1.0, 2.0]}),
        tmp_path / "in" / "pyarrow.parquet",
    )
    converted = cli("convert", str(tmp_path / "in"), str(tmp_path / "out"), "--json")
    assert converted.returncode == 0, converted.stderr
    line = (
        "column 'x' holds non-finite values (50 +inf, 1 -inf, 1 NaN in 10,002 rows), kept in the "
        "Examples as written; see docs/examplegen.md#non-finite-values"
    )
    document = json.loads(converted.stdout)
    assert document["warnings"] == [line]
    assert document["non_finite_values"] == {"x": {"nan": 1, "pos_inf": 50, "neg_inf": 1}}
    assert f"WARNING: {line}" in converted.stderr.splitlines()
    quiet = cli("convert", str(tmp_path / "in"), str(tmp_path / "quiet"), "--json", "-q")
    assert quiet.returncode == 0 and quiet.stderr == "", quiet.stderr
    assert json.loads(quiet.stdout)["warnings"] == [line]


def test_convert_with_columnar_strings_feeds_the_exact_form_from_columnar_batches(
    data, tmp_path, caplog
):
    """`--columnar-strings` at its defaults otherwise: the layout says the records hold the
    strings, and input_fn reads exact strings from them, every train row once."""
    import tensorflow as tf

    from tfx_tabular import input_fn
    from tfx_tabular.conversion.source_metadata import read_source_metadata
    from tfx_tabular.schemas.infer import infer_schema

    out = str(tmp_path / "examples")
    converted = cli(
        "convert", data, out, "--columnar-batch-rows", "1024", "--columnar-strings", "--json", "-q"
    )
    assert converted.returncode == 0, converted.stderr
    layout = json.load(open(os.path.join(out, "columnar", "columnar.json")))
    assert layout["strings"] is True
    schema = infer_schema(read_source_metadata(out), label="label")
    with caplog.at_level("INFO", logger="tfx_tabular.training.input_fn"):
        dataset = input_fn(out, schema, 256, split="train", training=False)
    assert "input_fn reads columnar batches" in caplog.text
    features, label = next(iter(dataset))
    assert features["C1"].dtype == tf.string
    assert sum(int(tf.shape(label)[0]) for _, label in dataset) == layout["rows"]["train"]
