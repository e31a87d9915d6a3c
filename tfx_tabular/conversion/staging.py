"""A conversion's staging folder, and the claim that makes one run its output folder's only
publisher (`publish` then moves the files).

Each run writes under `<output>/.tfx-tabular-incomplete/<run id>/`, beside an owner record (host,
process, start time), and only ever deletes that folder. Before publishing, a run claims the
output with a marker created only if absent (an exclusive create on local disks, a
`if_generation_match=0` upload on gs://): of two runs racing for one output folder one publishes,
the other stops with OutputTakenError and removes its own staging. A staging folder whose owner
process is gone (a killed run on this host) is removed by the next run; one it cannot prove dead
(another host, no owner record) is reported, never touched.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import posixpath
import socket
import time
import uuid
from typing import Optional

from apache_beam.io.filesystems import FileSystems

from tfx_tabular.source.errors import InputError

STAGING_DIR = ".tfx-tabular-incomplete"
OWNER_FILE = "owner.json"
# Created once, by the run that publishes; hidden from readers of `Split-*/` like _SUCCESS is.
PUBLISHED_MARKER = "_tfx_tabular_published.json"

log = logging.getLogger(__name__)


class OutputTakenError(InputError):
    """Another run published into the output folder first."""


def _process_start(pid: int) -> Optional[str]:
    """The kernel's start time of a process (tells a live process from a reused pid)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[19]
    except OSError:
        return None


def _owner() -> dict:
    return {
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "process_start": _process_start(os.getpid()),
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def _is_dead(owner: dict) -> bool:
    """Provably gone: on this host, and its process (pid and start time) no longer runs."""
    if owner.get("host") != socket.gethostname():
        return False
    return _process_start(int(owner["pid"])) != owner.get("process_start")


def _read_json(path: str) -> Optional[dict]:
    try:
        with FileSystems.open(path) as handle:
            return json.loads(handle.read())
    except Exception:  # missing or half-written: nothing can be proven from it
        return None


def delete_tree(folder: str) -> None:
    """Delete a folder and everything below it, on file systems and object stores alike."""
    if FileSystems.exists(folder):  # a real directory: deleted recursively
        FileSystems.delete([folder])
        return
    # On gs:// and s3:// a folder is only a name prefix: delete the objects under it.
    objects = FileSystems.match([folder.rstrip("/") + "/**"])[0].metadata_list
    if objects:
        FileSystems.delete([m.path for m in objects])


def _create_exclusively(path: str, data: bytes) -> bool:
    """Create `path` holding `data` unless it exists; False if it already did."""
    if "://" in path and FileSystems.exists(path):
        return False  # cheap, and the only guard on stores without create-if-absent
    if path.startswith("gs://"):
        from apache_beam.io.gcp import gcsio
        from google.api_core import exceptions

        bucket, name = path[len("gs://") :].split("/", 1)
        blob = gcsio.GcsIO().client.bucket(bucket).blob(name)
        try:
            blob.upload_from_string(data, if_generation_match=0)
        except exceptions.PreconditionFailed:
            return False
        return True
    if "://" in path:  # other object stores: no create-if-absent here (checked above)
        with FileSystems.create(path) as handle:
            handle.write(data)
        return True
    try:
        with open(path, "xb") as handle:
            handle.write(data)
    except FileExistsError:
        return False
    return True


@dataclasses.dataclass(frozen=True)
class Staging:
    output_dir: str
    run_id: str

    @property
    def folder(self) -> str:
        return posixpath.join(self.output_dir, STAGING_DIR, self.run_id)

    @classmethod
    def create(cls, output_dir: str) -> Staging:
        """A new run's staging folder, after removing those of runs killed on this host."""
        clean_abandoned(output_dir)
        staging = cls(output_dir, uuid.uuid4().hex)
        with FileSystems.create(posixpath.join(staging.folder, OWNER_FILE)) as handle:
            handle.write(json.dumps(_owner()).encode())
        return staging

    def claim(self, rows: dict) -> None:
        """Make this run the output's one publisher, or raise OutputTakenError."""
        marker = posixpath.join(self.output_dir, PUBLISHED_MARKER)
        record = json.dumps({"run_id": self.run_id, "rows": rows, **_owner()}).encode()
        if not _create_exclusively(marker, record):
            winner = _read_json(marker) or {}
            raise OutputTakenError(
                f"{self.output_dir}: another run (run {winner.get('run_id', '?')}, started "
                f"{winner.get('started', '?')} on {winner.get('host', '?')}) published into this "
                "folder first; this run's output was discarded and the published one kept"
            )

    def discard(self) -> None:
        """Remove this run's staging folder, and the staging parent if nothing else is in it."""
        delete_tree(self.folder)
        parent = posixpath.join(self.output_dir, STAGING_DIR)
        if "://" not in parent:
            try:
                os.rmdir(parent)
            except OSError:
                pass  # another run's staging is still there


def clean_abandoned(output_dir: str) -> list[str]:
    """Remove staging folders whose run is provably gone; log the others. Returns those left."""
    parent = posixpath.join(output_dir, STAGING_DIR)
    owners = FileSystems.match([posixpath.join(parent, "*", OWNER_FILE)])[0].metadata_list
    left = []
    for meta in owners:
        folder = posixpath.dirname(meta.path)
        owner = _read_json(meta.path)
        if owner is not None and _is_dead(owner):
            log.warning(
                "removing %s, left by a run that is gone (pid %s, started %s)",
                folder,
                owner.get("pid"),
                owner.get("started"),
            )
            delete_tree(folder)
        else:
            log.warning(
                "leaving %s alone: its run (%s) may still be running; delete it by hand "
                "if it is not",
                folder,
                owner or "no owner record",
            )
            left.append(folder)
    return left
