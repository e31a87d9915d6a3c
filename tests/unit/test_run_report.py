"""The run summary's lines (tfx_tabular.pipelines.run_report.format_run_report)."""

import os

import pytest

from tfx_tabular.cli.app import build_parser
from tfx_tabular.pipelines.run_report import format_run_report


@pytest.mark.parametrize(
    "page, link",
    [
        ("out/demo/pipeline/statistics.html", "file://" + os.path.abspath("out/demo/pipeline")),
        ("gs://bucket/root/statistics.html", "gs://bucket/root"),
    ],
)
def test_the_summary_links_the_statistics_facets_page(page, link):
    statistics = {"uri": "/root/ParquetExampleGen/statistics/1", "facets": page}
    report = dict.fromkeys(("examples", "schema", "training", "model"), None)
    lines = format_run_report({**report, "statistics": statistics}, "demo")
    assert "Statistics  /root/ParquetExampleGen/statistics/1" in lines
    assert f"  Facets Overview: {link}/statistics.html" in lines


def test_the_demo_computes_statistics_and_run_asks_for_them():
    assert build_parser().parse_args(["demo"]).with_example_statistics == "ours"
    assert (
        build_parser()
        .parse_args(["run", "--data-root", "d", "--pipeline-root", "r"])
        .with_example_statistics
        is None
    )
