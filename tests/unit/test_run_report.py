"""The run summary's lines (tfx_tabular.pipelines.run_report.format_run_report)."""

import os

import pytest

from tfx_tabular.cli.app import build_parser
from tfx_tabular.pipelines.run_report import format_run_report


@pytest.mark.parametrize(
    "page, link",
    [
        (
            "out/demo/pipeline/example_statistics.html",
            "file://" + os.path.abspath("out/demo/pipeline"),
        ),
        ("gs://bucket/root/example_statistics.html", "gs://bucket/root"),
    ],
)
def test_the_summary_links_the_statistics_facets_page(page, link):
    statistics = {"uri": "/root/ParquetExampleGen/statistics/1", "facets": page}
    report = dict.fromkeys(("examples", "schema", "training", "model"), None)
    lines = format_run_report({**report, "example_statistics": statistics}, "demo")
    assert "Example statistics  /root/ParquetExampleGen/statistics/1" in lines
    assert f"  Facets Overview: {link}/example_statistics.html" in lines


def test_the_demo_computes_statistics_and_run_asks_for_them():
    assert build_parser().parse_args(["demo"]).with_example_statistics == "ours"
    assert (
        build_parser()
        .parse_args(["run", "--data-root", "d", "--pipeline-root", "r"])
        .with_example_statistics
        is None
    )


def _report(**sections):
    return {
        **dict.fromkeys(("examples", "example_statistics", "schema", "training", "model")),
        **sections,
    }


def test_the_summary_shows_the_demos_learned_auc_beside_its_ceiling():
    training = {"tensorboard": "tensorboard --logdir /r", "eval": {"auc": 0.73233}}
    demo = {"learned_auc": 0.73233, "ceiling_auc": 0.81739, "chance_auc": 0.5, "rows": 66396}
    lines = format_run_report(_report(training=training, demo=demo), "demo")
    assert lines[1:] == [
        "Eval      auc 0.7323",
        "Demo      learned AUC 0.7323 vs ceiling 0.8174 (chance 0.5): the ceiling is the AUC of "
        "the labels' known probabilities on the 66,396 eval rows",
        "TensorBoard  tensorboard --logdir /r",
    ]


@pytest.mark.parametrize(
    "blessed, verdict",
    [
        (True, "  blessed  /root/Evaluator/blessing/7"),
        (False, "  NOT blessed  /root/Evaluator/blessing/7"),
        (None, "  not validated: the Evaluator has no thresholds for this task"),
    ],
)
def test_the_summary_shows_the_evaluators_metrics_and_blessing(blessed, verdict):
    evaluator = {
        "uri": "/root/Evaluator/evaluation/7",
        "metrics": {"auc": 0.71404, "binary_accuracy": 0.775, "example_count": 1000.0},
        "blessed": blessed,
        "blessing_uri": "/root/Evaluator/blessing/7",
    }
    assert format_run_report(_report(evaluator=evaluator), "run")[1:] == [
        "Evaluator auc 0.7140, binary_accuracy 0.7750, example_count 1,000",
        verdict,
        "  metrics  /root/Evaluator/evaluation/7",
    ]
