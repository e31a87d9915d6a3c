"""Every entry point sees `tf.keras` as Keras 2 before anything imports TensorFlow, so a user's
TFX module written with `tf.keras` works the same locally and on the cluster."""

import os
import pathlib
import subprocess
import sys

import yaml

HERE = pathlib.Path(__file__).parent
ROOT = HERE.parents[1]
# The entry point's own doing, not this test run's (conftest sets the variable for the suite).
CLEAN_ENV = {k: v for k, v in os.environ.items() if k != "TF_USE_LEGACY_KERAS"}
USER_MODULE = "import keras2_module\nprint('keras', keras2_module.keras_version())\n"


def _python(code: str) -> str:
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**CLEAN_ENV, "PYTHONPATH": str(HERE)},
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout.strip().splitlines()[-1]


def test_without_the_setting_tf_keras_is_keras_3():
    """The failure the entry points guard against: the locked TF 2.16 defaults to Keras 3."""
    assert _python("import tensorflow as tf\nprint('keras', tf.keras.__version__)").startswith(
        "keras 3."
    )


def test_import_tfx_tabular_makes_tf_keras_keras_2():
    assert _python("import tfx_tabular\n" + USER_MODULE).startswith("keras 2 (tf_keras)")


def test_the_cli_makes_tf_keras_keras_2_for_the_code_it_runs():
    code = (
        "from tfx_tabular.cli.app import main\n"
        "try:\n    main(['--version'])\nexcept SystemExit:\n    pass\n" + USER_MODULE
    )
    assert _python(code).startswith("keras 2 (tf_keras)")


def test_compiled_tasks_and_the_image_set_it(tmp_path):
    from tfx_tabular.cli import main

    out = str(tmp_path / "p.yaml")
    assert (
        main(
            [
                "compile",
                "--target",
                "kubeflow",
                "--data-root",
                "gs://b/d",
                "--pipeline-root",
                "gs://b/r",
                "--image",
                "img:1",
                "-o",
                out,
                "-q",
            ]
        )
        == 0
    )
    executors = yaml.safe_load(open(out))["deploymentSpec"]["executors"]
    for name, executor in executors.items():
        env = {e["name"]: e["value"] for e in executor["container"].get("env", [])}
        assert env.get("TF_USE_LEGACY_KERAS") == "1", name
    assert "TF_USE_LEGACY_KERAS=1" in (ROOT / "Dockerfile").read_text()
