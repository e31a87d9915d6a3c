"""Security checks (issue 7): compiled pipelines carry no credentials or local environment; no
pickle or eval on data paths; model code only from configured places. (The image's non-root user
is checked in test_dockerfile.py.)"""

import ast
import getpass
import json
import os
import pathlib
import socket
import sys

import pytest

import tfx_tabular
from tfx_tabular.pipelines import create_pipeline, kubeflow

PACKAGE = pathlib.Path(tfx_tabular.__file__).parent
SECRET = "s3cr3t-credential-marker"


@pytest.fixture(scope="module", params=["kubeflow", "vertex"])
def compiled_text(request, tmp_path_factory):
    """A pipeline compiled in an environment holding credentials, as a developer's shell does."""
    folder = tmp_path_factory.mktemp("secure")
    key_file = folder / "service-account.json"
    key_file.write_text(json.dumps({"type": "service_account", "private_key": SECRET}))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(key_file))
        patch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
        patch.setenv("KFP_TOKEN", SECRET)
        patch.chdir(folder)
        pipeline = create_pipeline(
            "secure",
            "gs://tfx-tabular-no-such-bucket/pipelines",
            "gs://tfx-tabular-no-such-bucket/data",
            with_transform=True,
            beam_pipeline_args=["--direct_num_workers=2"],
        )
        output = folder / ("pipeline.yaml" if request.param == "kubeflow" else "pipeline.json")
        kubeflow.compile_pipeline(
            pipeline,
            request.param,
            "registry.example/tfx-tabular:1",
            str(output),
            kubeflow.TrainerResources(
                gpus=1, gpu_type="NVIDIA_L4" if request.param == "vertex" else None
            ),
        )
    return output.read_text(), folder


@pytest.mark.slow  # compiles TFX pipelines for Kubeflow and Vertex
def test_compiled_pipelines_hold_no_credentials_or_local_paths(compiled_text):
    text, folder = compiled_text
    local = {
        "the credential": SECRET,
        "the key file": "service-account.json",
        "the working folder": str(folder),
        "the home folder": os.path.expanduser("~"),
        "the Python environment": sys.prefix,
        "the package's source": str(PACKAGE),
        "the user name": f"/{getpass.getuser()}/",
        "the host name": socket.gethostname(),
    }
    # Names too short to be told from ordinary words (a host called "vm") are not looked for.
    found = [what for what, value in local.items() if len(value) >= 6 and value in text]
    assert not found, f"the compiled pipeline holds {found}"


@pytest.mark.slow  # compiles TFX pipelines for Kubeflow and Vertex
def test_compiled_containers_set_only_our_fixed_environment(compiled_text):
    """No value of this machine's environment reaches a task: only TASK_ENVIRONMENT, constants
    (TF_USE_LEGACY_KERAS=1) that every task needs."""
    from tfx_tabular.pipelines.kubeflow import TASK_ENVIRONMENT

    document = (
        json.loads(compiled_text[0])
        if compiled_text[0].lstrip().startswith("{")
        else __import__("yaml").safe_load(compiled_text[0])
    )
    spec = document.get("pipelineSpec", document)
    executors = spec["deploymentSpec"]["executors"]
    assert executors
    for label, executor in executors.items():
        env = {e["name"]: e["value"] for e in executor["container"].get("env", [])}
        assert env == TASK_ENVIRONMENT, label


# Calls that run code or rebuild objects from bytes: none may touch data our code reads.
UNSAFE_CALLS = {
    "eval",
    "exec",
    "compile",
    "pickle.load",
    "pickle.loads",
    "dill.load",
    "dill.loads",
    "cloudpickle.loads",
    "marshal.loads",
    "yaml.load",
    "yaml.unsafe_load",
    "pandas.read_pickle",
    "pd.read_pickle",
    "torch.load",
    "shelve.open",
}
# Beam ships DoFns between workers as pickles by design; source.files restores the DoFn's file
# descriptions (built from footers by this process) the same way, faster. Pipeline state, never
# the contents of a data file.
PIPELINE_STATE_PICKLES = {("source/files.py", "pickle.loads")}
# The only places that import code by a name not written in our source: the lazy-import tables
# (constant names) and the Trainer's model_fn / run_fn / module_file, which the user configures.
CODE_LOADERS = {"importlib.import_module", "import_utils.import_func_from_source"}
ALLOWED_LOADERS = {
    "components/__init__.py",
    "schemas/__init__.py",
    "components/tabular_trainer/user_code.py",
}


def _calls(path: pathlib.Path):
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Call):
            yield node, ast.unparse(node.func)


def _sources():
    return [p for p in sorted(PACKAGE.rglob("*.py")) if not p.name.endswith("_test.py")]


def test_no_pickle_or_eval_in_the_package():
    found = [
        (str(p.relative_to(PACKAGE)), name)
        for p in _sources()
        for node, name in _calls(p)
        if name in UNSAFE_CALLS
        or (name.endswith("np.load") or name == "numpy.load")
        and any(k.arg == "allow_pickle" for k in node.keywords)
    ]
    assert set(found) <= PIPELINE_STATE_PICKLES, found


def test_model_code_is_loaded_only_from_configured_places():
    found = sorted(
        {
            str(p.relative_to(PACKAGE))
            for p in _sources()
            for _, name in _calls(p)
            if name in CODE_LOADERS or name == "__import__"
        }
    )
    assert found and set(found) <= ALLOWED_LOADERS, found


def test_the_trainer_loads_only_the_configured_model_fn_or_run_fn():
    from tfx_tabular.components.tabular_trainer.user_code import load_model_fn, load_run_fn

    assert load_model_fn(None, None) is None  # the reference model: no user code at all
    assert load_run_fn(None, None) is None
    assert load_model_fn("os.path:join", None) is os.path.join
    assert load_run_fn("os.path:join", None) is os.path.join
    for load in (load_model_fn, load_run_fn):
        with pytest.raises(ValueError, match="package.module:function"):
            load("os.system", None)
