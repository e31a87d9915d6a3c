"""README.md's performance table, generated from docs/benchmarks.json (benchmarks.report)."""

import os

import pytest

from benchmarks import report, results

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
README = os.path.join(REPO, "README.md")
RESULTS = os.path.join(REPO, "docs", "benchmarks.json")


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def test_the_readme_table_is_what_the_last_bench_measured():
    """A hand edit inside the markers, or a block left stale by a newer docs/benchmarks.json,
    fails here: regenerate with `python -m benchmarks.report --readme`."""
    expected = report.readme_block(report.build(results.load(RESULTS)))
    assert report.current_block(_read(README)) == expected


def test_the_generator_replaces_only_the_text_between_the_markers(tmp_path):
    head = "# Title\n\nprose with 1,234 rows/s that is not ours to touch\n\n"
    tail = "\n\n## After\n\nmore prose\n"
    readme = tmp_path / "README.md"
    readme.write_text(
        head + report.START + "\nstale | 1 row/s\n" + report.END + tail, encoding="utf-8"
    )
    rendered = report.build(results.load(RESULTS))
    assert report.update_readme(str(readme), rendered)
    text = readme.read_text(encoding="utf-8")
    assert text == head + report.START + report.readme_block(rendered) + report.END + tail
    assert "stale" not in text
    assert not report.update_readme(str(readme), rendered)  # idempotent: nothing left to change


@pytest.mark.parametrize(
    "text",
    [
        "no markers at all",
        f"{report.START} only a start",
        f"{report.END} before {report.START}",
        f"{report.START}{report.END}{report.START}{report.END}",
    ],
)
def test_missing_or_misplaced_markers_are_an_error(text):
    with pytest.raises(ValueError):
        report.replace_block(text, "new")


def test_the_block_carries_the_results_figures():
    """The table is built from the rows' numbers: changing one changes the README block."""
    saved = results.load(RESULTS)
    (stock,) = [
        row
        for row in saved["rows"]
        if row["configuration"] == "stock StatisticsGen + SchemaGen" and row["metric"] == "seconds"
    ]
    assert f"SchemaGen: {stock['samples'][0]:.1f} |" in report.readme_block(report.build(saved))
    stock["samples"][0] += 1000
    assert f"SchemaGen: {stock['samples'][0]:.1f} |" in report.readme_block(report.build(saved))
