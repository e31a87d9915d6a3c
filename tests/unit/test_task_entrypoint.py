"""The compiled tasks' entry point (`tfx_tabular.pipelines.task_entrypoint`) on ExecutorInputs
shaped as the open-source KFP v2 driver builds them (kubeflow/pipelines backend/src/v2:
metadata/converter.go `toRuntimeArtifact`, metadata/client.go `GetOutputArtifactsByExecutionId`):
`name` the ML Metadata id, numbers as floats, lists and structs wrapped by the round trip through
ML Metadata, the launcher's `display_name` / `store_session_info`, and the type empty
(task outputs), absent (DAG inputs) or a KFP `system.*` title. Parsed by TFX's own entry-point
code into our executors' artifacts."""

import json
import re

import pytest
import yaml
from google.protobuf import json_format
from kfp.pipeline_spec import pipeline_spec_pb2
from tfx.orchestration.kubeflow.v2.container import kubeflow_v2_entrypoint_utils as tfx_entry
from tfx.types import standard_artifacts

from tfx_tabular.components.tabular_trainer.executor import row_counts
from tfx_tabular.pipelines import create_pipeline, kubeflow, task_entrypoint

# An ExampleGen output as ML Metadata hands it back to the driver (converter.go): every metadata
# field a custom property, numbers as doubles, structs wrapped in {"struct": ...}.
DRIVER_METADATA = {
    "span": 0.0,
    "version": 0.0,
    "custom:span": 0.0,
    "split_names": '["train", "eval"]',
    "row_counts": {"struct": {"train": 1600.0, "eval": 400.0}},
    "input_fingerprint": "sha256:abc",
    "tfx_version": "1.16.0",
    "display_name": "examples",
    "store_session_info": '{"Provider":"gs","Params":{"fromEnv":"true"}}',
}
DRIVER_TYPES = {
    "task output": {"type": {"instanceSchema": ""}},
    "DAG input": {},
    "KFP system type": {"type": {"schemaTitle": "system.Dataset"}},
}
# How TFX 1.16's own entry point fails on each (kubeflow_v2_entrypoint_utils._retrieve_class_path).
TFX_FAILURES = {
    "task output": (AttributeError, "'NoneType' object has no attribute 'get'"),
    "DAG input": (UnboundLocalError, "local variable 'title' referenced before assignment"),
    "KFP system type": (ImportError, "system"),
}


@pytest.fixture(scope="module")
def trainer_command(tmp_path_factory):
    """The compiled TabularTrainer task's command and arguments."""
    pipeline = create_pipeline(
        "entry", "gs://no-such-bucket/root", "gs://no-such-bucket/data", task="binary"
    )
    spec = kubeflow.compile_pipeline(
        pipeline, "kubeflow", "image:1", str(tmp_path_factory.mktemp("entry") / "p.yaml")
    )
    container = spec["deploymentSpec"]["executors"]["TabularTrainer_executor"]["container"]
    return container["command"], container["args"]


def _flag(args, flag: str) -> str:
    return args[args.index(flag) + 1]


def _executor_input(examples: dict) -> str:
    """A Trainer's ExecutorInput JSON as the driver writes it, with `examples` as given."""
    schema = {"name": "5678", "uri": "gs://b/root/SchemaGen/schema"}
    schema.update({k: v for k, v in examples.items() if k == "type"})
    document = {
        "inputs": {
            "artifacts": {
                "examples": {"artifacts": [examples]},
                "schema": {"artifacts": [dict(schema, metadata={"display_name": "schema"})]},
            },
            "parameterValues": {"label": "label", "task": "binary", "train_args": "{}"},
        },
        "outputs": {"outputFile": "/gcs/b/root/Trainer/output_metadata.json"},
    }
    return json.dumps(document)


def _driver_examples(shape: str) -> dict:
    return {
        "name": "1234",
        "uri": "gs://b/root/ExampleGen/examples",
        "metadata": DRIVER_METADATA,
        **DRIVER_TYPES[shape],
    }


def _parsed_inputs(invocation_json: str) -> dict:
    executor_input = json_format.Parse(invocation_json, pipeline_spec_pb2.ExecutorInput())
    return tfx_entry.parse_raw_artifact_dict(executor_input.inputs.artifacts, {})


def test_the_compiled_command_is_our_entry_point_with_the_inputs_spec(trainer_command):
    command, args = trainer_command
    assert command == ["python", "-m", "tfx_tabular.pipelines.task_entrypoint"]
    inputs_spec = json.loads(_flag(args, task_entrypoint.INPUTS_SPEC_FLAG))
    schema = inputs_spec["artifacts"]["examples"]["artifactType"]["instanceSchema"]
    assert yaml.safe_load(schema)["title"] == "tfx.Examples"


@pytest.mark.parametrize("shape", DRIVER_TYPES)
def test_tfx_alone_cannot_parse_the_drivers_input_artifacts(shape):
    error, message = TFX_FAILURES[shape]
    with pytest.raises(error, match=re.escape(message)):
        _parsed_inputs(_executor_input(_driver_examples(shape)))


@pytest.mark.parametrize("shape", DRIVER_TYPES)
def test_the_drivers_input_artifacts_become_our_executors_artifacts(trainer_command, shape):
    _, args = trainer_command
    typed = task_entrypoint.typed_invocation(
        _executor_input(_driver_examples(shape)), _flag(args, task_entrypoint.INPUTS_SPEC_FLAG)
    )
    inputs = _parsed_inputs(typed)

    [examples], [schema] = inputs["examples"], inputs["schema"]
    assert isinstance(examples, standard_artifacts.Examples)
    assert isinstance(schema, standard_artifacts.Schema)
    assert examples.uri == "gs://b/root/ExampleGen/examples"
    assert (examples.span, examples.version) == (0, 0)
    assert examples.split_names == '["train", "eval"]'
    assert row_counts(examples) == {"train": 1600, "eval": 400}  # what the Trainer reads
    assert examples.get_string_custom_property("input_fingerprint") == "sha256:abc"
    assert examples.get_json_value_custom_property("display_name") == "examples"
    # The exec properties come from the same inputs spec (the driver fills no `parameters`).
    executor_input = json_format.Parse(typed, pipeline_spec_pb2.ExecutorInput())
    inputs_spec = json_format.Parse(
        _flag(args, task_entrypoint.INPUTS_SPEC_FLAG), pipeline_spec_pb2.ComponentInputsSpec()
    )
    properties = tfx_entry.parse_execution_properties(
        executor_input.inputs.parameter_values, executor_input.inputs.parameters, inputs_spec
    )
    assert properties["label"] == "label" and properties["task"] == "binary"


def test_typed_artifacts_pass_unchanged(trainer_command):
    _, args = trainer_command
    vertex = dict(
        _driver_examples("task output"),
        type={"schemaTitle": "tfx.Examples"},
        metadata={"row_counts": {"train": 2, "eval": 1}, "span": 3.0},
    )
    invocation = _executor_input(vertex)
    typed = json.loads(
        task_entrypoint.typed_invocation(invocation, _flag(args, task_entrypoint.INPUTS_SPEC_FLAG))
    )
    examples = typed["inputs"]["artifacts"]["examples"]["artifacts"][0]
    assert examples == vertex
    assert row_counts(_parsed_inputs(json.dumps(typed))["examples"][0]) == {"train": 2, "eval": 1}


def test_an_untyped_input_without_an_inputs_spec_fails_naming_it():
    with pytest.raises(
        task_entrypoint.TaskInputError,
        match="input artifact '(examples|schema)' .* has no TFX type",
    ):
        task_entrypoint.typed_invocation(_executor_input(_driver_examples("DAG input")), None)


def test_directory_markers_are_removed_and_real_objects_kept(gcs):
    from google.cloud import storage

    client = storage.Client.create_anonymous_client()
    names = {
        "root/Trainer/model/": b"",  # the marker at the URI itself
        "root/Trainer/model/Format-Serving/": b"",
        "root/Trainer/model/Format-Serving/saved_model.pb": b"pb",
        "root/Trainer/model/Format-Serving/assets/empty.txt": b"",  # an empty file: kept
        "root/Trainer/model_run/": b"",
        "root/Trainer/model2/": b"",  # another artifact whose name shares the prefix: kept
        "root/Trainer/": b"",  # above the outputs: TF's makedirs made it too
        "root/": b"",
        "other/": b"",  # not above any output: kept
    }
    for name, data in names.items():
        gcs.blob(name).upload_from_string(data)

    uris = ["gs://bucket/root/Trainer/model", "gs://bucket/root/Trainer/model_run/", "/local"]
    assert task_entrypoint.remove_directory_markers(uris, client) == 5

    left = {blob.name for blob in gcs.list_blobs()}
    assert left == {
        "root/Trainer/model/Format-Serving/saved_model.pb",
        "root/Trainer/model/Format-Serving/assets/empty.txt",
        "root/Trainer/model2/",
        "other/",
    }
