"""Non-finite values as pandas writes them (it keeps inf, and NaN from arithmetic on nullable
floats), through `tfx-tabular run` as users run it: in a feature they count as missing and do not
erase it; in a label they fail naming it before a step learns from them; a loss that diverges is
recorded, not a crash of ML Metadata."""

import json
import os
import sqlite3
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

CLI = os.path.join(os.path.dirname(sys.executable), "tfx-tabular")
HERE = os.path.dirname(os.path.abspath(__file__))

pytestmark = pytest.mark.slow


def run(data: str, root: str, *flags: str, **kwargs) -> subprocess.CompletedProcess:
    command = [CLI, "run", "--data-root", data, "--pipeline-root", root, *flags]
    return subprocess.run(command, capture_output=True, text=True, timeout=900, **kwargs)


def _write(folder, frame: pd.DataFrame) -> str:
    os.makedirs(folder)
    frame.to_parquet(os.path.join(folder, "data.parquet"))  # pandas' own writer
    return str(folder)


def _features(rows: int, rng) -> pd.DataFrame:
    """An informative float feature `x` and two noise columns."""
    return pd.DataFrame(
        {
            "x": rng.standard_normal(rows),
            "z": rng.standard_normal(rows),
            "k": rng.integers(0, 9, rows),
        }
    )


def test_inf_in_a_feature_counts_as_missing_and_keeps_the_feature(tmp_path):
    """+inf in 0.5% of `x` makes its footer max inf: the model still learns from the finite
    values (`x` is the only informative feature: a model that lost it scores about 0.5)."""
    rng = np.random.default_rng(48)
    frame = _features(20_000, rng)
    frame["label"] = frame["x"] + rng.standard_normal(len(frame)) * 0.3 > 0
    frame.loc[rng.random(len(frame)) < 0.005, "x"] = np.inf
    result = run(_write(tmp_path / "inf", frame), str(tmp_path / "root"), "--epochs", "3", "--json")
    assert result.returncode == 0, result.stderr[-3000:]
    auc = json.loads(result.stdout)["training"]["eval"]["auc"]
    assert auc > 0.9, auc


@pytest.mark.parametrize("value", ["nan", "inf"])
def test_a_non_finite_label_fails_naming_it_before_training(tmp_path, value):
    """NaN (a 0/0 of pandas' nullable floats: a value, not a null) or inf in 1% of a
    regression label: one line naming the label, exit 1, no epoch run on it."""
    rng = np.random.default_rng(1)
    frame = _features(4_000, rng)
    numerator = pd.Series(2 * frame["x"] + rng.standard_normal(len(frame)) * 0.1, dtype="Float64")
    broken = rng.random(len(frame)) < 0.01
    numerator[broken] = 0.0 if value == "nan" else 1.0
    frame["label"] = numerator / pd.Series(np.where(broken, 0.0, 1.0), dtype="Float64")
    assert frame["label"].isna().sum() == 0  # pandas keeps 0/0 as NaN, not as a null
    result = run(_write(tmp_path / "data", frame), str(tmp_path / "root"))
    assert result.returncode == 1, result.stderr[-3000:]
    errors = [line for line in result.stderr.splitlines() if line.startswith("tfx-tabular: error")]
    assert len(errors) == 1 and "label 'label' holds NaN or infinite values" in errors[0], errors
    assert "Traceback" not in result.stderr
    assert "epoch 1:" not in result.stdout


def test_a_diverging_loss_is_recorded_not_a_crash(tmp_path):
    """A model whose loss is NaN (here by construction, as a too-high learning rate would make
    it): the run finishes, ML Metadata holds its eval metrics as text, the report shows them."""
    rng = np.random.default_rng(2)
    frame = _features(4_000, rng)
    frame["label"] = 2 * frame["x"] + rng.standard_normal(len(frame)) * 0.1
    root = tmp_path / "root"
    result = run(
        _write(tmp_path / "data", frame),
        str(root),
        "--model-fn",
        "diverging_module:model_fn",
        "--json",
        env={**os.environ, "PYTHONPATH": HERE},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads(result.stdout)["training"]["eval"]["rmse"] == "nan"
    with sqlite3.connect(root / "metadata.sqlite") as store:
        recorded = dict(
            store.execute(
                "SELECT name, string_value FROM ArtifactProperty WHERE name LIKE 'eval_%'"
            ).fetchall()
        )
    assert recorded["eval_rmse"] == "nan" and recorded["eval_loss"] == "nan", recorded
