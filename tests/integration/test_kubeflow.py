"""Compiling for Kubeflow Pipelines and Vertex AI, and building the Vertex request offline."""

import json

import pytest
import yaml
from google.protobuf import json_format
from kfp.pipeline_spec import pipeline_spec_pb2
from tfx.utils import import_utils

from tfx_tabular import cli
from tfx_tabular.pipelines import create_pipeline, kubeflow

IMAGE = "us-docker.pkg.dev/example/repo/tfx-tabular:1.0"
# Cloud URIs nobody can reach from here: compiling must not touch them.
DATA_ROOT = "gs://tfx-tabular-no-such-bucket/data"
PIPELINE_ROOT = "gs://tfx-tabular-no-such-bucket/root"


def _pipeline(**kwargs):
    kwargs.setdefault("task", "binary")  # a remote data root is not read to infer it
    return create_pipeline(
        "tabular-test",
        PIPELINE_ROOT,
        DATA_ROOT,
        with_example_statistics=True,
        with_transform=True,
        with_evaluator=True,
        **kwargs,
    )


def test_the_evaluators_metrics_follow_the_task_and_a_remote_root_is_never_read():
    def metrics(task):
        [evaluator] = [c for c in _pipeline(task=task).components if c.id == "Evaluator"]
        config = json.loads(evaluator.exec_properties["eval_config"])  # TFX keeps it as JSON
        return [m["class_name"] for spec in config["metrics_specs"] for m in spec["metrics"]]

    assert metrics("regression") == ["ExampleCount", "MeanSquaredError", "MeanAbsoluteError"]
    assert "SparseCategoricalAccuracy" in metrics("multiclass")
    assert "AUC" in metrics("binary")
    with pytest.raises(ValueError, match="is not read when a pipeline is built: pass task="):
        _pipeline(task=None)


@pytest.fixture(scope="module")
def kubeflow_yaml(tmp_path_factory):
    path = tmp_path_factory.mktemp("kfp") / "pipeline.yaml"
    kubeflow.compile_pipeline(
        _pipeline(), "kubeflow", IMAGE, str(path), kubeflow.TrainerResources(gpus=2)
    )
    return path


@pytest.fixture(scope="module")
def vertex_json(tmp_path_factory):
    path = tmp_path_factory.mktemp("vertex") / "pipeline.json"
    kubeflow.compile_pipeline(
        _pipeline(),
        "vertex",
        IMAGE,
        str(path),
        kubeflow.TrainerResources(gpus=1, gpu_type="NVIDIA_L4", cpu_limit=8, memory_limit_gib=32),
    )
    return path


def _strict_spec(path) -> pipeline_spec_pb2.PipelineSpec:
    """What kfp.Client does with an uploaded YAML: no unknown field survives."""
    return json_format.ParseDict(yaml.safe_load(path.read_text()), pipeline_spec_pb2.PipelineSpec())


def test_kubeflow_yaml_is_a_strict_pipeline_spec_the_kfp_backend_accepts(kubeflow_yaml):
    spec = _strict_spec(kubeflow_yaml)
    assert spec.schema_version == "2.1.0"
    assert spec.default_pipeline_root == PIPELINE_ROOT
    tasks = spec.root.dag.tasks
    assert set(tasks) == {
        "ParquetExampleGen",
        "ParquetSchemaGen",
        "ExampleValidator",
        "Transform",
        "TabularTrainer",
        "Evaluator",
    }
    # The validator reads the statistics ParquetExampleGen computed while converting.
    statistics = tasks["ExampleValidator"].inputs.artifacts["statistics"].task_output_artifact
    assert (statistics.producer_task, statistics.output_artifact_key) == (
        "ParquetExampleGen",
        "statistics",
    )
    executors = spec.deployment_spec.fields["executors"].struct_value.fields
    for label, executor in executors.items():
        container = executor.struct_value.fields.get("container")
        assert container is not None, f"{label} is not a container (resolver or importer)"
        container = json_format.MessageToDict(container.struct_value)
        assert container["image"] == IMAGE
        args = container["args"]
        executor_class = args[args.index("--executor_class_path") + 1]
        assert import_utils.import_class_by_path(executor_class)  # importable in the image's env
    trainer = json_format.MessageToDict(executors["TabularTrainer_executor"].struct_value)
    assert trainer["container"]["resources"]["accelerator"] == {
        "type": "nvidia.com/gpu",
        "count": "2",
    }
    assert not tasks["ParquetExampleGen"].caching_options.enable_cache
    assert tasks["TabularTrainer"].caching_options.enable_cache


def test_compiled_parameters_carry_the_data_root_and_importable_functions(kubeflow_yaml):
    spec = _strict_spec(kubeflow_yaml)
    params = spec.root.dag.tasks["ParquetExampleGen"].inputs.parameters
    assert params["input_base"].component_input_parameter == "data_root"
    assert spec.root.input_definitions.parameters["data_root"].default_value.string_value == (
        DATA_ROOT
    )
    transform = spec.root.dag.tasks["Transform"].inputs.parameters
    assert (
        transform["preprocessing_fn"].runtime_value.constant.string_value
        == "tfx_tabular.pipelines.preprocessing.preprocessing_fn"
    )
    assert "module_file" not in transform


def test_vertex_json_is_a_pipeline_job_with_vertex_accelerators(vertex_json):
    job = json_format.ParseDict(
        json.loads(vertex_json.read_text()), pipeline_spec_pb2.PipelineJob()
    )
    assert job.runtime_config.gcs_output_directory == PIPELINE_ROOT
    spec = json_format.ParseDict(
        json_format.MessageToDict(job.pipeline_spec), pipeline_spec_pb2.PipelineSpec()
    )
    assert spec.schema_version == "2.1.0"
    executors = json_format.MessageToDict(spec.deployment_spec)["executors"]
    resources = executors["TabularTrainer_executor"]["container"]["resources"]
    assert resources == {
        "accelerator": {"type": "NVIDIA_L4", "count": "1"},
        "cpuLimit": 8.0,
        "memoryLimit": 32.0,
    }


def _root_parameters(spec) -> dict:
    return json_format.MessageToDict(spec.root.input_definitions)["parameters"]


def test_data_root_and_training_values_are_pipeline_parameters_with_compiled_defaults(tmp_path):
    pipeline = _pipeline(epochs=3, batch_size=64)
    path = tmp_path / "p.yaml"
    kubeflow.compile_pipeline(pipeline, "kubeflow", IMAGE, str(path))
    spec = _strict_spec(path)
    assert _root_parameters(spec) == {
        "data_root": {"parameterType": "STRING", "defaultValue": DATA_ROOT, "isOptional": True},
        "epochs": {"parameterType": "NUMBER_INTEGER", "defaultValue": 3.0, "isOptional": True},
        "batch_size": {"parameterType": "NUMBER_INTEGER", "defaultValue": 64.0, "isOptional": True},
        "learning_rate": {
            "parameterType": "NUMBER_DOUBLE",
            "defaultValue": 0.001,
            "isOptional": True,
        },
        # Unset: empty text, which the executor reads as no service.
        "data_service": {"parameterType": "STRING", "defaultValue": "", "isOptional": True},
    }
    trainer = spec.root.dag.tasks["TabularTrainer"].inputs.parameters
    for name in ("epochs", "batch_size", "learning_rate", "data_service"):
        assert trainer[name].component_input_parameter == name
    # The executor gets typed values: TFX's entry point converts by the component's input types.
    types = spec.components["TabularTrainer"].input_definitions.parameters
    assert types["epochs"].parameter_type == pipeline_spec_pb2.ParameterType.NUMBER_INTEGER
    # Compiling leaves the pipeline as it was: it compiles again, and runs locally, unchanged.
    [example_gen] = [c for c in pipeline.components if c.id == "ParquetExampleGen"]
    assert example_gen.exec_properties["input_base"] == DATA_ROOT


def test_components_built_with_runtime_parameters_compile_with_their_defaults(tmp_path):
    from tfx import v1 as tfx

    from tfx_tabular.components import ParquetExampleGen, ParquetSchemaGen, TabularTrainer

    def parameter(name, ptype, default=None):
        return tfx.dsl.experimental.RuntimeParameter(name=name, ptype=ptype, default=default)

    example_gen = ParquetExampleGen(input_base=parameter("source", str, DATA_ROOT))
    schema_gen = ParquetSchemaGen(
        examples=example_gen.outputs["examples"], sample_rows=parameter("sample_rows", int, 500)
    )
    trainer = TabularTrainer(
        examples=example_gen.outputs["examples"],
        schema=schema_gen.outputs["schema"],
        epochs=parameter("passes", int, 4),
    )
    with pytest.raises(TypeError, match="parameter 'epochs'"):  # the spec's own type check
        TabularTrainer(
            examples=example_gen.outputs["examples"],
            schema=schema_gen.outputs["schema"],
            epochs=parameter("passes", str, "4"),
        )
    pipeline = tfx.dsl.Pipeline(
        pipeline_name="own",
        pipeline_root=PIPELINE_ROOT,
        components=[example_gen, schema_gen, trainer],
    )
    path = tmp_path / "p.yaml"
    kubeflow.compile_pipeline(pipeline, "kubeflow", IMAGE, str(path))
    parameters = _root_parameters(_strict_spec(path))
    # The author's parameters keep their names; ours fill in only what they left constant.
    assert {n: p.get("defaultValue") for n, p in parameters.items()} == {
        "source": DATA_ROOT,
        "sample_rows": 500.0,
        "passes": 4.0,
        "batch_size": 1024.0,
        "learning_rate": 0.001,
        "data_service": "",
    }


def test_train_steps_fix_the_length_so_epochs_is_no_parameter(tmp_path):
    path = tmp_path / "p.json"
    kubeflow.compile_pipeline(_pipeline(train_steps=10), "vertex", IMAGE, str(path))
    job = json.loads(path.read_text())
    assert sorted(job["pipelineSpec"]["root"]["inputDefinitions"]["parameters"]) == [
        "batch_size",
        "data_root",
        "data_service",
        "learning_rate",
    ]


@pytest.mark.parametrize(
    "resources, message",
    [
        (kubeflow.TrainerResources(gpus=1, gpu_type="A100"), "accelerator name"),
        (kubeflow.TrainerResources(gpu_type="NVIDIA_L4"), "--gpu-type without --gpus"),
        (kubeflow.TrainerResources(gpus=-1), "≥ 0"),
    ],
)
def test_bad_trainer_resources_fail_clearly(resources, message, tmp_path):
    with pytest.raises(kubeflow.CompileError, match=message):
        kubeflow.compile_pipeline(_pipeline(), "vertex", IMAGE, str(tmp_path / "p.json"), resources)


def test_module_files_and_resolvers_are_refused(tmp_path):
    from tfx import v1 as tfx

    from tfx_tabular.components import TabularTrainer

    pipeline = _pipeline()
    trainer = next(c for c in pipeline.components if isinstance(c, TabularTrainer))
    trainer.exec_properties["module_file"] = "/home/me/model.py"
    with pytest.raises(kubeflow.CompileError, match="module_file"):
        kubeflow.compile_pipeline(pipeline, "kubeflow", IMAGE, str(tmp_path / "p.yaml"))

    pipeline = _pipeline()
    latest = tfx.dsl.Resolver(
        strategy_class=tfx.dsl.experimental.LatestArtifactStrategy,
        model=tfx.dsl.Channel(type=tfx.types.standard_artifacts.Model),
    ).with_id("latest_model")
    pipeline.components.append(latest)
    with pytest.raises(kubeflow.CompileError, match="latest_model is a resolver"):
        kubeflow.compile_pipeline(pipeline, "kubeflow", IMAGE, str(tmp_path / "p.yaml"))


def test_cli_compile_writes_the_yaml(tmp_path, capsys):
    out = tmp_path / "pipeline.yaml"
    model_fn = "tfx_tabular.training.model:build_reference_model"
    assert cli.main(_compile_args(out, "--gpus", "1", "--model-fn", model_fn)) == 0
    printed = capsys.readouterr().out
    assert "schemaVersion 2.1.0" in printed
    assert (
        "pipeline parameters (set them with --param at run time): batch_size=1024, "
        f'data_root={DATA_ROOT}, data_service="", epochs=1, learning_rate=0.001' in printed
    )
    trainer = _strict_spec(out).root.dag.tasks["TabularTrainer"].inputs.parameters
    assert (
        trainer["model_fn"].runtime_value.constant.string_value
        == "tfx_tabular.training.model:build_reference_model"
    )


def test_cli_compile_with_a_vertex_training_job(tmp_path, capsys):
    out = tmp_path / "pipeline.json"
    job = ["--training-job-project", "p", "--training-job-region", "europe-west4"]
    job += ["--training-job-machine-type", "g2-standard-8", "--training-job-replicas", "4"]
    gpus = ["--gpus", "1", "--gpu-type", "NVIDIA_L4"]
    assert cli.main(_compile_args(out, *job, *gpus, target="vertex")) == 0
    spec = json.loads(out.read_text())["pipelineSpec"]
    container = spec["deploymentSpec"]["executors"]["TabularTrainer_executor"]["container"]
    assert "resources" not in container  # the job's machines train, not the launching task
    executor_class = container["args"][container["args"].index("--executor_class_path") + 1]
    assert executor_class == "tfx_tabular.components.tabular_trainer.vertex.Executor"
    assert import_utils.import_class_by_path(executor_class)
    parameters = spec["root"]["dag"]["tasks"]["TabularTrainer"]["inputs"]["parameters"]
    config = json.loads(parameters["custom_config"]["runtimeValue"]["constant"])
    assert config["ai_platform_vertex_region"] == "europe-west4"
    pools = config["ai_platform_training_args"]["job_spec"]["worker_pool_specs"]
    assert [p["replica_count"] for p in pools] == [1, 3]
    assert pools[1]["machine_spec"] == {
        "machine_type": "g2-standard-8",
        "accelerator_type": "NVIDIA_L4",
        "accelerator_count": 1,
    }
    assert pools[1]["container_spec"] == {"image_uri": IMAGE}


def test_cli_compile_with_vertex_input_workers(tmp_path):
    """`compile --training-job-input-workers` as a user types it: the compiled job has the input
    workers as pool 2 (pool 1 skipped, Vertex's empty value), every pool carrying the port of
    the chief's dispatcher."""
    out = tmp_path / "pipeline.json"
    typed = (
        f"compile --target vertex --data-root {DATA_ROOT} --pipeline-root {PIPELINE_ROOT} "
        f"--image {IMAGE} -o {out} --training-job-project p --training-job-region us-central1 "
        "--gpus 1 --gpu-type NVIDIA_L4 --training-job-machine-type g2-standard-8 "
        "--training-job-input-workers 3 --training-job-input-worker-machine-type n2-highcpu-16"
    )
    assert cli.main(typed.split()) == 0
    spec = json.loads(out.read_text())["pipelineSpec"]
    parameters = spec["root"]["dag"]["tasks"]["TabularTrainer"]["inputs"]["parameters"]
    config = json.loads(parameters["custom_config"]["runtimeValue"]["constant"])
    pools = config["ai_platform_training_args"]["job_spec"]["worker_pool_specs"]
    assert [p.get("replica_count") for p in pools] == [1, None, 3]
    assert pools[1] == {}
    assert pools[0]["machine_spec"] == {
        "machine_type": "g2-standard-8",
        "accelerator_type": "NVIDIA_L4",
        "accelerator_count": 1,
    }
    assert pools[2]["machine_spec"] == {"machine_type": "n2-highcpu-16"}
    for pool in (pools[0], pools[2]):
        assert pool["container_spec"] == {
            "image_uri": IMAGE,
            "env": [{"name": "TFX_TABULAR_DISPATCHER_PORT", "value": "5050"}],
        }
    assert spec["root"]["inputDefinitions"]["parameters"]["data_service"]["defaultValue"] == ""


@pytest.mark.parametrize(
    "flags, message",
    [
        (
            [
                "--training-job-project",
                "p",
                "--training-job-region",
                "r",
                "--gpus",
                "1",
                "--gpu-type",
                "T4",
            ],
            "Vertex AI training job: Vertex needs an accelerator name, not 'T4'",
        ),
        (
            [
                "--training-job-project",
                "p",
                "--training-job-region",
                "r",
                "--training-job-replicas",
                "3",
            ],
            "batch_size 1024 is not a multiple of the 3 devices",
        ),
        (
            ["--training-job-replicas", "2"],
            "--training-job-replicas without --training-job-project",
        ),
        (
            ["--training-job-input-workers", "2"],
            "--training-job-input-workers without --training-job-project",
        ),
        (
            [
                "--training-job-project",
                "p",
                "--training-job-region",
                "r",
                "--training-job-input-worker-machine-type",
                "n2-highcpu-16",
            ],
            "--training-job-input-worker-machine-type without --training-job-input-workers",
        ),
        (
            [
                "--training-job-project",
                "p",
                "--training-job-region",
                "r",
                "--training-job-input-workers",
                "2",
                "--data-service",
                "host:5050",
            ],
            "--data-service names a dispatcher of yours, and --training-job-input-workers",
        ),
        (
            ["--training-job-project", "p", "--training-job-region", "r", "--cpu-limit", "4"],
            "--cpu-limit / --memory-limit size the Trainer task",
        ),
        (
            [
                "--training-job-project",
                "p",
                "--training-job-region",
                "r",
                "--pipeline-root",
                "/local/root",
            ],
            "must be a gs:// URI, not /local/root",
        ),
    ],
)
def test_bad_vertex_training_jobs_fail_naming_the_problem(flags, message, tmp_path, capsys):
    root = [] if "--pipeline-root" in flags else ["--pipeline-root", PIPELINE_ROOT]
    assert (
        cli.main(
            [
                "compile",
                "--target",
                "vertex",
                "--data-root",
                DATA_ROOT,
                "--image",
                IMAGE,
                "-o",
                str(tmp_path / "p.json"),
            ]
            + root
            + flags
        )
        == 2
    )
    assert message in capsys.readouterr().err


def _compile_args(out, *extra, target: str = "kubeflow") -> list:
    return [
        "compile",
        "--target",
        target,
        "--data-root",
        DATA_ROOT,
        "--pipeline-root",
        PIPELINE_ROOT,
        "--image",
        IMAGE,
        "-o",
        str(out),
        *extra,
    ]


def test_download_volume_is_a_platform_spec_at_the_launchers_download_folder(tmp_path):
    from tfx_tabular.pipelines import compiled_runner

    out = tmp_path / "pipeline.yaml"
    args = ["--download-volume-size", "20Gi", "--download-volume-storage-class", "premium-rwo"]
    assert cli.main(_compile_args(out, *args)) == 0

    spec, platform = yaml.safe_load_all(out.read_text())
    json_format.ParseDict(spec, pipeline_spec_pb2.PipelineSpec())
    json_format.ParseDict(platform, pipeline_spec_pb2.PlatformSpec())
    executors = platform["platforms"]["kubernetes"]["deploymentSpec"]["executors"]
    # Every task that takes input artifacts (ExampleGen takes none).
    assert set(executors) == {
        component["executorLabel"]
        for name, component in spec["components"].items()
        if name != "ParquetExampleGen"
    }
    claim = {
        "volumeName": "kfp-launcher-downloads",
        "mountPath": "/gcs",  # launcher_v2.go LocalPathForURI for gs://
        "accessModes": ["ReadWriteOnce"],
        "size": "20Gi",
        "defaultStorageClass": False,
        "storageClassName": "premium-rwo",
    }
    assert all(config == {"genericEphemeralVolume": [claim]} for config in executors.values())
    assert compiled_runner.load_compiled(str(out))[0].root.dag.tasks.keys() == set(
        spec["root"]["dag"]["tasks"]
    )


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--download-volume-size", "lots"], "'lots' is not a Kubernetes quantity"),
        (["--download-volume-storage-class", "fast"], "without --download-volume-size"),
        (["--download-volume-size", "1Gi", "--target", "vertex"], "is for --target kubeflow"),
        (
            ["--download-volume-size", "1Gi", "--pipeline-root", "/local/root"],
            "downloads inputs only for",
        ),
    ],
)
def test_download_volume_errors_name_the_option(tmp_path, capsys, extra, message):
    out = tmp_path / ("pipeline.json" if "vertex" in extra else "pipeline.yaml")
    assert cli.main(_compile_args(out, *extra)) == 2
    assert message in capsys.readouterr().err
