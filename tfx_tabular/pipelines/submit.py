"""Submit a compiled pipeline file and follow its run: to Vertex AI Pipelines through aiplatform's
public API (`PipelineJob`), or to a Kubeflow Pipelines v2 API server through `kfp.Client`.

Pipeline parameters are checked against the compiled file before anything is sent (the same
check as `run-compiled`). `dry_run` builds the exact requests and sends nothing: no network, no
credentials. Server-assigned ids (a KFP pipeline, version, experiment) are unknown offline, so a
dry run shows them as `<pipeline_id>`, `<pipeline_version_id>`, `<experiment_id>`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import os
import re
import tempfile
import time
import urllib.parse
from typing import Any, Dict, List, Mapping, Optional

from tfx_tabular.pipelines import compiled_runner

VERTEX_SUCCEEDED = "PIPELINE_STATE_SUCCEEDED"
KFP_SUCCEEDED = "SUCCEEDED"
# KFP v2's final run states. kfp 2.5's wait_for_run_completion stops on succeeded / failed /
# skipped / error only, so a cancelled run would keep it polling: we poll get_run ourselves.
KFP_FINAL_STATES = ("SUCCEEDED", "FAILED", "SKIPPED", "CANCELED")
KFP_DEFAULT_EXPERIMENT = "Default"  # what kfp.Client's own run helpers use
KFP_API = "/apis/v2beta1"
# Google Cloud's label rules (lowercase letters, digits, _ and -; keys start with a letter; at
# most 63 characters); Vertex refuses others only once the request is sent.
LABEL_KEY = re.compile(r"[a-z][a-z0-9_-]{0,62}")
LABEL_VALUE = re.compile(r"[a-z0-9_-]{0,63}")


class SubmitError(ValueError):
    """Options that cannot be sent (a bad region, host or label): a usage error."""


class RunFailed(compiled_runner.RunError):
    """The run was submitted and ended in a state other than succeeded."""


@dataclasses.dataclass(frozen=True)
class Submission:
    """What to run: a compiled file and the run's settings, for either target."""

    compiled_path: str
    parameters: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    labels: Mapping[str, str] = dataclasses.field(default_factory=dict)
    service_account: Optional[str] = None
    enable_caching: Optional[bool] = None  # None: the compiled per-task settings
    experiment: Optional[str] = None
    display_name: Optional[str] = None
    pipeline_root: Optional[str] = None

    def parameter_values(self) -> Dict[str, Any]:
        spec = compiled_runner.load_compiled(self.compiled_path)[0]
        return compiled_runner.check_parameters(spec, self.parameters)

    def pipeline_name(self) -> str:
        return compiled_runner.load_compiled(self.compiled_path)[0].pipeline_info.name

    def run_name(self) -> str:
        stem = os.path.splitext(os.path.basename(self.compiled_path))[0]
        return self.display_name or stem


def _utc_stamp() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d%H%M%S")


# Vertex AI


def vertex_job(submission: Submission, project: str, region: str, credentials=None):
    """The aiplatform PipelineJob for this submission (built locally; nothing is sent)."""
    from google.cloud import aiplatform

    values = submission.parameter_values()
    for key, value in submission.labels.items():
        if not (LABEL_KEY.fullmatch(key) and LABEL_VALUE.fullmatch(value)):
            raise SubmitError(
                f"--labels {key}={value}: keys and values take lowercase letters, digits, _ "
                "and - (keys start with a letter), at most 63 characters"
            )
    try:
        return aiplatform.PipelineJob(
            display_name=submission.run_name(),
            template_path=submission.compiled_path,
            pipeline_root=submission.pipeline_root,
            parameter_values=values,
            enable_caching=submission.enable_caching,
            labels=dict(submission.labels) or None,
            project=project,
            location=region,
            credentials=credentials,
        )
    except ValueError as e:  # aiplatform's checks of the region, labels and job id
        raise SubmitError(f"Vertex AI: {e}") from None


def vertex_request(job, submission: Submission, project: str, region: str) -> dict:
    """The CreatePipelineJob request `job.submit()` sends: the job as built, with the service
    account that submit() sets on it."""
    pipeline_job = job.to_dict()
    if submission.service_account:
        pipeline_job["serviceAccount"] = submission.service_account
    return {
        "parent": f"projects/{project}/locations/{region}",
        "pipelineJobId": job.job_id,
        "pipelineJob": pipeline_job,
    }


def submit_vertex(
    submission: Submission, project: str, region: str, *, dry_run: bool = False, wait=False
) -> dict:
    """Create the PipelineJob (with an experiment, aiplatform gets or creates it first and
    associates the job with it after); with `wait`, follow the job to its end and raise
    RunFailed unless it succeeded."""
    from google.auth import credentials as auth_credentials

    credentials = auth_credentials.AnonymousCredentials() if dry_run else None
    job = vertex_job(submission, project, region, credentials)
    document = {
        "target": "vertex",
        "request": vertex_request(job, submission, project, region),
        "experiment": submission.experiment,
    }
    if dry_run:
        return document
    job.submit(service_account=submission.service_account, experiment=submission.experiment)
    document["name"] = job.resource_name
    if wait:
        document["state"] = follow_vertex(job)
    return document


def follow_vertex(job) -> str:
    """Wait for the job's end; its final state, or RunFailed naming it."""
    try:
        job.wait()
    except RuntimeError:  # aiplatform raises on a failed or cancelled job; its state says which
        if job.state is None or job.state.name == VERTEX_SUCCEEDED:
            raise
    state = job.state.name
    if state != VERTEX_SUCCEEDED:
        error = job.to_dict().get("error", {}).get("message", "")
        raise RunFailed(f"pipeline job {job.resource_name} ended {state}: {error}".rstrip(": "))
    return state


# Kubeflow Pipelines


def check_host(host: Optional[str]) -> str:
    parsed = urllib.parse.urlparse(host or "")
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise SubmitError(
            f"--host must be the KFP API server's http:// or https:// URL, not {host!r}"
        )
    return host.rstrip("/")


@dataclasses.dataclass(frozen=True)
class KfpPlan:
    """Names and values of one KFP submission, fixed before anything is sent."""

    pipeline_name: str
    version_name: str
    experiment: str
    run_name: str
    parameters: Dict[str, Any]


def kfp_plan(submission: Submission) -> KfpPlan:
    import yaml

    with open(submission.compiled_path) as handle:
        if "pipelineSpec" in (yaml.safe_load(handle) or {}):
            raise SubmitError(
                f"{submission.compiled_path} is a Vertex PipelineJob; --target kubeflow takes "
                "the PipelineSpec YAML of `compile --target kubeflow`"
            )
    if submission.labels:
        raise SubmitError("--labels: KFP runs have no labels (Vertex AI only)")
    name = submission.pipeline_name()
    return KfpPlan(
        pipeline_name=name,
        version_name=f"{name}-{_utc_stamp()}",
        experiment=submission.experiment or KFP_DEFAULT_EXPERIMENT,
        run_name=submission.display_name or f"{submission.run_name()}-{_utc_stamp()}",
        parameters=submission.parameter_values(),
    )


def kfp_run_body(submission: Submission, plan: KfpPlan, ids: Mapping[str, str]) -> dict:
    """The CreateRun body kfp.Client.run_pipeline sends for a pipeline version."""
    import kfp_server_api

    run = kfp_server_api.V2beta1Run(
        experiment_id=ids["experiment_id"],
        display_name=plan.run_name,
        pipeline_version_reference=kfp_server_api.V2beta1PipelineVersionReference(
            pipeline_id=ids["pipeline_id"], pipeline_version_id=ids["pipeline_version_id"]
        ),
        runtime_config=kfp_server_api.V2beta1RuntimeConfig(
            pipeline_root=submission.pipeline_root, parameters=plan.parameters
        ),
        service_account=submission.service_account,
    )
    return kfp_server_api.ApiClient().sanitize_for_serialization(run)


PLACEHOLDER_IDS = {
    "pipeline_id": "<pipeline_id>",
    "pipeline_version_id": "<pipeline_version_id>",
    "experiment_id": "<experiment_id>",
}


def kfp_requests(submission: Submission, plan: KfpPlan) -> List[dict]:
    """The requests submit_kubeflow makes through kfp.Client, in order; server-assigned ids
    and the client's namespace (its context's; empty on a single-user install) as placeholders.
    kfp.Client itself may first ask /healthz whether the install is multi-user."""
    upload = {"uploadfile": os.path.abspath(submission.compiled_path)}
    if submission.enable_caching is not None:
        upload["every_task_enable_cache"] = submission.enable_caching
    return [
        {"call": "get_pipeline_id", "method": "GET", "path": f"{KFP_API}/pipelines",
         "filter": {"display_name": plan.pipeline_name}},
        {"call": "upload_pipeline", "only_if": "no pipeline has this name", "method": "POST",
         "path": f"{KFP_API}/pipelines/upload", "query": {"name": plan.pipeline_name}, **upload},
        {"call": "upload_pipeline_version", "method": "POST",
         "path": f"{KFP_API}/pipelines/upload_version",
         "query": {"name": plan.version_name, "pipelineid": "<pipeline_id>"}, **upload},
        {"call": "get_experiment", "method": "GET", "path": f"{KFP_API}/experiments",
         "filter": {"display_name": plan.experiment}, "query": {"namespace": "<namespace>"}},
        {"call": "create_experiment", "only_if": "no experiment has this name", "method": "POST",
         "path": f"{KFP_API}/experiments",
         "body": {"display_name": plan.experiment, "namespace": "<namespace>"}},
        {"call": "run_pipeline", "method": "POST", "path": f"{KFP_API}/runs",
         "body": kfp_run_body(submission, plan, PLACEHOLDER_IDS)},
    ]  # fmt: skip


@contextlib.contextmanager
def _kfp_package(submission: Submission):
    """The file to upload: the compiled YAML, or with `enable_caching` a copy with every task's
    cachingOptions set (what kfp.Client does to a package it runs; a run of an uploaded version
    would ignore the setting)."""
    if submission.enable_caching is None:
        yield submission.compiled_path
        return
    import yaml

    with open(submission.compiled_path) as handle:
        spec = yaml.safe_load(handle)
    for task in spec["root"]["dag"]["tasks"].values():
        task["cachingOptions"] = {"enableCache": submission.enable_caching}
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, os.path.basename(submission.compiled_path))
        with open(path, "w") as handle:
            yaml.safe_dump(spec, handle, sort_keys=True)
        yield path


def submit_kubeflow(
    submission: Submission,
    host: str,
    *,
    dry_run: bool = False,
    wait: bool = False,
    poll_seconds: float = 10.0,
) -> dict:
    """Upload the compiled YAML (the pipeline if new, then a version), find or create the
    experiment, and start a run of that version with the parameters; with `wait`, follow it to
    its end and raise RunFailed unless it succeeded."""
    host = check_host(host)
    plan = kfp_plan(submission)
    document = {"target": "kubeflow", "host": host, "requests": kfp_requests(submission, plan)}
    if dry_run:
        return document
    import kfp

    client = kfp.Client(host=host)
    with _kfp_package(submission) as package:
        pipeline_id = client.get_pipeline_id(plan.pipeline_name)
        if pipeline_id is None:
            pipeline_id = client.upload_pipeline(package, plan.pipeline_name).pipeline_id
        version = client.upload_pipeline_version(
            package, plan.version_name, pipeline_id=pipeline_id
        )
    experiment = client.create_experiment(plan.experiment)
    run = client.run_pipeline(
        experiment_id=experiment.experiment_id,
        job_name=plan.run_name,
        params=plan.parameters,
        pipeline_id=pipeline_id,
        version_id=version.pipeline_version_id,
        pipeline_root=submission.pipeline_root,
        service_account=submission.service_account,
    )
    document.update(
        pipeline_id=pipeline_id,
        pipeline_version_id=version.pipeline_version_id,
        experiment_id=experiment.experiment_id,
        run_id=run.run_id,
    )
    if wait:
        document["state"] = follow_kfp(client, run.run_id, poll_seconds)
    return document


def follow_kfp(client, run_id: str, poll_seconds: float) -> str:
    """Poll the run until a final state; that state, or RunFailed naming it."""
    while True:
        state = (client.get_run(run_id).state or "").upper()
        if state in KFP_FINAL_STATES:
            break
        time.sleep(poll_seconds)
    if state != KFP_SUCCEEDED:
        raise RunFailed(f"KFP run {run_id} ended {state}")
    return state
