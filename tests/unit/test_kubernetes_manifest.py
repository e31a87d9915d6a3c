"""docs/kubernetes/data-service.yaml, checked statically (no cluster here): every container runs
a command line our CLI accepts, through the image's Python (its entry point is Beam's boot), the
workers reach the dispatcher through its Service, and the ports agree."""

from pathlib import Path

import yaml

from tfx_tabular.cli.app import build_parser

MANIFEST = Path(__file__).resolve().parents[2] / "docs" / "kubernetes" / "data-service.yaml"


def _documents() -> dict:
    return {(d["kind"], d["metadata"]["name"]): d for d in yaml.safe_load_all(MANIFEST.read_text())}


def _container(document: dict) -> dict:
    (container,) = document["spec"]["template"]["spec"]["containers"]
    return container


def _parsed(container: dict):
    assert container["command"] == ["python", "-m", "tfx_tabular.cli"]
    # Kubernetes expands $(POD_NAME) from the container's env before the command sees it.
    names = {variable["name"] for variable in container.get("env", [])}
    args = [
        a.replace("$(POD_NAME)", "workers-3") if "POD_NAME" in names else a
        for a in container["args"]
    ]
    return build_parser().parse_args(args)


def test_dispatcher_serves_on_the_port_its_service_exposes():
    documents = _documents()
    service = documents["Service", "tfx-tabular-dispatcher"]
    deployment = documents["Deployment", "tfx-tabular-dispatcher"]
    container = _container(deployment)
    args = _parsed(container)
    assert (args.command, args.role) == ("data-service", "dispatcher")
    (port,) = service["spec"]["ports"]
    assert args.port == port["targetPort"] == container["ports"][0]["containerPort"]
    assert service["spec"]["selector"] == deployment["spec"]["template"]["metadata"]["labels"]


def test_workers_register_at_stable_names_of_their_headless_service():
    documents = _documents()
    workers = documents["StatefulSet", "tfx-tabular-input-workers"]
    container = _container(workers)
    args = _parsed(container)
    assert (args.command, args.role) == ("data-service", "worker")
    (port,) = documents["Service", "tfx-tabular-dispatcher"]["spec"]["ports"]
    assert args.dispatcher == f"tfx-tabular-dispatcher:{port['port']}"
    # A pod's stable DNS name: <pod>.<the StatefulSet's headless Service>.
    headless = documents["Service", workers["spec"]["serviceName"]]
    assert headless["spec"]["clusterIP"] == "None"
    assert headless["spec"]["selector"] == workers["spec"]["template"]["metadata"]["labels"]
    assert args.host == f"workers-3.{workers['spec']['serviceName']}"
    assert (
        args.port == container["ports"][0]["containerPort"] == headless["spec"]["ports"][0]["port"]
    )
