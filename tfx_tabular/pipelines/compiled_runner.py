"""Run a compiled pipeline file (Kubeflow PipelineSpec YAML or Vertex PipelineJob JSON) locally,
task by task, the way the KFP v2 launcher runs it: for each task an ExecutorInput is built, the
container's command runs as a local process, and the ExecutorOutput it writes feeds the next tasks.
How artifacts pass between tasks is the launcher's: Vertex AI's typed artifacts (VertexShaped, the
default) or the open-source KFP driver's and launcher's (kfp_launcher.KfpLauncher).

What runs is the file users upload, so this checks the compiled contract itself (parameters,
artifact types and metadata passed between tasks), not the Python pipeline it came from.
Not supported (each fails naming the task): importer and resolver executors, output parameters
consumed by other tasks, conditions, loops, sub-DAGs, and placeholders other than `{{$}}`.
"""

from __future__ import annotations

import glob
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, List, Mapping, Optional

LAUNCHERS = ("vertex", "kfp")
LOG_TAIL_LINES = 40
PLACEHOLDER = re.compile(r"\{\{\$.*?\}\}")


class RunError(RuntimeError):
    pass


class ParameterError(ValueError):
    """A pipeline parameter set at run time that the compiled file does not take."""


def _parse_parameter(name: str, kind: str, value: Any):
    """`value` (text from the command line, or a Python value) as a `kind` parameter's value."""
    if kind == "STRING":
        return value if isinstance(value, str) else json.dumps(value)
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise ParameterError(
                f"pipeline parameter {name!r}: {value!r} is not a {kind}"
            ) from None
    valid = {
        "NUMBER_INTEGER": isinstance(value, int) and not isinstance(value, bool),
        "NUMBER_DOUBLE": isinstance(value, (int, float)) and not isinstance(value, bool),
        "BOOLEAN": isinstance(value, bool),
        "LIST": isinstance(value, list),
        "STRUCT": isinstance(value, dict),
    }
    if not valid.get(kind, False):
        raise ParameterError(f"pipeline parameter {name!r}: {value!r} is not a {kind}")
    return float(value) if kind == "NUMBER_DOUBLE" else value


def check_parameters(spec, values: Mapping[str, Any]) -> Dict[str, Any]:
    """`values` for the pipeline parameters (the root's inputDefinitions), each converted to its
    declared type; an unknown name or a value of the wrong type fails naming it, with the list
    of the pipeline's parameters."""
    from kfp.pipeline_spec import pipeline_spec_pb2

    definitions = spec.root.input_definitions.parameters
    kinds = {
        name: pipeline_spec_pb2.ParameterType.ParameterTypeEnum.Name(d.parameter_type)
        for name, d in definitions.items()
    }
    listing = ", ".join(
        f"{name} ({kinds[name]}"
        + (f", default {_plain(d.default_value)!r})" if d.HasField("default_value") else ")")
        for name, d in sorted(definitions.items())
    )
    checked = {}
    for name, value in values.items():
        if name not in definitions:
            raise ParameterError(
                f"{name!r} is not a parameter of pipeline {spec.pipeline_info.name!r}; "
                f"its parameters: {listing or 'none'}"
            )
        try:
            checked[name] = _parse_parameter(name, kinds[name], value)
        except ParameterError as e:
            raise ParameterError(f"{e}; the pipeline's parameters: {listing}") from None
    return checked


def _plain(value):
    from google.protobuf import json_format

    plain = json_format.MessageToDict(value)
    return int(plain) if isinstance(plain, float) and plain.is_integer() else plain


def _shown(value) -> str:
    """A parameter value as a line shows it: an unset text parameter as "", not as nothing."""
    plain = _plain(value)
    return '""' if plain == "" else str(plain)


def _pipeline_spec(handle):
    """The PipelineSpec of a compiled YAML; a second document (the Kubernetes PlatformSpec, see
    kubeflow.DownloadVolume) is checked as the KFP backend parses it, and not applied here."""
    import yaml
    from google.protobuf import json_format
    from kfp.pipeline_spec import pipeline_spec_pb2

    documents = list(yaml.safe_load_all(handle)) or [None]
    for platform in documents[1:]:
        try:
            json_format.ParseDict(platform, pipeline_spec_pb2.PlatformSpec())
        except json_format.ParseError as e:
            raise ValueError(f"its second document is not a KFP PlatformSpec: {e}") from None
    return documents[0]


def load_compiled(compiled_path: str):
    """(PipelineSpec, its PipelineDeploymentConfig, the pipeline parameters' values) of a compiled
    file, parsed strictly: an unknown field fails, as the KFP backend and Vertex reject it."""
    import yaml
    from google.protobuf import json_format
    from kfp.pipeline_spec import pipeline_spec_pb2

    try:
        with open(compiled_path) as handle:
            document = (
                json.load(handle) if compiled_path.endswith(".json") else _pipeline_spec(handle)
            )
    except (OSError, ValueError, yaml.YAMLError) as e:
        raise RunError(f"cannot read {compiled_path}: {e}") from e
    if not isinstance(document, dict):
        raise RunError(f"{compiled_path} holds no PipelineSpec or PipelineJob")
    try:
        if "pipelineSpec" in document:  # a Vertex PipelineJob
            job = json_format.ParseDict(document, pipeline_spec_pb2.PipelineJob())
            spec = json_format.ParseDict(document["pipelineSpec"], pipeline_spec_pb2.PipelineSpec())
            runtime_values = dict(job.runtime_config.parameter_values)
        else:
            spec = json_format.ParseDict(document, pipeline_spec_pb2.PipelineSpec())
            runtime_values = {}
        deployment = json_format.ParseDict(
            json_format.MessageToDict(spec.deployment_spec),
            pipeline_spec_pb2.PipelineDeploymentConfig(),
        )
    except json_format.ParseError as e:
        raise RunError(f"{compiled_path} is not a valid compiled pipeline: {e}") from e
    root_values = {
        name: definition.default_value
        for name, definition in spec.root.input_definitions.parameters.items()
        if definition.HasField("default_value")
    }
    root_values.update(runtime_values)
    return spec, deployment, root_values


def task_order(spec) -> List[str]:
    """The root DAG's tasks, each after the tasks it depends on or takes artifacts from."""
    tasks = spec.root.dag.tasks
    for name, task in tasks.items():
        for key, artifact in task.inputs.artifacts.items():
            if not artifact.HasField("task_output_artifact"):
                raise RunError(
                    f"task {name}: input artifact {key!r} is not another task's output "
                    "(pipeline input artifacts are not supported)"
                )
    upstream = {
        name: set(task.dependent_tasks)
        | {a.task_output_artifact.producer_task for a in task.inputs.artifacts.values()}
        for name, task in tasks.items()
    }
    for name, producers in upstream.items():
        unknown = producers - set(tasks)
        if unknown:
            raise RunError(f"task {name} depends on unknown tasks {sorted(unknown)}")
    order: List[str] = []
    while len(order) < len(tasks):
        ready = sorted(n for n in tasks if n not in order and upstream[n] <= set(order))
        if not ready:
            raise RunError(
                f"tasks {sorted(set(tasks) - set(order))} depend on each other in a cycle"
            )
        order.extend(ready)
    return order


def _container(name: str, task, spec, deployment):
    if task.component_ref.name not in spec.components:
        raise RunError(f"task {name} refers to an unknown component {task.component_ref.name!r}")
    component = spec.components[task.component_ref.name]
    if task.trigger_policy.condition or task.WhichOneof("iterator"):
        raise RunError(f"task {name} has a condition or a loop, which run-compiled does not run")
    if component.WhichOneof("implementation") != "executor_label":
        raise RunError(f"task {name} is a sub-DAG, which run-compiled does not run")
    if component.executor_label not in deployment.executors:
        raise RunError(
            f"task {name}: executor {component.executor_label!r} is not in the deploymentSpec"
        )
    executor = deployment.executors[component.executor_label]
    kind = executor.WhichOneof("spec")
    if kind != "container":
        raise RunError(
            f"task {name} has a {kind} executor ({component.executor_label}): "
            "run-compiled runs container executors only"
        )
    return component, executor.container


def _artifact_type(name: str, key: str, artifact_spec):
    """The output's type as the launcher passes it: a schemaTitle (TFX maps it to a class)."""
    import yaml
    from kfp.pipeline_spec import pipeline_spec_pb2

    type_schema = artifact_spec.artifact_type
    title = type_schema.schema_title
    if type_schema.instance_schema:
        title = (yaml.safe_load(type_schema.instance_schema) or {}).get("title")
    if not title:
        raise RunError(f"task {name}: output {key!r} has no artifact type title")
    return pipeline_spec_pb2.ArtifactTypeSchema(
        schema_title=title, schema_version=type_schema.schema_version
    )


def _next_execution_id(pipeline_root: str) -> int:
    """One more than any execution folder (`<root>/<task>/<output>/<id>`) of earlier runs."""
    ids = [
        int(os.path.basename(p))
        for p in glob.glob(os.path.join(pipeline_root, "*", "*", "*"))
        if os.path.basename(p).isdigit()
    ]
    return max(ids, default=0) + 1


def parameter_values(name: str, task, root_values: dict) -> dict:
    """The task's input parameters: constants, or pipeline parameters (runtimeConfig values,
    else the root's defaults). Known before any task runs, as nothing else is supported."""
    values = {}
    for key, parameter in task.inputs.parameters.items():
        kind = parameter.WhichOneof("kind")
        if kind == "runtime_value" and parameter.runtime_value.HasField("constant"):
            value = parameter.runtime_value.constant
        elif kind == "component_input_parameter":
            if parameter.component_input_parameter not in root_values:
                raise RunError(
                    f"task {name}: parameter {key!r} takes the pipeline parameter "
                    f"{parameter.component_input_parameter!r}, which has no value"
                )
            value = root_values[parameter.component_input_parameter]
        else:  # taskOutputParameter, taskFinalStatus, schemaVersion 2.0.0's constantValue
            source = (
                parameter.runtime_value.WhichOneof("value") if kind == "runtime_value" else kind
            )
            raise RunError(
                f"task {name}: parameter {key!r} comes from a {source}; run-compiled "
                "passes constants and pipeline parameters (schemaVersion 2.1.0) only"
            )
        if parameter.parameter_expression_selector:
            raise RunError(
                f"task {name}: parameter {key!r} has an expression selector, which "
                "run-compiled does not support"
            )
        values[key] = value
    return values


def build_executor_input(name: str, task, parameters: dict, produced: Dict[str, dict]):
    """The ExecutorInput of one task, before its outputs are provisioned: its parameters as
    parameterValues, upstream outputs (as the launcher recorded them) as input artifacts."""
    from kfp.pipeline_spec import pipeline_spec_pb2

    executor_input = pipeline_spec_pb2.ExecutorInput()
    for key, value in parameters.items():
        executor_input.inputs.parameter_values[key].CopyFrom(value)
    for key, artifact in task.inputs.artifacts.items():
        producer = artifact.task_output_artifact
        upstream = produced[producer.producer_task]
        if producer.output_artifact_key not in upstream:
            raise RunError(
                f"task {name}: input {key!r} wants output "
                f"{producer.output_artifact_key!r} of task {producer.producer_task}, "
                "which has no such output"
            )
        executor_input.inputs.artifacts[key].artifacts.add().CopyFrom(
            upstream[producer.output_artifact_key]
        )
    return executor_input


class VertexShaped:
    """The default launcher: typed input artifacts (schemaTitle), as Vertex AI passes them,
    outputs under `<root>/<task>/<output>/<execution id>`, a local pipeline root."""

    pre_cache_check = True

    def __init__(self, pipeline_root: str):
        self.root = pipeline_root
        self.next_id = _next_execution_id(pipeline_root)
        self.downloaded: Dict[str, int] = {}  # Vertex AI copies no inputs to local disk

    def log_path(self, task: str) -> str:
        return os.path.join(self.root, task, "executor.log")

    def provision_outputs(self, task: str, component, outputs) -> None:
        for key, artifact_spec in component.output_definitions.artifacts.items():
            uri = os.path.join(self.root, task, key, str(self.next_id))
            os.makedirs(uri)  # fails rather than mixing two runs' files in one folder
            outputs.artifacts[key].artifacts.add(
                name=os.path.relpath(uri, self.root),
                uri=uri,
                type=_artifact_type(task, key, artifact_spec),
            )
        outputs.output_file = os.path.join(self.root, task, "executor_output.json")
        self.next_id += 1

    def before_command(self, task: str, executor_input) -> None:
        pass  # Vertex AI reads artifacts in place (gcsfuse): nothing is copied

    def record_outputs(self, task: str, executor_input, executor_output) -> dict:
        return reported_outputs(executor_input, executor_output)


def substitute_placeholders(name: str, arguments, executor_input_json: str) -> List[str]:
    """`{{$}}` → the ExecutorInput JSON; any other placeholder fails, naming it. TFX's compiled
    tasks use `{{$}}` only; the others (e.g. `{{$.outputs.artifacts['y'].uri}}`) belong to
    containers that write no ExecutorOutput, which this runner needs to pass artifacts on."""

    def replace(match: re.Match) -> str:
        if match.group(0) != "{{$}}":
            raise RunError(
                f"task {name}: placeholder {match.group(0)} is not supported by "
                "run-compiled (only {{$}}, the ExecutorInput)"
            )
        return executor_input_json

    return [PLACEHOLDER.sub(replace, argument) for argument in arguments]


def _run_command(name: str, what: str, command: List[str], env: dict, log_path: str) -> None:
    if not command:
        raise RunError(
            f"task {name}: the {what} has no command (the image's entrypoint is unknown here)"
        )
    if command[0] in ("python", "python3"):  # the image's Python is this environment's
        command = [sys.executable] + command[1:]
    with open(log_path, "ab") as log:
        try:
            returncode = subprocess.run(
                command, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            ).returncode
        except OSError as e:
            raise RunError(f"task {name}: cannot start its {what} {command[0]!r}: {e}") from e
    if returncode:
        with open(log_path, errors="replace") as log:
            tail = "".join(log.readlines()[-LOG_TAIL_LINES:])
        raise RunError(
            f"task {name} failed: its {what} exited with code {returncode}. "
            f"Last lines of {log_path}:\n{tail}"
        )


def run_task(name: str, container, executor_input, log_path: str, pre_cache_check=True):
    """Run one container task (its preCacheCheck first, if any and `pre_cache_check`, as Vertex
    AI does for TFX's ExampleGen driver) and return the ExecutorOutput it wrote."""
    from google.protobuf import json_format
    from kfp.pipeline_spec import pipeline_spec_pb2

    output_file = executor_input.outputs.output_file
    os.makedirs(os.path.dirname(output_file), exist_ok=True)
    if os.path.exists(output_file):
        os.remove(output_file)  # TFX's executor would read an earlier run's as its driver's output
    open(log_path, "wb").close()
    executor_input_json = json_format.MessageToJson(executor_input, indent=None)
    env = {**os.environ, **{variable.name: variable.value for variable in container.env}}
    check = container.lifecycle.pre_cache_check
    if pre_cache_check and (check.command or check.args):
        _run_command(
            name,
            "preCacheCheck",
            substitute_placeholders(
                name,
                list(check.command) + list(check.args),
                executor_input_json,
            ),
            env,
            log_path,
        )
    _run_command(
        name,
        "command",
        substitute_placeholders(
            name, list(container.command) + list(container.args), executor_input_json
        ),
        env,
        log_path,
    )
    if not os.path.exists(output_file):
        raise RunError(f"task {name} exited without writing its ExecutorOutput to {output_file}")
    with open(output_file) as handle:
        try:
            return json_format.Parse(handle.read(), pipeline_spec_pb2.ExecutorOutput())
        except json_format.ParseError as e:
            raise RunError(f"task {name} wrote an invalid ExecutorOutput {output_file}: {e}") from e


def reported_outputs(executor_input, executor_output) -> dict:
    """The task's output artifacts as the launcher records them: what it passed in (name, type,
    uri), overlaid with what the executor reported (metadata: properties and custom properties;
    TFX reports no type, which downstream executors need)."""
    outputs = {}
    for key, artifacts in executor_input.outputs.artifacts.items():
        artifact = artifacts.artifacts[0]
        for reported in executor_output.artifacts[key].artifacts[:1]:
            artifact.MergeFrom(reported)
        outputs[key] = artifact
    return outputs


def _launcher(launcher: str, pipeline_root: str, pipeline_name: str):
    if launcher == "vertex":
        if "://" in pipeline_root:
            raise RunError(
                f"the pipeline root must be a local folder, not {pipeline_root} "
                "(--launcher kfp takes gs://)"
            )
        return VertexShaped(os.path.abspath(pipeline_root))
    if launcher == "kfp":
        from tfx_tabular.pipelines.kfp_launcher import KfpLauncher

        if not pipeline_root.startswith("gs://"):
            pipeline_root = os.path.abspath(pipeline_root)
        pods = tempfile.mkdtemp(prefix="tfx-tabular-kfp-pods-")  # each task's local disk
        return KfpLauncher(pipeline_root, pipeline_name, pods)
    raise RunError(f"the launcher must be one of {LAUNCHERS}, not {launcher!r}")


def _run_one(name: str, task, component, container, parameters, produced, launcher):
    from tfx_tabular.pipelines.kfp_launcher import LauncherError

    executor_input = build_executor_input(name, task, parameters, produced)
    launcher.provision_outputs(name, component, executor_input.outputs)
    log_path = launcher.log_path(name)
    try:
        launcher.before_command(name, executor_input)
        executor_output = run_task(
            name, container, executor_input, log_path, launcher.pre_cache_check
        )
        return launcher.record_outputs(name, executor_input, executor_output)
    except LauncherError as e:
        raise RunError(f"task {name}: {e}") from None


def run_compiled(
    compiled_path: str,
    pipeline_root: str,
    parameters: Optional[Mapping[str, Any]] = None,
    launcher: str = "vertex",
) -> dict:
    """Run every task of a compiled pipeline in DAG order with outputs under `pipeline_root`,
    handing artifacts between tasks as `launcher` does: "vertex" (Vertex AI's typed artifacts; a
    local folder) or "kfp" (the open-source KFP v2 driver and launcher; a local folder or gs://,
    see kfp_launcher). `parameters` set pipeline parameters (text, as on the command line, or
    values), checked before any task runs. Returns {task: {output: uri}}."""
    from google.protobuf import json_format, struct_pb2

    spec, deployment, root_values = load_compiled(compiled_path)
    for name, value in check_parameters(spec, parameters or {}).items():
        root_values[name] = json_format.ParseDict(value, struct_pb2.Value())
    tasks = spec.root.dag.tasks
    order = task_order(spec)
    # Refuse unsupported tasks before running any.
    containers = {name: _container(name, tasks[name], spec, deployment) for name in order}
    parameters = {name: parameter_values(name, tasks[name], root_values) for name in order}
    runner = _launcher(launcher, pipeline_root, spec.pipeline_info.name)
    print(
        f"running {len(order)} tasks of {spec.pipeline_info.name!r} from {compiled_path} "
        f"→ {pipeline_root} ({launcher} launcher)",
        flush=True,
    )
    if root_values:
        values = ", ".join(f"{k}={_shown(v)}" for k, v in sorted(root_values.items()))
        print(f"pipeline parameters: {values}", flush=True)
    produced: Dict[str, dict] = {}
    start = time.perf_counter()
    for index, name in enumerate(order):
        component, container = containers[name]
        print(f"[{index + 1}/{len(order)}] {name} (log: {runner.log_path(name)})", flush=True)
        task_start = time.perf_counter()
        produced[name] = _run_one(
            name, tasks[name], component, container, parameters[name], produced, runner
        )
        copied = runner.downloaded.get(name)
        copied = f", {copied / 2**20:.1f} MiB of inputs copied to local disk" if copied else ""
        print(f"      done in {time.perf_counter() - task_start:.1f} s{copied}", flush=True)
    print(f"pipeline finished in {time.perf_counter() - start:.0f} s")
    for name, outputs in produced.items():
        for key, artifact in outputs.items():
            output_spec = containers[name][0].output_definitions.artifacts[key]
            if _artifact_type(name, key, output_spec).schema_title == "tfx.Model":
                print(f"Model ({name}.{key}): {artifact.uri}")
    return {
        name: {key: artifact.uri for key, artifact in outputs.items()}
        for name, outputs in produced.items()
    }
