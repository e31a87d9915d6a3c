"""`compile --beam-arg` for Dataflow: the set of docs/pipelines.md reaches every Beam-running task
of the compiled file as TFX's own container entry point parses it, and every task's command
replaces the image's ENTRYPOINT (Beam's boot, for Dataflow's workers). Nothing runs on Dataflow
here (no cloud): the contract is TFX's `kubeflow_v2_run_executor` argument parser, read from the
venv, which our task entry point uses."""

import json

import pytest
import yaml
from tfx.dsl.components.base.base_beam_executor import BaseBeamExecutor
from tfx.orchestration.kubeflow.v2.container import kubeflow_v2_run_executor
from tfx.utils import import_utils

from tfx_tabular import cli
from tfx_tabular.pipelines import task_entrypoint

IMAGE = "europe-docker.pkg.dev/example/repo/tfx-tabular:1.0"
DATAFLOW_ARGS = [
    "--runner=DataflowRunner",
    "--project=example-project",
    "--region=europe-west1",
    "--temp_location=gs://tfx-tabular-no-such-bucket/tmp",
    f"--sdk_container_image={IMAGE}",
]
# Our two components and every stock Beam component create_pipeline can add (ExampleValidator
# and the trainer run no Beam).
BEAM_TASKS = {
    "ParquetExampleGen",
    "ParquetSchemaGen",
    "StatisticsGen",
    "Transform",
    "Evaluator",
}


def _executors(path, target):
    spec = (
        yaml.safe_load(path.read_text()) if target == "kubeflow" else json.loads(path.read_text())
    )
    if target == "vertex":
        spec = spec["pipelineSpec"]
    return spec["deploymentSpec"]["executors"]


@pytest.mark.parametrize("target,suffix", [("kubeflow", "yaml"), ("vertex", "json")])
def test_dataflow_beam_args_reach_every_beam_task(target, suffix, tmp_path):
    out = tmp_path / f"pipeline.{suffix}"
    argv = ["compile", "--target", target, "--image", IMAGE, "-o", str(out), "--task", "binary"]
    argv += ["--data-root", "gs://tfx-tabular-no-such-bucket/data"]
    argv += ["--pipeline-root", "gs://tfx-tabular-no-such-bucket/root"]
    argv += ["--with-example-statistics", "stock", "--with-transform", "--with-evaluator"]
    argv += [f"--beam-arg={a}" for a in DATAFLOW_ARGS]
    assert cli.main(argv) == 0

    beam_tasks = set()
    for name, executor in _executors(out, target).items():
        container = executor["container"]
        assert container["image"] == IMAGE
        # KFP's command replaces the image's ENTRYPOINT (Beam's boot): the task runs our entry
        # point, which parses its arguments with TFX's own parser.
        assert container["command"][:3] == ["python", "-m", task_entrypoint.__name__]
        flags, beam_args = kubeflow_v2_run_executor._parse_flags(container["args"])
        if issubclass(
            import_utils.import_class_by_path(flags.executor_class_path), BaseBeamExecutor
        ):
            beam_tasks.add(name.removesuffix("_executor"))
            assert beam_args == DATAFLOW_ARGS, name
    assert beam_tasks == BEAM_TASKS
