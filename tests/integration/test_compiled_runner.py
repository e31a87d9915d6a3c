"""`run-compiled`: a compiled pipeline file run task by task under the KFP v2 launcher contract.

The fast tests run hand-written PipelineSpecs whose tasks are a small stand-in executor speaking
the same contract as TFX's (ExecutorInput JSON in, ExecutorOutput file out, artifacts reported
without their type), under both launchers; the slow tests compile the real pipeline and run TFX's
executors: under the Vertex-shaped launcher on a local root, and under the open-source KFP one
with everything on gs:// (the GCS emulator)."""

import glob
import json
import os
import re

import pytest
import yaml
from conftest import FEW_COLUMNS

from tfx_tabular import cli
from tfx_tabular.demo import criteo
from tfx_tabular.pipelines import compiled_runner, create_pipeline, kubeflow
from tfx_tabular.pipelines.compiled_runner import RunError, run_compiled

# Reports each output artifact (name and uri as given, no type: like TFX) with metadata recording
# what the task received: its parameters, its input artifacts, and any ExecutorOutput that was
# already at outputFile (TFX's executor reads one as its driver's output).
STAND_IN = """
import json, os, sys
executor_input = json.loads(sys.argv[1])
inputs, outputs = executor_input.get("inputs", {}), executor_input["outputs"]
driver = json.load(open(outputs["outputFile"])) if os.path.exists(outputs["outputFile"]) else None
received = {"parameters": inputs.get("parameterValues", {}), "driver": driver,
            "inputs": {k: v["artifacts"][0] for k, v in inputs.get("artifacts", {}).items()}}
reported = {k: {"artifacts": [{"name": v["artifacts"][0]["name"], "uri": v["artifacts"][0]["uri"],
                               "metadata": received}]} for k, v in outputs["artifacts"].items()}
with open(outputs["outputFile"], "w") as f:
    json.dump({"artifacts": reported}, f)
"""
EXAMPLES_TYPE = {"instanceSchema": "title: tfx.Examples\ntype: object\n"}


def _container(*command: str, **fields) -> dict:
    return {"container": {"image": "stand-in:1", "command": list(command), **fields}}


STAND_IN_EXECUTOR = _container("python", "-c", STAND_IN, "{{$}}")


def _spec(tasks: dict, executors: dict = None, root_inputs: dict = None) -> dict:
    """A PipelineSpec: one component per task with one `out` Examples artifact, run by the
    stand-in unless `executors` gives the task another executor."""
    executors = executors or {}
    return {
        "pipelineInfo": {"name": "stand-in"},
        "schemaVersion": "2.1.0",
        "sdkVersion": "test",
        "components": {
            name: {
                "executorLabel": f"{name}_executor",
                "outputDefinitions": {"artifacts": {"out": {"artifactType": EXAMPLES_TYPE}}},
            }
            for name in tasks
        },
        "deploymentSpec": {
            "executors": {
                f"{name}_executor": executors.get(name, STAND_IN_EXECUTOR) for name in tasks
            }
        },
        "root": {
            "inputDefinitions": {"parameters": root_inputs or {}},
            "dag": {
                "tasks": {
                    name: dict(task, componentRef={"name": name}, taskInfo={"name": name})
                    for name, task in tasks.items()
                }
            },
        },
    }


def _constant(value) -> dict:
    return {"runtimeValue": {"constant": value}}


def _from(task: str) -> dict:
    return {"taskOutputArtifact": {"producerTask": task, "outputArtifactKey": "out"}}


# `second` runs after `first` although it sorts before it: the order comes from the DAG.
TWO_TASKS = {
    "second": {"dependentTasks": ["first"], "inputs": {"artifacts": {"examples": _from("first")}}},
    "first": {"inputs": {"parameters": {"rows": _constant(3.0), "name": _constant("x")}}},
}


def _write_yaml(tmp_path, spec: dict) -> str:
    path = tmp_path / "pipeline.yaml"
    path.write_text(yaml.safe_dump(spec))
    return str(path)


def _received(pipeline_root, task: str) -> dict:
    with open(os.path.join(pipeline_root, task, "executor_output.json")) as handle:
        return json.load(handle)["artifacts"]["out"]["artifacts"][0]["metadata"]


def test_artifacts_flow_downstream_with_their_type_and_metadata(tmp_path, capsys):
    root = str(tmp_path / "root")
    summary = run_compiled(_write_yaml(tmp_path, _spec(TWO_TASKS)), root)

    assert summary == {
        "first": {"out": f"{root}/first/out/1"},
        "second": {"out": f"{root}/second/out/2"},
    }
    assert _received(root, "first")["parameters"] == {"rows": 3.0, "name": "x"}
    examples = _received(root, "second")["inputs"]["examples"]
    assert examples["uri"] == summary["first"]["out"] and examples["name"] == "first/out/1"
    assert examples["type"] == {"schemaTitle": "tfx.Examples"}  # from outputDefinitions
    assert examples["metadata"]["parameters"] == {"rows": 3.0, "name": "x"}  # first's report
    out = capsys.readouterr().out
    assert "[1/2] first" in out and "[2/2] second" in out and "done in" in out


def test_a_second_run_gets_new_folders_and_no_stale_executor_output(tmp_path):
    path, root = _write_yaml(tmp_path, _spec(TWO_TASKS)), str(tmp_path / "root")
    run_compiled(path, root)
    summary = run_compiled(path, root)
    assert summary == {
        "first": {"out": f"{root}/first/out/3"},
        "second": {"out": f"{root}/second/out/4"},
    }
    assert _received(root, "first")["driver"] is None


GREETING_SPEC = _spec(
    {
        "only": {
            "inputs": {
                "parameters": {
                    "greeting": {"componentInputParameter": "greeting"},
                    "size": {"componentInputParameter": "size"},
                    "rate": {"componentInputParameter": "rate"},
                }
            }
        }
    },
    root_inputs={
        "greeting": {"parameterType": "STRING", "defaultValue": "hello"},
        "size": {"parameterType": "NUMBER_INTEGER", "defaultValue": 2},
        "rate": {"parameterType": "NUMBER_DOUBLE", "defaultValue": 0.5},
    },
)


def test_vertex_pipeline_job_json_runs_with_its_runtime_parameters(tmp_path):
    spec = GREETING_SPEC
    job = {
        "displayName": "stand-in",
        "pipelineSpec": spec,
        "runtimeConfig": {
            "gcsOutputDirectory": "gs://nowhere/root",
            "parameterValues": {"greeting": "hi"},
        },
    }
    path = tmp_path / "pipeline.json"
    path.write_text(json.dumps(job))
    root = str(tmp_path / "root")
    assert run_compiled(str(path), root) == {"only": {"out": f"{root}/only/out/1"}}
    assert _received(root, "only")["parameters"] == {"greeting": "hi", "size": 2.0, "rate": 0.5}


def test_a_pipeline_parameter_without_a_value_fails_before_anything_runs(tmp_path):
    second = dict(
        TWO_TASKS["second"],
        inputs=dict(
            TWO_TASKS["second"]["inputs"],
            parameters={"greeting": {"componentInputParameter": "greeting"}},
        ),
    )
    spec = _spec(dict(TWO_TASKS, second=second))
    root = tmp_path / "root"
    with pytest.raises(RunError, match="task second: parameter 'greeting'.*has no value"):
        run_compiled(_write_yaml(tmp_path, spec), str(root))
    assert not (root / "first").exists()


def test_pre_cache_check_runs_first_and_the_executor_reads_its_output(tmp_path):
    driver = (
        "import json, sys; out = json.loads(sys.argv[1])['outputs']['outputFile']; "
        "json.dump({'parameterValues': {'span': 7}}, open(out, 'w'))"
    )
    executor = _container(
        "python",
        "-c",
        STAND_IN,
        "{{$}}",
        lifecycle={"preCacheCheck": {"command": ["python", "-c", driver], "args": ["{{$}}"]}},
    )
    root = str(tmp_path / "root")
    run_compiled(_write_yaml(tmp_path, _spec({"gen": {}}, {"gen": executor})), root)
    assert _received(root, "gen")["driver"] == {"parameterValues": {"span": 7}}


def test_an_unknown_placeholder_fails_naming_it(tmp_path):
    placeholder = "{{$.outputs.artifacts['out'].uri}}"
    executor = _container("python", "-c", STAND_IN, "{{$}}", args=[f"--uri={placeholder}"])
    spec = _spec(TWO_TASKS, {"second": executor})
    with pytest.raises(RunError, match=re.escape(f"task second: placeholder {placeholder}")):
        run_compiled(_write_yaml(tmp_path, spec), str(tmp_path / "root"))


@pytest.mark.parametrize(
    "kind, executor",
    [
        (
            "importer",
            {
                "importer": {
                    "artifactUri": {"constant": "gs://b/schema"},
                    "typeSchema": {"schemaTitle": "tfx.Schema"},
                }
            },
        ),
        ("resolver", {"resolver": {"outputArtifactQueries": {"out": {"filter": "state=LIVE"}}}}),
    ],
)
def test_importer_and_resolver_executors_fail_naming_the_task_before_anything_runs(
    tmp_path, kind, executor
):
    spec = _spec(TWO_TASKS, {"second": executor})
    root = tmp_path / "root"
    with pytest.raises(RunError, match=f"task second has a {kind} executor"):
        run_compiled(_write_yaml(tmp_path, spec), str(root))
    assert not (root / "first").exists()


def test_a_failing_task_fails_with_its_name_exit_code_and_log(tmp_path):
    crash = _container(
        "python", "-c", "import sys; print('disk on fire', file=sys.stderr); sys.exit(3)"
    )
    spec = _spec(dict(TWO_TASKS, third={"dependentTasks": ["second"]}), {"second": crash})
    root = tmp_path / "root"
    with pytest.raises(RunError, match="task second failed: its command exited with code 3") as e:
        run_compiled(_write_yaml(tmp_path, spec), str(root))
    assert "disk on fire" in str(e.value)
    assert not (root / "third").exists()


def test_a_task_writing_no_executor_output_fails(tmp_path):
    spec = _spec({"silent": {}}, {"silent": _container("python", "-c", "pass")})
    with pytest.raises(RunError, match="task silent exited without writing its ExecutorOutput"):
        run_compiled(_write_yaml(tmp_path, spec), str(tmp_path / "root"))


def test_a_malformed_file_fails_loudly(tmp_path):
    spec = _spec(TWO_TASKS)
    spec["root"]["dag"]["tasks"]["second"]["dependsOn"] = ["first"]  # not a PipelineSpec field
    with pytest.raises(RunError, match="not a valid compiled pipeline.*dependsOn"):
        run_compiled(_write_yaml(tmp_path, spec), str(tmp_path / "root"))


def test_cli_prints_run_errors_without_a_traceback(tmp_path, capsys):
    spec = _spec({"silent": {}}, {"silent": _container("python", "-c", "pass")})
    assert (
        cli.main(
            ["run-compiled", _write_yaml(tmp_path, spec), "--pipeline-root", str(tmp_path / "root")]
        )
        == 3  # a task failed
    )
    assert capsys.readouterr().err.startswith("tfx-tabular: error: task silent exited without")


@pytest.fixture(scope="module")
def compiled_run(tmp_path_factory) -> dict:
    """The real pipeline (example statistics on), compiled once for Kubeflow and for Vertex and
    run once under the Vertex-shaped launcher, with what its tasks reported: shared by the test of
    the run and the test of a rerun on a second data root (a run costs minutes)."""
    import contextlib
    import io

    folder = tmp_path_factory.mktemp("compiled")
    data, root = str(folder / "data"), str(folder / "root")
    criteo.write_dataset(data, 2000, days=2, files_per_day=1, row_group_size=500)
    pipeline = create_pipeline(
        "compiled",
        "gs://not-used/root",
        data,
        columns=FEW_COLUMNS,
        batch_size=32,
        epochs=1,
        task="binary",
        with_example_statistics=True,
        beam_pipeline_args=["--direct_running_mode=in_memory"],
    )
    kubeflow_yaml, vertex_json = str(folder / "pipeline.yaml"), str(folder / "pipeline.json")
    kubeflow.compile_pipeline(pipeline, "kubeflow", "tfx-tabular:test", kubeflow_yaml)
    kubeflow.compile_pipeline(pipeline, "vertex", "tfx-tabular:test", vertex_json)
    with open(kubeflow_yaml) as handle:
        compiled_text = handle.read()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        summary = run_compiled(kubeflow_yaml, root)
    return {
        "kubeflow": kubeflow_yaml,
        "vertex": vertex_json,
        "compiled_text": compiled_text,
        "root": root,
        "summary": summary,
        "out": out.getvalue(),
        "examples": _run_outputs(root, "ParquetExampleGen", "examples"),
        "anomalies": _run_outputs(root, "ExampleValidator", "anomalies"),
        "model_run": _run_outputs(root, "TabularTrainer", "model_run"),
    }


@pytest.mark.slow
def test_compiled_kubeflow_pipeline_runs_tfx_executors_end_to_end(compiled_run):
    import tensorflow as tf

    assert (
        compiled_runner.load_compiled(compiled_run["vertex"])[0].root
        == compiled_runner.load_compiled(compiled_run["kubeflow"])[0].root
    )
    summary = compiled_run["summary"]
    assert set(summary) == {
        "ParquetExampleGen",
        "ParquetSchemaGen",
        "ExampleValidator",  # on ParquetExampleGen's statistics
        "TabularTrainer",
    }
    examples = compiled_run["examples"]
    metadata = examples["metadata"]
    # TFX's ExampleGen driver records span as a custom property; the Examples type also has a
    # `span` property, so TFX's executor reports the custom one as `custom:span`.
    assert metadata["custom:span"] == 0
    assert metadata["input_fingerprint"].startswith("sha256:")
    assert sum(metadata["row_counts"].values()) == 2000
    assert os.path.exists(os.path.join(summary["ParquetSchemaGen"]["schema"], "schema.pbtxt"))
    # Stock ExampleValidator, on our artifacts.
    assert compiled_run["anomalies"]["metadata"]["blessed"] == {"train": 1, "eval": 1}

    model = summary["TabularTrainer"]["model"]
    serving = tf.saved_model.load(os.path.join(model, "Format-Serving"))
    records = glob.glob(os.path.join(examples["uri"], "Split-eval", "*"))
    batch = next(iter(tf.data.TFRecordDataset(records).batch(4)))
    assert serving.signatures["serving_default"](examples=batch)["outputs"].shape == (4, 1)
    assert f"Model (TabularTrainer.model): {model}" in compiled_run["out"]


def test_parameters_set_at_run_time_override_the_defaults(tmp_path):
    root = str(tmp_path / "root")
    overrides = {"greeting": "hi", "size": "7", "rate": "1e-2"}  # text, as --param gives it
    run_compiled(_write_yaml(tmp_path, GREETING_SPEC), root, overrides)
    assert _received(root, "only")["parameters"] == {"greeting": "hi", "size": 7.0, "rate": 0.01}


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"greting": "hi"}, "'greting' is not a parameter of pipeline 'stand-in'"),
        ({"size": "2.5"}, "pipeline parameter 'size': 2.5 is not a NUMBER_INTEGER"),
        ({"size": "two"}, "pipeline parameter 'size': 'two' is not a NUMBER_INTEGER"),
        ({"rate": "true"}, "pipeline parameter 'rate': True is not a NUMBER_DOUBLE"),
    ],
)
def test_a_wrong_parameter_name_or_type_fails_before_anything_runs(tmp_path, overrides, message):
    root = tmp_path / "root"
    with pytest.raises(compiled_runner.ParameterError) as e:
        run_compiled(_write_yaml(tmp_path, GREETING_SPEC), str(root), overrides)
    assert message in str(e.value)
    assert (
        "parameters: greeting (STRING, default 'hello'), rate (NUMBER_DOUBLE, default 0.5), "
        "size (NUMBER_INTEGER, default 2)" in str(e.value)
    )
    assert not root.exists()


def test_cli_param_errors_are_usage_errors_naming_the_parameter(tmp_path, capsys):
    path, root = _write_yaml(tmp_path, GREETING_SPEC), str(tmp_path / "root")
    assert cli.main(["run-compiled", path, "--pipeline-root", root, "--param", "sise=3"]) == 2
    assert "--param: 'sise' is not a parameter" in capsys.readouterr().err
    assert cli.main(["run-compiled", path, "--pipeline-root", root, "--param", "size"]) == 2
    assert "--param takes KEY=VALUE, not 'size'" in capsys.readouterr().err
    assert not os.path.exists(root)


def _run_outputs(root: str, task: str, output: str) -> dict:
    """The newest run's output artifact of `task`, as its executor reported it."""
    with open(os.path.join(root, task, "executor_output.json")) as handle:
        return json.load(handle)["artifacts"][output]["artifacts"][0]


@pytest.mark.slow
def test_a_compiled_pipeline_reruns_on_a_second_data_root_without_recompiling(
    compiled_run, tmp_path, capsys
):
    """Compiled once; `--param` points a second run at another dataset (other rows, other count)
    and changes epochs, batch size and learning rate: the second Examples hold the second
    dataset's rows, and the Trainer trains on them with the overridden values."""
    examples_a = compiled_run["examples"]
    train_a = examples_a["metadata"]["row_counts"]["train"]
    assert compiled_run["model_run"]["metadata"]["total_steps"] == train_a // 32  # 1 epoch of 32

    data_b, root, compiled = str(tmp_path / "b"), compiled_run["root"], compiled_run["kubeflow"]
    criteo.write_dataset(data_b, 1500, days=3, files_per_day=1, row_group_size=500, seed=1)
    params = ["data_root=" + data_b, "epochs=2", "batch_size=16", "learning_rate=0.05"]
    argv = ["run-compiled", compiled, "--pipeline-root", root]
    assert cli.main(argv + [f"--param={p}" for p in params]) == 0

    out = capsys.readouterr().out
    assert (
        f'pipeline parameters: batch_size=16, data_root={data_b}, data_service="", epochs=2' in out
    )
    with open(compiled) as handle:
        assert handle.read() == compiled_run["compiled_text"]  # not recompiled
    examples_b = _run_outputs(root, "ParquetExampleGen", "examples")
    assert examples_b["uri"] != examples_a["uri"]
    assert sum(examples_b["metadata"]["row_counts"].values()) == 1500
    train_b = examples_b["metadata"]["row_counts"]["train"]
    assert _run_outputs(root, "TabularTrainer", "model_run")["metadata"]["total_steps"] == (
        train_b // 16 * 2
    )


# --launcher kfp. Writes what it received (like STAND_IN, plus the files on its pod's local disk
# when it ran) as received.json into each output, after a zero-byte marker object if
# WRITE_MARKERS is set (as TF's GCS file system does for each directory).
KFP_STAND_IN = """
import json, os, re, sys
executor_input = json.loads(sys.argv[1])
inputs, outputs = executor_input.get("inputs", {}), executor_input["outputs"]
pod = re.split(r"/(?:gcs|local)/", outputs["outputFile"])[0]
local = sorted(os.path.relpath(os.path.join(d, f), pod) for d, _, fs in os.walk(pod) for f in fs)
received = {"parameters": inputs.get("parameterValues", {}), "local_files": local,
            "output_file": outputs["outputFile"],
            "outputs": {k: v["artifacts"][0] for k, v in outputs["artifacts"].items()},
            "inputs": {k: v["artifacts"][0] for k, v in inputs.get("artifacts", {}).items()}}
for artifact in received["outputs"].values():
    uri, data = artifact["uri"], json.dumps(received)
    if uri.startswith("gs://"):
        from google.cloud import storage
        bucket_name, _, key = uri[len("gs://"):].partition("/")
        bucket = storage.Client().bucket(bucket_name)
        if os.environ.get("WRITE_MARKERS"):
            bucket.blob(key + "/").upload_from_string(b"")
        bucket.blob(key + "/part/received.json").upload_from_string(data)
    else:
        os.makedirs(uri + "/part")
        open(uri + "/part/received.json", "w").write(data)
reported = {k: {"artifacts": [{"name": "ignored", "uri": v["uri"], "metadata": {
    "rows": 3, "ok": True, "splits": ["a"], "counts": {"a": 1}, "text": "x"}}]}
    for k, v in received["outputs"].items()}
with open(outputs["outputFile"], "w") as f:
    json.dump({"artifacts": reported}, f)
"""
UUID = "[-0-9a-f]{36}"


@pytest.fixture(autouse=True)
def pods_in_tmp_path(tmp_path, monkeypatch):
    """--launcher kfp makes each run's "pod disks" folder with tempfile: here, under tmp_path."""
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))


def _kfp_spec(env=()) -> dict:
    executor = _container("python", "-c", KFP_STAND_IN, "{{$}}", env=list(env))
    return _spec(TWO_TASKS, {"first": executor, "second": executor})


def _read(uri: str, bucket=None) -> dict:
    if bucket is not None:
        key = uri[len(f"gs://{bucket.name}/") :]
        return json.loads(bucket.blob(key + "/part/received.json").download_as_bytes())
    with open(os.path.join(uri, "part", "received.json")) as handle:
        return json.load(handle)


def _check_kfp_contract(root: str, summary: dict, bucket=None) -> None:
    first, second = summary["first"]["out"], summary["second"]["out"]
    run = re.fullmatch(rf"{re.escape(root)}/stand-in/({UUID})/first/{UUID}/out", first)
    assert run, first
    assert re.fullmatch(rf"{re.escape(root)}/stand-in/{run.group(1)}/second/{UUID}/out", second)
    received = _read(second, bucket)
    # driver.go provisionOutputs: named by the key, the spec's type verbatim, the file local.
    out = received["outputs"]["out"]
    assert out == {"name": "out", "uri": second, "type": EXAMPLES_TYPE}
    assert "://" not in received["output_file"]
    assert received["output_file"].endswith(
        second[: -len("/out")].split("://")[-1] + "/output_metadata.json"
    )
    # An upstream output as ML Metadata returns it: numeric id, empty type, wrapped values.
    examples = received["inputs"]["examples"]
    assert examples["name"] == "1" and examples["uri"] == first
    assert examples["type"] == {"instanceSchema": ""}
    assert examples["metadata"] == {
        "rows": 3.0,
        "ok": 1.0,
        "splits": {"list": ["a"]},
        "counts": {"struct": {"a": 1.0}},
        "text": "x",
        "display_name": "out",
        "store_session_info": '{"Provider":"gs","Params":{"fromEnv":"true"}}',
    }
    # It was on the pod's local disk when the command ran (LocalPathForURI).
    local = "gcs/" + first[len("gs://") :] if bucket else "local" + first
    assert f"{local}/part/received.json" in received["local_files"]


def test_kfp_launcher_passes_artifacts_as_the_open_source_driver_and_launcher_do(tmp_path, capsys):
    root = str(tmp_path / "root")
    summary = run_compiled(_write_yaml(tmp_path, _kfp_spec()), root, launcher="kfp")
    _check_kfp_contract(root, summary)
    assert "(kfp launcher)" in capsys.readouterr().out


def test_cli_run_compiled_takes_the_launcher(tmp_path, capsys):
    args = ["run-compiled", _write_yaml(tmp_path, _kfp_spec()), "--pipeline-root", str(tmp_path)]
    assert cli.main(args + ["--launcher", "kfp"]) == 0
    assert "(kfp launcher)" in capsys.readouterr().out
    with pytest.raises(SystemExit) as usage_error:
        cli.main(args + ["--launcher", "argo"])
    assert usage_error.value.code == 2


def test_kfp_launcher_on_gs_downloads_inputs_and_fails_on_a_directory_marker(tmp_path, gcs):
    root = f"gs://{gcs.name}/kfp"
    path = _write_yaml(tmp_path, _kfp_spec())
    _check_kfp_contract(root, run_compiled(path, root, launcher="kfp"), gcs)

    markers = _write_yaml(tmp_path, _kfp_spec(env=[{"name": "WRITE_MARKERS", "value": "1"}]))
    with pytest.raises(RunError) as e:
        run_compiled(markers, root, launcher="kfp")
    # launcher_v2.go downloadArtifacts + object_store.go DownloadBlob/downloadFile, verbatim.
    pattern = (
        r'task second: failed to download input artifact "examples" from remote storage URI '
        rf'"({root}/stand-in/{UUID}/first/{UUID}/out)": downloadFile\(\): unable to complete '
        r'copying "(kfp/\S+/out/part/received.json)" to local storage "(/\S+/out/part/'
        r'received.json)": failed to create local directory "(/\S+/out/part)": '
        r"mkdir (/\S+/out): not a directory"
    )
    match = re.fullmatch(pattern, str(e.value))
    assert match, str(e.value)
    assert match.group(5).endswith("/gcs/bucket/" + match.group(1)[len("gs://bucket/") :])


def test_the_vertex_launcher_needs_a_local_root_and_an_unknown_launcher_fails(tmp_path):
    path = _write_yaml(tmp_path, _spec(TWO_TASKS))
    with pytest.raises(RunError, match="--launcher kfp takes gs://"):
        run_compiled(path, "gs://bucket/root")
    with pytest.raises(RunError, match="the launcher must be one of"):
        run_compiled(path, str(tmp_path / "root"), launcher="argo")


@pytest.mark.slow
def test_compiled_pipeline_on_gs_runs_under_the_kfp_launcher_end_to_end(tmp_path, tf_gcs, capsys):
    """Every task of the full compiled pipeline, pipeline root and data root on gs:// (the GCS
    emulator; TF's own GCS file system too), artifacts handed on as the open-source KFP driver
    and launcher do: inputs untyped, downloaded to local disk first (which fails on any
    directory marker); afterwards not one marker in the bucket."""
    import tensorflow as tf

    data = tmp_path / "data"
    criteo.write_dataset(str(data), 1000, days=2, files_per_day=1, row_group_size=500)
    for path in sorted(data.rglob("*")):
        if path.is_file():
            tf_gcs.blob(f"data/{path.relative_to(data)}").upload_from_filename(str(path))
    pipeline = create_pipeline(
        "kfp-gs",
        f"gs://{tf_gcs.name}/compiled-root",
        f"gs://{tf_gcs.name}/data",
        columns=FEW_COLUMNS,
        task="binary",
        epochs=1,
        batch_size=64,
        with_example_statistics=True,
        with_transform=True,
        with_evaluator=True,
        beam_pipeline_args=["--direct_running_mode=in_memory", "--direct_num_workers=1"],
    )
    compiled = str(tmp_path / "pipeline.yaml")
    kubeflow.compile_pipeline(pipeline, "kubeflow", "tfx-tabular:test", compiled)

    summary = run_compiled(compiled, f"gs://{tf_gcs.name}/end-to-end", launcher="kfp")

    tasks = compiled_runner.load_compiled(compiled)[0].root.dag.tasks
    # ExampleValidator on ParquetExampleGen's statistics, Transform, Evaluator: 6 tasks.
    assert set(summary) == set(tasks) and len(tasks) == 6
    # Every object this run wrote (the module's bucket also holds the markers an earlier test
    # wrote on purpose under kfp/).
    objects = {
        blob.name: blob.size
        for prefix in ("compiled-root", "data", "end-to-end")
        for blob in tf_gcs.list_blobs(prefix=prefix)
    }
    assert any(name.startswith("end-to-end/") for name in objects)
    assert not [name for name, size in objects.items() if name.endswith("/") and not size]
    trainer = {
        key: uri[len(f"gs://{tf_gcs.name}/") :] for key, uri in summary["TabularTrainer"].items()
    }
    run_files = [name for name in objects if name.startswith(trainer["model_run"] + "/")]
    assert any("/checkpoints/" in name for name in run_files), run_files
    assert any(".tfevents." in name for name in run_files), run_files
    model = summary["TabularTrainer"]["model"]
    serving = tf.saved_model.load(f"{model}/Format-Serving")  # through tf.io.gfile on gs://
    examples = summary["ParquetExampleGen"]["examples"]
    records = tf.io.gfile.glob(f"{examples}/Split-eval/*")
    batch = next(iter(tf.data.TFRecordDataset(records).batch(4)))
    assert serving.signatures["serving_default"](examples=batch)["outputs"].shape == (4, 1)
    out = capsys.readouterr().out
    assert "MiB of inputs copied to local disk" in out
    print(out)  # the per-task sizes, for docs/pipelines.md


def test_a_null_metadata_value_fails_as_ml_metadata_rejects_it():
    from tfx_tabular.pipelines.kfp_launcher import LauncherError, through_ml_metadata

    assert through_ml_metadata(True) == 1.0 and through_ml_metadata([1]) == {"list": [1]}
    with pytest.raises(LauncherError, match="unknown/unsupported value type NoneType"):
        through_ml_metadata(None)  # converter.go StructValueToMLMDValue: "TODO: support null"
