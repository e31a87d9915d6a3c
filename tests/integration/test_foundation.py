"""The locked environment, package layout, CLI start-up and setup script."""

import os
import pathlib
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]


def run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)


def test_tfx_components_import_in_the_locked_environment():
    result = run(
        "from tfx.components import CsvExampleGen, FileBasedExampleGen, StatisticsGen, "
        "SchemaGen, Trainer, Transform, Evaluator, ExampleValidator\n"
        "import tensorflow_data_validation, tensorflow_transform, tfx_bsl, ml_metadata, "
        "apache_beam, kfp, dill\n"
        "import apache_beam, pyarrow, tensorflow as tf, tfx\n"
        "print(tfx.__version__, apache_beam.__version__, pyarrow.__version__, tf.__version__)"
    )
    assert result.returncode == 0, result.stderr[-3000:]
    tfx_version, beam, arrow, tf_version = result.stdout.split()[-4:]
    assert tfx_version == "1.16.0" and arrow.startswith("10.") and tf_version.startswith("2.16.")
    assert beam == "2.61.0"  # later Beam drops `dill`, which tfx_bsl imports


def test_import_tfx_tabular_does_not_import_tensorflow():
    result = run(
        "import sys, tfx_tabular, tfx_tabular.components, tfx_tabular.pipelines, "
        "tfx_tabular.schemas, tfx_tabular.cli\n"
        "heavy = [m for m in ('tensorflow', 'apache_beam', 'tfx') if m in sys.modules]\n"
        "assert not heavy, heavy"
    )
    assert result.returncode == 0, result.stderr


def test_only_one_top_level_package_is_installed():
    # `components`, `pipelines` and `schemas` are taken on PyPI: they must live under tfx_tabular.
    from setuptools import find_packages

    assert 'include = ["tfx_tabular*"]' in (ROOT / "pyproject.toml").read_text()
    shipped = {p.split(".")[0] for p in find_packages(str(ROOT), include=["tfx_tabular*"])}
    assert shipped == {"tfx_tabular"}
    assert not any(
        (ROOT / name / "__init__.py").exists() for name in ("components", "pipelines", "schemas")
    )
    assert {"components", "pipelines", "schemas"} <= {
        p.name for p in (ROOT / "tfx_tabular").iterdir() if (p / "__init__.py").exists()
    }


def test_cli_help_is_fast_and_lists_only_working_commands():
    """Fast: `--help` loads none of TensorFlow, Beam or TFX (seconds each), checked by module,
    not by a clock that a loaded machine moves."""
    cli = pathlib.Path(sys.executable).parent / "tfx-tabular"
    result = subprocess.run([str(cli), "--help"], capture_output=True, text=True)
    assert result.returncode == 0
    assert "convert" in result.stdout and "--verbose" in result.stdout
    result = run(
        "import sys\n"
        "from tfx_tabular.cli import main\n"
        "try:\n"
        "    main(['--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "heavy = [m for m in ('tensorflow', 'apache_beam', 'tfx') if m in sys.modules]\n"
        "assert not heavy, heavy"
    )
    assert result.returncode == 0, result.stderr


def test_setup_is_a_quick_no_op_when_up_to_date():
    start = time.perf_counter()
    result = subprocess.run(["bash", "scripts/setup.sh"], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert time.perf_counter() - start < 10
    assert "syncing" not in result.stdout


def test_setup_without_python_310_says_what_to_install(tmp_path):
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "PYENV_ROOT": str(tmp_path / "none"),
        "UV_PROJECT_ENVIRONMENT": str(tmp_path / "venv"),
    }
    if any(os.path.exists(p) for p in ("/usr/bin/python3.10", "/usr/local/bin/python3.10")):
        import pytest

        pytest.skip("this machine has a system Python 3.10")
    result = subprocess.run(
        ["bash", "scripts/setup.sh"], cwd=ROOT, capture_output=True, text=True, env=env
    )
    assert result.returncode == 1
    assert "Python 3.10 not found" in result.stderr and "pyenv install 3.10" in result.stderr
