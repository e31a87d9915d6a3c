"""The filesystem of a URI, the one factory the source's listing and reading and the Examples
artifact's readers use: pyarrow's for gs://, s3:// and the like, the local one for paths; gs://
served by the GCS emulator that STORAGE_EMULATOR_HOST names, where it is set."""

from __future__ import annotations

import os
import posixpath
import urllib.parse

import pyarrow.fs as pafs


def resolve_filesystem(uri: str) -> tuple[pafs.FileSystem, str]:
    """`uri`'s filesystem and its path there (a local path made absolute)."""
    if "://" not in uri:
        return pafs.LocalFileSystem(), posixpath.abspath(uri)
    filesystem, path = pafs.FileSystem.from_uri(uri)
    emulator = os.environ.get("STORAGE_EMULATOR_HOST")
    if emulator and filesystem.type_name == "gcs":
        filesystem = _emulated_gcs(emulator)
    return filesystem, path


def _emulated_gcs(emulator: str) -> pafs.GcsFileSystem:
    """The GCS emulator at `emulator` (e.g. http://localhost:4443), anonymously.
    google-cloud-storage, and so Beam's gcsio that writes the output, sends gs:// there; pyarrow
    10's GcsFileSystem ignores STORAGE_EMULATOR_HOST (it would read real GCS, or retry for
    credentials for 15 minutes), so the input is read from the emulator the output goes to."""
    endpoint = urllib.parse.urlsplit(emulator if "://" in emulator else "http://" + emulator)
    return pafs.GcsFileSystem(
        anonymous=True, scheme=endpoint.scheme, endpoint_override=endpoint.netloc
    )
