"""`submit`: the requests sent to Vertex AI (aiplatform's public PipelineJob) and to a Kubeflow
Pipelines v2 API server (kfp.Client), their dry runs, and following a run to its end.

No cloud project or KFP server is reachable here. Vertex requests are built offline with
anonymous credentials. For KFP, beyond the dry run, the real kfp.Client talks to a small HTTP
server on loopback that records each request it receives and answers as the KFP v2 API would
(the ids and states it returns are canned: it checks what the client sends, not a backend)."""

import http.server
import json
import re
import threading
import urllib.parse

import pytest
import yaml

from tfx_tabular import cli
from tfx_tabular.pipelines import create_pipeline, kubeflow, submit

IMAGE = "us-docker.pkg.dev/example/repo/tfx-tabular:1.0"
DATA_ROOT = "gs://tfx-tabular-no-such-bucket/data"
PIPELINE_ROOT = "gs://tfx-tabular-no-such-bucket/root"
SERVICE_ACCOUNT = "runner@my-project.iam.gserviceaccount.com"
# The flags both targets take, dry run.
RUN_FLAGS = (
    f"--service-account={SERVICE_ACCOUNT}",
    "--experiment=tabular-exp",
    "--pipeline-root=gs://other/root",
    "--display-name=nightly",
    "--dry-run",
)


def _compile(tmp_path_factory, target: str, name: str) -> str:
    path = str(tmp_path_factory.mktemp(target) / name)
    pipeline = create_pipeline("tabular-submit", PIPELINE_ROOT, DATA_ROOT, batch_size=64)
    kubeflow.compile_pipeline(pipeline, target, IMAGE, path)
    return path


@pytest.fixture(scope="module")
def vertex_json(tmp_path_factory):
    return _compile(tmp_path_factory, "vertex", "pipeline.json")


@pytest.fixture(scope="module")
def kubeflow_yaml(tmp_path_factory):
    return _compile(tmp_path_factory, "kubeflow", "pipeline.yaml")


def _submit(capsys, *argv) -> tuple:
    code = cli.main(["submit", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _tasks(spec: dict) -> dict:
    return spec["root"]["dag"]["tasks"]


def test_vertex_dry_run_prints_the_create_request_with_every_setting(vertex_json, capsys):
    code, out, err = _submit(
        capsys,
        vertex_json,
        "--project=my-project",
        "--region=europe-west4",
        "--param=data_root=gs://other/data",
        "--param=epochs=3",
        "--param=learning_rate=0.01",
        "--labels=team=ml",
        "--labels=cost-center=42",
        "--no-enable-caching",
        *RUN_FLAGS,
    )
    assert code == 0, err
    document = json.loads(out)
    assert document["target"] == "vertex" and document["experiment"] == "tabular-exp"
    request = document["request"]
    assert request["parent"] == "projects/my-project/locations/europe-west4"
    assert request["pipelineJobId"].startswith("tabular-submit-")
    job = request["pipelineJob"]
    assert job["displayName"] == "nightly"
    assert job["labels"] == {"team": "ml", "cost-center": "42"}
    assert job["serviceAccount"] == SERVICE_ACCOUNT
    assert job["runtimeConfig"] == {
        "gcsOutputDirectory": "gs://other/root",
        "parameterValues": {"data_root": "gs://other/data", "epochs": 3.0, "learning_rate": 0.01},
    }
    assert {t["cachingOptions"]["enableCache"] for t in _tasks(job["pipelineSpec"]).values()} == {
        False
    }


def test_vertex_without_caching_flags_keeps_the_compiled_settings(vertex_json):
    document = submit.submit_vertex(
        submit.Submission(vertex_json), "p", "us-central1", dry_run=True
    )
    job = document["request"]["pipelineJob"]
    assert "serviceAccount" not in job and "labels" not in job
    assert job["runtimeConfig"] == {"gcsOutputDirectory": PIPELINE_ROOT}  # defaults: compiled
    caching = {
        n: t["cachingOptions"]["enableCache"] for n, t in _tasks(job["pipelineSpec"]).items()
    }
    assert caching == {"ParquetExampleGen": False, "ParquetSchemaGen": True, "TabularTrainer": True}


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--region=mars-north1"], "--region 'mars-north1' is not a Vertex AI region"),
        (["--region=us-central1", "--param=epoch=2"], "--param: 'epoch' is not a parameter"),
        (["--region=us-central1", "--param=epochs=two"], "'two' is not a NUMBER_INTEGER"),
        (["--region=us-central1", "--labels=Team=ml"], "--labels Team=ml: keys and values"),
        (["--region=us-central1", "--labels=team"], "--labels takes KEY=VALUE"),
        (["--region=us-central1", "--host=http://kfp:8888"], "takes --project and --region"),
        ([], "takes --project and --region"),
    ],
)
def test_vertex_usage_errors_exit_2_before_anything_is_sent(vertex_json, capsys, argv, message):
    code, _, err = _submit(capsys, vertex_json, "--project=p", *argv, "--dry-run")
    assert code == 2
    assert message in err and "Traceback" not in err


def _upload(path: str, query: dict) -> dict:
    return {"query": query, "uploadfile": path}


def test_kubeflow_dry_run_prints_the_upload_version_experiment_and_run_requests(
    kubeflow_yaml, capsys
):
    code, out, err = _submit(
        capsys,
        kubeflow_yaml,
        "--target=kubeflow",
        "--host=http://kfp.example:8888/",
        "--param=batch_size=128",
        *RUN_FLAGS,
    )
    assert code == 0, err
    document = json.loads(out)
    assert document["host"] == "http://kfp.example:8888"
    calls = {r["call"]: r for r in document["requests"]}
    assert [r["call"] for r in document["requests"]] == [
        "get_pipeline_id",
        "upload_pipeline",
        "upload_pipeline_version",
        "get_experiment",
        "create_experiment",
        "run_pipeline",
    ]
    assert calls["get_pipeline_id"]["filter"] == {"display_name": "tabular-submit"}
    assert calls["upload_pipeline"]["query"] == {"name": "tabular-submit"}
    assert calls["upload_pipeline"]["uploadfile"] == kubeflow_yaml
    version = calls["upload_pipeline_version"]["query"]
    assert (
        version["name"].startswith("tabular-submit-") and version["pipelineid"] == "<pipeline_id>"
    )
    assert calls["create_experiment"]["body"]["display_name"] == "tabular-exp"
    assert calls["run_pipeline"]["body"] == {
        "display_name": "nightly",
        "experiment_id": "<experiment_id>",
        "pipeline_version_reference": {
            "pipeline_id": "<pipeline_id>",
            "pipeline_version_id": "<pipeline_version_id>",
        },
        "runtime_config": {"pipeline_root": "gs://other/root", "parameters": {"batch_size": 128}},
        "service_account": SERVICE_ACCOUNT,
    }


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--host=kfp:8888"], "--host must be the KFP API server's http:// or https:// URL"),
        ([], "--host must be the KFP API server's"),
        (["--host=http://kfp", "--labels=team=ml"], "KFP runs have no labels"),
        (["--host=http://kfp", "--param=learning_rate=fast"], "'fast' is not a NUMBER_DOUBLE"),
        (["--host=http://kfp", "--region=us-central1"], "--project / --region are for"),
    ],
)
def test_kubeflow_usage_errors_exit_2(kubeflow_yaml, capsys, argv, message):
    code, _, err = _submit(capsys, kubeflow_yaml, "--target=kubeflow", *argv, "--dry-run")
    assert code == 2
    assert message in err and "Traceback" not in err


def test_kubeflow_refuses_a_vertex_pipeline_job(vertex_json, capsys):
    code, _, err = _submit(capsys, vertex_json, "--target=kubeflow", "--host=http://kfp")
    assert code == 2 and "is a Vertex PipelineJob" in err


class _RecordingKfp(http.server.BaseHTTPRequestHandler):
    """Answers the KFP v2 API calls kfp.Client makes, recording each request."""

    def log_message(self, *args):
        pass

    def _reply(self, document: dict) -> None:
        body = json.dumps(document).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _record(self, body: bytes = b"") -> tuple:
        url = urllib.parse.urlsplit(self.path)
        query = dict(urllib.parse.parse_qsl(url.query, keep_blank_values=True))
        self.server.requests.append(
            {"method": self.command, "path": url.path, "query": query, "body": body}
        )
        return url.path, query

    def do_GET(self):
        path, query = self._record()
        state = self.server.state
        if path.endswith("/healthz"):
            self._reply({"multi_user": False})
        elif path.endswith("/pipelines"):
            self._reply({"pipelines": state["pipelines"]} if state["pipelines"] else {})
        elif path.endswith("/experiments"):
            self._reply({})
        elif path.startswith("/apis/v2beta1/runs/"):
            self._reply({"run_id": path.rsplit("/", 1)[1], "state": state["states"].pop(0)})
        else:
            self.send_error(404)

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        path, query = self._record(body)
        if path.endswith("/pipelines/upload"):
            self._reply({"pipeline_id": "p-new", "display_name": query["name"]})
        elif path.endswith("/pipelines/upload_version"):
            self._reply({"pipeline_id": query["pipelineid"], "pipeline_version_id": "v-1"})
        elif path.endswith("/experiments"):
            self._reply({"experiment_id": "e-1", **json.loads(body)})
        elif path.endswith("/runs"):
            self._reply({"run_id": "r-1", "state": "PENDING", **json.loads(body)})
        else:
            self.send_error(404)


@pytest.fixture
def kfp_server():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _RecordingKfp)
    server.requests, server.state = [], {"pipelines": [], "states": ["SUCCEEDED"]}
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def _host(server) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}"


def _sent(server, method: str, suffix: str) -> list:
    return [r for r in server.requests if r["method"] == method and r["path"].endswith(suffix)]


def _untimed(document):
    """`document` with the UTC times in version and run names (dry run and real run may be a
    second apart) replaced by `<utc>`."""
    return json.loads(re.sub(r"-\d{14}", "-<utc>", json.dumps(document)))


def test_kfp_client_sends_what_the_dry_run_shows(kubeflow_yaml, kfp_server):
    submission = submit.Submission(
        kubeflow_yaml,
        parameters={"data_root": "gs://other/data", "epochs": "2"},
        service_account="pipeline-runner",
        experiment="tabular-exp",
    )
    planned = submit.submit_kubeflow(submission, _host(kfp_server), dry_run=True)["requests"]
    done = submit.submit_kubeflow(submission, _host(kfp_server), wait=True, poll_seconds=0)

    assert done["state"] == "SUCCEEDED" and done["run_id"] == "r-1"
    ids = {"<pipeline_id>": "p-new", "<pipeline_version_id>": "v-1", "<experiment_id>": "e-1"}
    ids["<namespace>"] = ""  # kfp.Client's, from its context file: none here
    text = json.dumps(_untimed(planned))
    for placeholder, value in ids.items():
        text = text.replace(placeholder, value)
    planned = {r["call"]: r for r in json.loads(text)}
    compiled = open(kubeflow_yaml, "rb").read()
    for call, suffix in (
        ("upload_pipeline", "/upload"),
        ("upload_pipeline_version", "/upload_version"),
    ):
        [sent] = _sent(kfp_server, "POST", suffix)
        assert _untimed(sent["query"]) == planned[call]["query"]
        assert compiled in sent["body"]  # the compiled file itself, as the multipart upload
    [lookup] = _sent(kfp_server, "GET", "/pipelines")
    assert json.loads(lookup["query"]["filter"])["predicates"][0]["stringValue"] == "tabular-submit"
    [experiment_lookup] = _sent(kfp_server, "GET", "/experiments")
    assert (
        experiment_lookup["query"]["namespace"] == planned["get_experiment"]["query"]["namespace"]
    )
    [experiment] = _sent(kfp_server, "POST", "/experiments")
    assert json.loads(experiment["body"]) == planned["create_experiment"]["body"]
    [run] = _sent(kfp_server, "POST", "/runs")
    run_body = json.loads(run["body"])
    assert _untimed(run_body) == planned["run_pipeline"]["body"]
    assert run_body["runtime_config"]["parameters"] == {"data_root": "gs://other/data", "epochs": 2}
    assert [r["path"] for r in kfp_server.requests][-1] == "/apis/v2beta1/runs/r-1"


def test_an_existing_pipeline_gets_a_new_version_and_the_run_is_followed_to_its_end(
    kubeflow_yaml, kfp_server
):
    kfp_server.state["pipelines"] = [{"pipeline_id": "p-old", "display_name": "tabular-submit"}]
    kfp_server.state["states"] = ["PENDING", "RUNNING", "SUCCEEDED"]
    submission = submit.Submission(kubeflow_yaml, enable_caching=True)
    done = submit.submit_kubeflow(submission, _host(kfp_server), wait=True, poll_seconds=0)
    assert done["pipeline_id"] == "p-old" and done["state"] == "SUCCEEDED"
    assert not _sent(kfp_server, "POST", "/upload")
    [version] = _sent(kfp_server, "POST", "/upload_version")
    assert version["query"]["pipelineid"] == "p-old"
    # --enable-caching: the uploaded version has every task's cache on, ParquetExampleGen's too.
    uploaded = version["body"].split(b"\r\n\r\n", 1)[1].rsplit(b"\r\n--", 1)[0]
    tasks = _tasks(yaml.safe_load(uploaded))
    assert {t["cachingOptions"]["enableCache"] for t in tasks.values()} == {True}
    assert len(_sent(kfp_server, "GET", "/runs/r-1")) == 3


@pytest.mark.parametrize("final", ["FAILED", "CANCELED"])
def test_wait_exits_3_when_the_run_fails_or_is_cancelled(kubeflow_yaml, kfp_server, capsys, final):
    kfp_server.state["states"] = [final]
    code, _, err = _submit(
        capsys, kubeflow_yaml, "--target=kubeflow", f"--host={_host(kfp_server)}", "--wait"
    )
    assert code == 3
    assert f"KFP run r-1 ended {final}" in err


def test_wait_exits_0_when_the_run_succeeds(kubeflow_yaml, kfp_server, capsys):
    code, out, err = _submit(
        capsys, kubeflow_yaml, "--target=kubeflow", f"--host={_host(kfp_server)}", "--wait"
    )
    assert code == 0, err
    assert "submitted r-1: SUCCEEDED" in out


class _RecordingVertex(_RecordingKfp):
    """Answers aiplatform's REST calls: the pipeline root's bucket (absent: aiplatform creates
    it and grants the service account access), CreatePipelineJob, and GetPipelineJob with the
    next canned state."""

    def do_GET(self):
        path, _ = self._record()
        if path.endswith("/iam"):
            self._reply({"bindings": []})
        elif path.startswith("/storage/v1/b/"):
            self.send_error(404)
        else:
            states = self.server.state["states"]  # the last one stays: aiplatform reads it again
            state = states.pop(0) if len(states) > 1 else states[0]
            self._reply({"name": self.server.state["job"], "state": state, "error": {}})

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        path, _ = self._record(body)
        if path == "/storage/v1/b":
            self._reply(json.loads(body))
        else:
            self._reply({"name": self.server.state["job"], "state": "PIPELINE_STATE_PENDING"})

    def do_PUT(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self._record(body)
        self._reply(json.loads(body))


@pytest.mark.parametrize(
    "states, code",
    [
        (["PIPELINE_STATE_RUNNING", "PIPELINE_STATE_SUCCEEDED"], 0),
        (["PIPELINE_STATE_FAILED"], 3),
        (["PIPELINE_STATE_CANCELLED"], 3),
    ],
)
def test_vertex_submit_sends_the_dry_runs_job_and_wait_sets_the_exit_code(
    vertex_json, monkeypatch, capsys, states, code
):
    """The real aiplatform client, pointed at a loopback server through its public settings
    (aiplatform.init's api_endpoint and REST transport; the storage client's emulator host)."""
    from google.auth import credentials
    from google.cloud import aiplatform

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _RecordingVertex)
    job_name = "projects/my-project/locations/us-central1/pipelineJobs/j-1"
    server.requests, server.state = [], {"states": list(states), "job": job_name}
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", _host(server))
    monkeypatch.setattr(
        aiplatform.initializer, "global_config", type(aiplatform.initializer.global_config)()
    )
    aiplatform.initializer.global_config.init(  # aiplatform.init is the replaced config's
        api_endpoint=_host(server),
        api_transport="rest",
        credentials=credentials.AnonymousCredentials(),
    )
    argv = [
        vertex_json,
        "--project=my-project",
        "--region=us-central1",
        "--param=batch_size=16",
        "--labels=team=ml",
        f"--service-account={SERVICE_ACCOUNT}",
        "--wait",
    ]
    try:
        planned = json.loads(_submit(capsys, *argv, "--dry-run")[1])["request"]
        result, out, err = _submit(capsys, *argv)
    finally:
        server.shutdown()
        server.server_close()

    assert result == code, err
    [create] = _sent(server, "POST", "/pipelineJobs")
    assert create["path"] == f"/v1/{planned['parent']}/pipelineJobs"
    assert create["query"]["pipelineJobId"].startswith("tabular-submit-")
    assert json.loads(create["body"]) == planned["pipelineJob"]
    [bucket] = _sent(server, "POST", "/storage/v1/b")
    assert json.loads(bucket["body"])["name"] == "tfx-tabular-no-such-bucket"
    final = states[-1]
    if code:
        assert f"pipeline job {job_name} ended {final}" in err
    else:
        assert f"submitted {job_name}: {final}" in out
