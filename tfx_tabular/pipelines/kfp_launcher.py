"""`run-compiled --launcher kfp`: a task's inputs and outputs as the open-source KFP v2 driver and
launcher handle them (kubeflow/pipelines backend/src/v2, read at 2.17.0; unchanged since 2.0):

- outputs: `<root>/<pipeline>/<run id>/<task>/<uuid>/<output>`, named by the output key, typed
  with the output spec's type verbatim; the ExecutorOutput file on the pod's local disk
  (driver/driver.go `provisionOutputs`);
- before the command, every input artifact's objects are downloaded to the pod's local disk,
  listed with no delimiter, failing on a zero-byte directory marker exactly as
  objectstore/object_store.go `DownloadBlob` does (kubeflow/pipelines#13476);
- after it, only `uri` and `metadata` of the reported artifact are merged
  (component/launcher_v2.go `mergeRuntimeArtifacts`), a local output folder is uploaded if there
  is one, and the artifact goes through ML Metadata (metadata/converter.go): every metadata field
  a custom property (lists and structs wrapped one level, booleans 0/1, numbers doubles), plus
  the launcher's `display_name` and `store_session_info`;
- downstream, it comes back named by its numeric ML Metadata id, with `type: {instanceSchema: ""}`
  (metadata/client.go `GetOutputArtifactsByExecutionId` leaves the schema empty).

Here the pod's local disk is a folder per task; the object store is GCS for a gs:// root, or a
local folder standing in for one (a real backend supports gs://, s3:// and minio:// only).
"""

from __future__ import annotations

import os
import shutil
import uuid
from typing import Dict, List

# What the launcher records as store_session_info for a bucket configured from the environment
# (recorded for the local stand-in store too).
STORE_SESSION_INFO = '{"Provider":"gs","Params":{"fromEnv":"true"}}'


class LauncherError(RuntimeError):
    pass


def local_path_for_uri(pod_disk: str, uri: str) -> str:
    """launcher_v2.go `LocalPathForURI` (gs://b/k → /gcs/b/k), under the pod's folder; a local
    object-store folder maps to /local/<its path>."""
    if uri.startswith("gs://"):
        return os.path.join(pod_disk, "gcs", uri[len("gs://") :])
    if "://" in uri:
        raise LauncherError(f"unsupported storage scheme: {uri}")
    return os.path.join(pod_disk, "local", os.path.abspath(uri).lstrip("/"))


def _mkdir_all(path: str) -> None:
    """Go's os.MkdirAll: a file in the way fails naming that file."""
    existing = path
    while not os.path.lexists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        raise LauncherError(f"mkdir {existing}: not a directory")
    os.makedirs(path, exist_ok=True)


class ObjectStore:
    """The pipeline root's object store: GCS (google-cloud-storage) or a local folder."""

    def __init__(self, pipeline_root: str):
        self.gcs = pipeline_root.startswith("gs://")
        if self.gcs:
            from google.cloud import storage

            self.client = storage.Client()

    def bucket_and_key(self, uri: str):
        if self.gcs:
            bucket, _, key = uri[len("gs://") :].partition("/")
            return self.client.bucket(bucket), key
        return None, os.path.abspath(uri)

    def list(self, uri: str) -> List[tuple]:
        """(key, size) of every object whose key starts with the URI's key, in the store's
        lexicographic order (GCS lists so; a folder's files are sorted to match)."""
        bucket, key = self.bucket_and_key(uri)
        if self.gcs:
            return sorted((b.name, b.size or 0) for b in bucket.list_blobs(prefix=key))
        found = []
        parent = os.path.dirname(key)
        for folder, _, files in os.walk(parent) if os.path.isdir(parent) else ():
            for name in files:
                path = os.path.join(folder, name)
                if path.startswith(key):
                    found.append((path, os.path.getsize(path)))
        return sorted(found)

    def download(self, uri: str, key: str, local_path: str) -> None:
        bucket, _ = self.bucket_and_key(uri)
        if self.gcs:
            bucket.blob(key).download_to_filename(local_path)
        else:
            shutil.copyfile(key, local_path)

    def upload(self, local_dir: str, uri: str) -> None:
        bucket, key = self.bucket_and_key(uri)
        for folder, _, files in os.walk(local_dir):
            for name in files:
                path = os.path.join(folder, name)
                target = os.path.join(key, os.path.relpath(path, local_dir))
                if self.gcs:
                    bucket.blob(target).upload_from_filename(path)
                else:
                    os.makedirs(os.path.dirname(target), exist_ok=True)
                    shutil.copyfile(path, target)


def download_blob(store: ObjectStore, uri: str, local_dir: str) -> int:
    """object_store.go `DownloadBlob`: every object under the URI's key to `local_dir`, by its
    key relative to the URI's (a marker `key/` is relative ".", so it becomes a file at
    `local_dir`, and the next object's directory cannot be made). Returns the bytes copied."""
    _, blob_dir = store.bucket_and_key(uri)
    blob_dir = blob_dir.rstrip("/")
    copied = 0
    for key, size in store.list(uri):
        if key != blob_dir and not key.startswith(blob_dir + "/"):
            continue  # isBlobKeyUnderPrefix: another artifact whose key shares the prefix
        local_path = os.path.normpath(os.path.join(local_dir, os.path.relpath(key, blob_dir)))
        folder = os.path.dirname(local_path)
        try:
            _mkdir_all(folder)
        except LauncherError as e:
            raise LauncherError(
                f'downloadFile(): unable to complete copying "{key}" to local storage '
                f'"{local_path}": failed to create local directory "{folder}": {e}'
            ) from None
        store.download(uri, key, local_path)
        copied += size
    return copied


def through_ml_metadata(value):
    """A metadata value as ML Metadata hands it back (converter.go toMLMDArtifact, then
    toRuntimeArtifact)."""
    if isinstance(value, bool):
        return float(value)  # stored as int 0/1, read back as a number
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return {"list": value}
    if isinstance(value, dict):
        return {"struct": value}
    raise LauncherError(f"unknown/unsupported value type {type(value).__name__}")


class KfpLauncher:
    """The driver's and launcher's part of one pipeline run (see the module)."""

    pre_cache_check = False  # the open-source backend never runs a lifecycle preCacheCheck

    def __init__(self, pipeline_root: str, pipeline_name: str, pod_root: str):
        self.run_root = f"{pipeline_root.rstrip('/')}/{pipeline_name}/{uuid.uuid4()}"
        self.store = ObjectStore(pipeline_root)
        self.pod_root = pod_root
        self.next_id = 1
        self.downloaded: Dict[str, int] = {}  # bytes copied to each task's local disk

    def pod_disk(self, task: str) -> str:
        return os.path.join(self.pod_root, task)

    def log_path(self, task: str) -> str:
        return os.path.join(self.pod_disk(task), "executor.log")

    def provision_outputs(self, task: str, component, outputs) -> None:
        """driver.go provisionOutputs, into an ExecutorInput's `outputs`."""
        task_root = f"{self.run_root}/{task}/{uuid.uuid4()}"
        for key, artifact_spec in component.output_definitions.artifacts.items():
            outputs.artifacts[key].artifacts.add(
                name=key, uri=f"{task_root}/{key}", type=artifact_spec.artifact_type
            )
        outputs.output_file = os.path.join(
            local_path_for_uri(self.pod_disk(task), task_root), "output_metadata.json"
        )
        if not self.store.gcs:  # a folder needs the directories an object store does without
            for artifact_list in outputs.artifacts.values():
                os.makedirs(artifact_list.artifacts[0].uri)

    def before_command(self, task: str, executor_input) -> None:
        """launcher_v2.go downloadArtifacts, then prepareOutputFolders."""
        disk = self.pod_disk(task)
        os.makedirs(disk, exist_ok=True)
        self.downloaded[task] = 0
        for name, artifact_list in executor_input.inputs.artifacts.items():
            for artifact in artifact_list.artifacts:
                try:
                    self.downloaded[task] += download_blob(
                        self.store, artifact.uri, local_path_for_uri(disk, artifact.uri)
                    )
                except LauncherError as e:
                    raise LauncherError(
                        f'failed to download input artifact "{name}" from remote storage URI '
                        f'"{artifact.uri}": {e}'
                    ) from None
        for artifact_list in executor_input.outputs.artifacts.values():
            local = local_path_for_uri(disk, artifact_list.artifacts[0].uri)
            os.makedirs(os.path.dirname(local), exist_ok=True)

    def record_outputs(self, task: str, executor_input, executor_output) -> dict:
        """Merge, upload and publish each output (launcher_v2.go uploadOutputArtifacts); returns
        {output key: the RuntimeArtifact a downstream driver resolves}. The task's downloaded
        inputs are removed from its local disk (the pod is gone); its log stays."""
        from google.protobuf import json_format
        from kfp.pipeline_spec import pipeline_spec_pb2

        recorded = {}
        for key, artifact_list in executor_input.outputs.artifacts.items():
            artifact = artifact_list.artifacts[0]
            for reported in executor_output.artifacts[key].artifacts[:1]:
                if reported.uri:
                    artifact.uri = reported.uri
                artifact.metadata.update(json_format.MessageToDict(reported.metadata))
            local = local_path_for_uri(self.pod_disk(task), artifact.uri)
            if os.path.isdir(local):
                self.store.upload(local, artifact.uri)
            metadata = {
                k: through_ml_metadata(v)
                for k, v in json_format.MessageToDict(artifact).get("metadata", {}).items()
            }
            metadata.setdefault("display_name", key)
            metadata.setdefault("store_session_info", STORE_SESSION_INFO)
            downstream = pipeline_spec_pb2.RuntimeArtifact(
                name=str(self.next_id), uri=artifact.uri, type={"instance_schema": ""}
            )
            downstream.metadata.update(metadata)
            recorded[key] = downstream
            self.next_id += 1
        for scheme in ("gcs", "local"):
            shutil.rmtree(os.path.join(self.pod_disk(task), scheme), ignore_errors=True)
        return recorded
