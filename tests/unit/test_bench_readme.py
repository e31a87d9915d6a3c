"""README.md's performance table, generated from docs/benchmarks.json (benchmarks.report_readme)."""

import os

import pytest

from benchmarks import report, report_readme

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
README = os.path.join(REPO, "README.md")
RESULTS = os.path.join(REPO, "docs", "benchmarks.json")


def _block(results: dict) -> str:
    return report_readme.block(results, report.render_sections(results))


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def test_the_readme_table_is_what_the_last_bench_measured():
    """A hand edit inside the markers, or a block left stale by a newer docs/benchmarks.json,
    fails here: regenerate with `python -m benchmarks.report --readme`."""
    expected = report_readme.block(
        report.load(RESULTS), report.render_sections(report.load(RESULTS))
    )
    assert report_readme.current_block(_read(README)) == expected


def test_the_generator_replaces_only_the_text_between_the_markers(tmp_path):
    head = "# Title\n\nprose with 1,234 rows/s that is not ours to touch\n\n"
    tail = "\n\n## After\n\nmore prose\n"
    readme = tmp_path / "README.md"
    readme.write_text(
        head + report_readme.START + "\nstale | 1 row/s\n" + report_readme.END + tail,
        encoding="utf-8",
    )
    results = report.load(RESULTS)
    assert report_readme.update(str(readme), results, report.render_sections(results))
    text = readme.read_text(encoding="utf-8")
    block = _block(results)
    assert text == head + report_readme.START + block + report_readme.END + tail
    assert "stale" not in text
    assert not report_readme.update(
        str(readme), results, report.render_sections(results)
    )  # idempotent: nothing left to change


@pytest.mark.parametrize(
    "text",
    [
        "no markers at all",
        f"{report_readme.START} only a start",
        f"{report_readme.END} before {report_readme.START}",
        f"{report_readme.START}{report_readme.END}{report_readme.START}{report_readme.END}",
    ],
)
def test_missing_or_misplaced_markers_are_an_error(text):
    with pytest.raises(ValueError):
        report_readme.replace_block(text, "new")


def test_the_block_carries_the_results_figures():
    """The table is built from the results' numbers: changing one changes the README block."""
    results = report.load(RESULTS)
    stock = results["sections"]["schema_inference"]["stock"]
    assert f"SchemaGen: {stock['seconds']:.1f} s |" in report_readme.block(
        results, report.render_sections(results)
    )
    stock["seconds"] += 1000
    assert f"SchemaGen: {stock['seconds']:.1f} s |" in report_readme.block(
        results, report.render_sections(results)
    )
