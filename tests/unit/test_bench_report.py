"""The benchmark report: tidy rows in, tables, targets and a plot out (benchmarks.report)."""

import os

import pytest

from benchmarks import layout, report, results
from benchmarks.results import Recorder
from benchmarks.targets import TARGETS

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RESULTS = os.path.join(REPO, "docs", "benchmarks.json")
HEADINGS = [  # docs/benchmarks.md's `## ` headings: other pages link to them as anchors
    "Machine and versions",
    "Targets",
    "ExampleGen: Parquet → TFRecord",
    "One-pass statistics and columnar batches (ParquetExampleGen's `statistics` and `columnar/`)",
    "Schema inference (ParquetSchemaGen)",
    "Trainer input pipeline (input_fn)",
    "Peer Parquet → TensorFlow loaders",
    "Input workers (tf.data service)",
    "Larger than memory: conversion and input_fn under a memory cap",
    "Conversion on Beam's portable runner with an external SDK worker pool",
    "Wide tables (2,000 columns)",
]
RUN = {
    "command": {"rows": 10, "stock_rows": 10, "repeats": 2},
    "started_utc": "2000-01-01 00:00 UTC",
    "elapsed_seconds": 60.0,
    "machine": {
        "nproc": 2,
        "cpu": "a CPU",
        "memory": 2**33,
        "kernel": "Linux",
        "python": "3.10",
        "load": [0.0, 0.0, 0.0],
    },
    "versions": {"tfx": "1.16.0"},
    "code": "git 0000000",
    "calibration": {
        "scaling": [{"one": 1.0, "two": 1.0, "speedup": 2.0}] * 2,
        "contention": {"other": 0.0, "own": 0.5, "steal": 0.0},
    },
}


def wide_table_rows(schema_seconds: float) -> list[dict]:
    recorder = Recorder("wide_table")
    for config, seconds, rss, values in (
        ("wide-without", 40, 900 << 20, 95e6),
        ("wide-with", 50, 1000 << 20, 95e6),
        ("criteo-without", 5, 500 << 20, 20e6),
        ("criteo-with", 6, 600 << 20, 20e6),
    ):
        for noise in (0.9, 1.1):  # two repeats, their median the figure above
            cpu = seconds * noise
            sample = {"rows": 10, "seconds": cpu, "cpu_seconds": cpu, "peak_rss": rss}
            recorder.add(
                config, {**sample, "values": values, "values_per_cpu_second": values / cpu}
            )
    recorder.add(
        "infer-schema, show-schema on the wide output",
        {"infer_seconds": 1.0, "show_seconds": schema_seconds},
    )
    for config, seconds, rss in (
        ("run: 2,000 columns, 1 epoch", 200.0, 5 << 30),
        ("run: Criteo-shaped, 1 epoch", 40.0, 1 << 30),
    ):
        recorder.add(
            config,
            {"seconds": seconds, "peak_rss": rss, "steps": 32, "steps_per_second": 1.5,
             "export_seconds": 9.0, "eval_auc": 0.75, "features": 40},
        )  # fmt: skip
    return recorder.rows()


def test_a_recorder_keeps_numbers_and_text_per_metric():
    recorder = Recorder("s")
    recorder.add("c", {"seconds": 1.5, "rows": 3, "error": "x", "files": ["a"], "ok": True})
    recorder.add("c", {"seconds": 2.5, "rows": 3})
    rows = {row["metric"]: row["samples"] for row in recorder.rows()}
    assert rows == {"seconds": [1.5, 2.5], "rows": [3, 3], "error": ["x"]}
    assert results.sections(recorder.rows())["s"]["c"].seconds == 2.0


def test_the_report_renders_from_a_small_fixture_of_rows(tmp_path):
    out = tmp_path / "benchmarks.md"
    results.save(
        {"run": RUN, "rows": wide_table_rows(schema_seconds=9.0)}, str(tmp_path / "r.json")
    )
    rendered = report.write(results.load(str(tmp_path / "r.json")), str(out))
    text = out.read_text(encoding="utf-8")
    assert (tmp_path / "benchmarks.png").stat().st_size > 0
    assert "## Wide tables (2,000 columns)" in text
    assert "## ExampleGen" not in text  # a section with no rows is left out
    assert "| wide-with | 10 | 95,000,000 | 50.0 | 50.0 | 1,919,192 | 1,000 MiB |" in text
    met = {c.target.name: c.met for c in rendered.checked if c.target.section == "wide_table"}
    assert met == {
        "peak memory converting 2,000 columns": True,
        "values/CPU s, Criteo-shaped over 2,000 columns": True,  # 1.68x
        "statistics' CPU added at 2,000 columns": True,  # +25%
        "infer-schema and show-schema at 2,000 columns, the slower, seconds": False,  # 9 s
        "tfx-tabular run, one epoch on 2,000 columns x 50,000 rows, seconds": True,  # 200 s
        "peak memory of that run": False,  # 5 GiB
    }
    assert (
        "| run: 2,000 columns, 1 epoch | 40 | 200.0 | 32 | 1.50 | 9.00 | 0.750 | 5,120 MiB |"
        in text
    )
    others = [c for c in rendered.checked if c.target.section != "wide_table"]
    assert others and all(c.met is None for c in others)  # not measured, not failed
    assert "| not measured |" in text


# Sections and targets added since the published results' full `make bench`: they wait for the
# next one (which must then drop them from here; the test below fails until it does).
AWAITING_A_FULL_RUN: set = set()
TARGETS_AWAITING_A_FULL_RUN: set = set()


def test_every_target_is_measured_by_the_last_bench():
    """Each target names configurations and metrics the sections record: in the published
    results, every target has a figure unless its section recorded why it measured nothing."""
    rendered = report.build(results.load(RESULTS))
    for checked in rendered.checked:
        if checked.target.section in AWAITING_A_FULL_RUN:
            assert checked.target.section not in rendered.sections, "measured: drop it above"
            continue
        if checked.target.name in TARGETS_AWAITING_A_FULL_RUN:
            assert checked.value is None, f"measured: drop {checked.target.name!r} above"
            continue
        section = rendered.sections[checked.target.section]
        explained = any("error" in c.metrics for c in section.configurations.values())
        assert checked.value is not None or explained, checked.target.name


def test_every_section_has_its_method_and_keeps_its_heading():
    text = open(os.path.join(REPO, "docs", "benchmarks.md"), encoding="utf-8").read()
    headings = [line[3:] for line in text.splitlines() if line.startswith("## ")]
    assert headings == HEADINGS
    for view in layout.LAYOUTS:
        assert os.path.isfile(os.path.join(report.METHOD, f"{view.section}.md")), view.section
    assert {t.section for t in TARGETS} <= {view.section for view in layout.LAYOUTS}


def peers_rows() -> list[dict]:
    recorder = Recorder("peers")
    for name, cpu_rate, said in (
        ("ours: input_fn, columnar batches, batch 4,096", 500e3, "values equal on 9 rows"),
        ("pyarrow generator (from_generator), batch 4,096", 150e3, "nulls filled (0 / '')"),
        ("Petastorm, batch 4,096", None, "cannot run here: ValueError: x"),
        ("ours: input_fn, columnar batches, batch 65,536", 600e3, "values equal on 9 rows"),
        ("Ray Data (to_tf), batch 65,536", 100e3, "fails on the data (y): filled copy"),
    ):
        for noise in (0.9, 1.1):
            if cpu_rate is None:
                recorder.add(name, {"error": said})
                continue
            rate = cpu_rate * noise
            sample = {"examples_per_second": rate, "examples_per_cpu_second": rate}
            recorder.add(name, {**sample, "peak_rss": 1 << 30, "equality": said})
    return recorder.rows()


def test_the_peers_table_says_why_and_the_target_compares_with_peers_that_ran(tmp_path):
    out = tmp_path / "benchmarks.md"
    results.save({"run": RUN, "rows": peers_rows()}, str(tmp_path / "r.json"))
    rendered = report.write(results.load(str(tmp_path / "r.json")), str(out))
    text = out.read_text(encoding="utf-8")
    assert "| Petastorm, batch 4,096 | — | — | — | — | cannot run here: ValueError: x |" in text
    assert "| 100,000 | 6.00x | 1,024 MiB | fails on the data (y): filled copy |" in text
    met = {c.target.name: c.met for c in rendered.checked if c.target.section == "peers"}
    assert list(met.values()) == [False, True]  # 3.33x at 4,096 (the generator); 6x at 65,536
    readme = report.readme_block(rendered)
    assert "| 500,000 | the best peer loader at batch 4,096: 150,000 | 3.33x |" in readme


def test_a_merged_run_replaces_only_its_sections_rows_and_the_report_says_so(tmp_path):
    first = {"run": RUN, "rows": wide_table_rows(schema_seconds=9.0) + peers_rows()}
    later_run = {**RUN, "started_utc": "2000-01-02 00:00 UTC", "code": "git 1111111"}
    again = {"run": later_run, "rows": wide_table_rows(schema_seconds=1.0)}
    merged = results.merged(first, again, ["wide_table"])
    assert merged["rows"] == peers_rows() + wide_table_rows(schema_seconds=1.0)
    assert merged["run"]["started_utc"] == RUN["started_utc"]
    assert [r["sections"] for r in merged["run"]["remeasured"]] == [["wide_table"]]
    # Measuring a section again drops it from the earlier re-measure that listed it.
    twice = results.merged(merged, {"run": later_run, "rows": peers_rows()}, ["peers"])
    twice = results.merged(twice, {"run": later_run, "rows": []}, ["wide_table"])
    assert [r["sections"] for r in twice["run"]["remeasured"]] == [["peers"], ["wide_table"]]

    out = tmp_path / "benchmarks.md"
    rendered = report.write(merged, str(out))
    text = " ".join(out.read_text(encoding="utf-8").split())
    assert (
        "Measured again by a later run (`--only ... --merge`) on 2000-01-02 00:00 UTC, on " in text
    )
    assert "git 1111111, in 1.0 min (other processes used 0.0% of the CPU): `wide_table`." in text
    met = {c.target.name: c.met for c in rendered.checked if c.target.section == "wide_table"}
    assert met["infer-schema and show-schema at 2,000 columns, the slower, seconds"]  # 1 s now
    readme = " ".join(report.readme_block(rendered).split())
    assert "from one `make bench` run on 2000-01-01 00:00 UTC" in readme
    assert "wide_table measured again by 1 later run(s)" in readme


def test_merge_needs_sections_and_earlier_results_of_the_same_command(tmp_path, capsys):
    from benchmarks import run

    with pytest.raises(SystemExit):
        run.parse_args(["--merge"])
    assert "--merge needs --only" in capsys.readouterr().err
    path = str(tmp_path / "benchmarks.json")
    with pytest.raises(SystemExit, match="--merge needs the earlier results"):
        run._earlier_results(path, RUN["command"])
    results.save({"run": RUN, "rows": []}, path)
    assert run._earlier_results(path, RUN["command"])["run"] == RUN
    with pytest.raises(SystemExit, match="measure every section again"):
        run._earlier_results(path, {**RUN["command"], "rows": 20})
