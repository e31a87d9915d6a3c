"""The command of every compiled task: TFX's Kubeflow V2 container entry point
(`tfx.orchestration.kubeflow.v2.container.kubeflow_v2_run_executor`), made to run under the
open-source KFP v2 backend as well as Vertex AI.

Before TFX parses the ExecutorInput: the open-source driver resolves input artifacts from ML
Metadata without their type (`type: {instanceSchema: ""}` for task outputs, no type at all for
DAG inputs; backend/src/v2/metadata/client.go, converter.go), on which TFX 1.16's
`_retrieve_class_path` dies (UnboundLocalError 'title' / AttributeError; tensorflow/tfx#7768).
Such an input gets its type back from the component's inputs spec, which the compiled command
carries (`--json_serialized_inputs_spec_args`), and its list and struct metadata unwrapped from
the one extra level ML Metadata's round trip adds (`{"struct": {...}}`, `{"list": [...]}`).
Typed artifacts (Vertex AI's) pass unchanged.

After the executor: TensorFlow's GCS file system writes a zero-byte object `key/` for every
directory it makes (SavedModels, checkpoints, TensorBoard logs); the open-source launcher's
download of a downstream task's inputs fails on them before that task's command runs
(kubeflow/pipelines#13476). They are deleted at and under every gs:// output URI (the task fails
if any remain there), and above it (TF makes every level of a path).
"""

from __future__ import annotations

import sys
from typing import Iterable, List, Optional

INPUTS_SPEC_FLAG = "--json_serialized_inputs_spec_args"
# What ML Metadata's round trip wraps a list or struct value in (converter.go, toMLMDArtifact).
KFP_WRAPPERS = {"list": "list_value", "struct": "struct_value"}


class TaskInputError(ValueError):
    pass


def _type_title(artifact_type) -> Optional[str]:
    kind = artifact_type.WhichOneof("kind")
    if kind == "schema_title":
        return artifact_type.schema_title
    if kind == "instance_schema":
        import yaml

        schema = yaml.safe_load(artifact_type.instance_schema)
        return schema.get("title") if isinstance(schema, dict) else None
    return None  # no type, or a schema_uri, which TFX cannot map either


def needs_type(artifact_type) -> bool:
    """True for a type TFX cannot map to its artifact class: none, an empty or title-less
    instanceSchema, or a KFP `system.*` title."""
    title = _type_title(artifact_type)
    return not title or title.startswith("system.")


def _unwrap_kfp_value(value) -> None:
    if value.WhichOneof("kind") != "struct_value" or len(value.struct_value.fields) != 1:
        return
    [(wrapper, inner)] = value.struct_value.fields.items()
    if KFP_WRAPPERS.get(wrapper) == inner.WhichOneof("kind"):
        value.CopyFrom(inner)


def type_inputs(executor_input, inputs_spec) -> List[str]:
    """Give each untyped input artifact its type from `inputs_spec` (a ComponentInputsSpec, or
    None) and unwrap its metadata; returns the keys that needed it."""
    recovered = []
    for key, artifact_list in executor_input.inputs.artifacts.items():
        for artifact in artifact_list.artifacts:
            if not needs_type(artifact.type):
                continue
            if inputs_spec is None or key not in inputs_spec.artifacts:
                raise TaskInputError(
                    f"input artifact {key!r} ({artifact.uri}) has no TFX type, and the task's "
                    f"command declares none for it ({INPUTS_SPEC_FLAG}): compile with "
                    "tfx-tabular, which sets it"
                )
            artifact.type.CopyFrom(inputs_spec.artifacts[key].artifact_type)
            for value in artifact.metadata.fields.values():
                _unwrap_kfp_value(value)
            recovered.append(key)
    return recovered


def typed_invocation(invocation_json: str, inputs_spec_json: Optional[str]) -> str:
    """The ExecutorInput JSON with every input artifact typed (see `type_inputs`)."""
    from google.protobuf import json_format
    from kfp.pipeline_spec import pipeline_spec_pb2

    executor_input = json_format.Parse(
        invocation_json, pipeline_spec_pb2.ExecutorInput(), ignore_unknown_fields=True
    )
    inputs_spec = None
    if inputs_spec_json:
        inputs_spec = json_format.Parse(
            inputs_spec_json, pipeline_spec_pb2.ComponentInputsSpec(), ignore_unknown_fields=True
        )
    if not type_inputs(executor_input, inputs_spec):
        return invocation_json  # nothing to recover: TFX gets exactly what the backend sent
    return json_format.MessageToJson(executor_input, indent=None)


def _split_gs_uri(uri: str):
    bucket, _, key = uri[len("gs://") :].partition("/")
    return bucket, key.rstrip("/")


def directory_markers(client, uri: str) -> list:
    """The zero-byte `…/` objects at or under a gs:// URI (listed with no delimiter, as the
    launcher lists an artifact's objects)."""
    bucket, key = _split_gs_uri(uri)
    return [
        blob
        for blob in client.list_blobs(bucket, prefix=key + "/")
        if blob.name.endswith("/") and not blob.size
    ]


def _ancestor_markers(client, uri: str) -> list:
    """The markers TF left for the folders above the URI (`makedirs` makes every level): no
    launcher download lists them, but they are litter all the same."""
    bucket_name, key = _split_gs_uri(uri)
    bucket = client.bucket(bucket_name)
    parts = key.split("/")[:-1]
    names = ["/".join(parts[: i + 1]) + "/" for i in range(len(parts))]
    return [b for b in (bucket.get_blob(name) for name in names) if b is not None and not b.size]


def remove_directory_markers(uris: Iterable[str], client=None) -> int:
    """Delete the directory markers at, under and above each gs:// URI; returns how many. Fails
    naming the URI if any remain under it, since the next task's download would fail on them."""
    from google.api_core.exceptions import NotFound

    gs_uris = [uri for uri in uris if uri.startswith("gs://")]
    if not gs_uris:
        return 0
    if client is None:
        from google.cloud import storage

        client = storage.Client()
    removed = 0
    for uri in gs_uris:
        markers = directory_markers(client, uri) + _ancestor_markers(client, uri)
        for marker in {m.name: m for m in markers}.values():
            try:
                marker.delete()
                removed += 1
            except NotFound:  # a task running beside this one removed it first
                pass
        left = directory_markers(client, uri)
        if left:
            raise RuntimeError(
                f"directory markers remain under {uri}: {[b.name for b in left][:5]}"
            )
    return removed


def _output_uris(invocation_json: str) -> List[str]:
    import json

    outputs = json.loads(invocation_json).get("outputs", {}).get("artifacts", {})
    return [a.get("uri", "") for entry in outputs.values() for a in entry.get("artifacts", [])]


def _run(parsed_argv) -> None:
    from absl import logging
    from tfx.orchestration.kubeflow.v2.container import kubeflow_v2_run_executor

    args, beam_args = parsed_argv
    args.json_serialized_invocation_args = typed_invocation(
        args.json_serialized_invocation_args,
        getattr(args, INPUTS_SPEC_FLAG[2:], None),
    )
    kubeflow_v2_run_executor.main((args, beam_args))
    removed = remove_directory_markers(_output_uris(args.json_serialized_invocation_args))
    logging.info("removed %d directory-marker objects under the outputs", removed)


def main(argv: Optional[List[str]] = None) -> None:
    from absl import app
    from tfx.orchestration.kubeflow.v2.container import kubeflow_v2_run_executor

    # TFX's own flag parser: the same flags and Beam arguments as its entry point.
    app.run(_run, argv=argv or sys.argv, flags_parser=kubeflow_v2_run_executor._parse_flags)


if __name__ == "__main__":
    main()
