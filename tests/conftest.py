"""Shared fixtures: small Parquet datasets written once per session (tests must not modify them)."""

import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

# As in every entry point: `tf.keras` is Keras 2 for TFX 1.16 and user modules, before any import
# of TensorFlow (tests/integration/test_keras2.py checks the entry points without it).
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

BUCKET = "bucket"  # the GCS emulator's bucket (the `gcs` fixture)

# A single in-process worker: a Beam pipeline then takes well under a second.
IN_MEMORY_BEAM = ["--direct_num_workers=1", "--direct_running_mode=in_memory"]


# The demo data's columns a small model trains on, where a test is about distribution,
# orchestration or resumption rather than features: tracing and exporting the 40-feature model
# costs about a minute per process, this one seconds.
FEW_COLUMNS = ["label", "I1", "I2", "C1", "C2", "price", "history"]


def few_features(schema, columns=FEW_COLUMNS):
    """`schema` with only the features `columns`."""
    small = type(schema)()
    small.CopyFrom(schema)
    del small.feature[:]
    small.feature.extend(f for f in schema.feature if f.name in columns)
    return small


def run_local_pipeline(tmp_path, name: str, components: list, **pipeline_args):
    """Run TFX components with TFX's BeamDagRunner and SQLite ML Metadata under `tmp_path` (one
    in-process Beam worker); returns `artifacts(type_name)`: that type's artifacts, oldest first."""
    from tfx import v1 as tfx
    from tfx.orchestration import metadata
    from tfx.orchestration.beam.beam_dag_runner import BeamDagRunner

    connection = metadata.sqlite_metadata_connection_config(str(tmp_path / "mlmd.sqlite"))
    BeamDagRunner().run(
        tfx.dsl.Pipeline(
            pipeline_name=name,
            pipeline_root=str(tmp_path / "root"),
            components=components,
            metadata_connection_config=connection,
            beam_pipeline_args=IN_MEMORY_BEAM,
            **pipeline_args,
        )
    )

    def artifacts(type_name: str) -> list:
        with metadata.Metadata(connection) as m:
            return sorted(m.store.get_artifacts_by_type(type_name), key=lambda a: a.id)

    return artifacts


def convert_to_examples(data: str, out: str, num_shards: int = 2, columnar_strings: bool = False):
    """ParquetExampleGen's conversion of `data` into `out` (default hash splits), as the tests'
    Examples, with columnar batches as in a TabularTrainer pipeline (holding the strings too
    with `columnar_strings`); returns the conversion's result."""
    from tfx_tabular.coders import columnar
    from tfx_tabular.conversion import convert, plan

    dataset, splits = plan.plan_conversion(data)
    options = plan.OutputOptions(
        num_shards=num_shards,
        columnar_batch_rows=columnar.DEFAULT_BATCH_ROWS,
        columnar_strings=columnar_strings,
    )
    return convert.convert(dataset, out, splits, options, IN_MEMORY_BEAM)


@pytest.fixture(scope="session", autouse=True)
def session_tempdir(tmp_path_factory):
    """The suite's temporary files (its subprocesses' too) under pytest's base folder, which
    pytest removes three sessions later. TFX's Beam executors, given `beam_pipeline_args`, package
    TFX itself (a 49 MB sdist) into a fresh temporary folder at every run and never remove it:
    gigabytes in /tmp per run of the suite otherwise."""
    folder = tmp_path_factory.mktemp("tmp")
    previous = os.environ.get("TMPDIR")
    os.environ["TMPDIR"] = str(folder)
    tempfile.tempdir = None  # re-read TMPDIR
    yield folder
    if previous is None:
        del os.environ["TMPDIR"]
    else:
        os.environ["TMPDIR"] = previous
    tempfile.tempdir = None


@pytest.fixture(scope="session")
def demo_dataset(tmp_path_factory) -> str:
    """The Criteo-shaped demo data: 3000 rows, day=2024-01-01..03, one file per day, row groups
    of 500 rows (6 row groups), plus the `_SUCCESS` marker Spark leaves."""
    from tfx_tabular.demo import criteo

    root = str(tmp_path_factory.mktemp("demo") / "data")
    criteo.write_dataset(root, 3000, days=3, files_per_day=1, row_group_size=500)
    return root


# (region, day, first id, row count) of each data file of the hive dataset.
HIVE_FILES = [("eu", 3, 0, 120), ("eu", 4, 120, 80), ("us", 3, 200, 150), ("us", 10, 350, 50)]
HIVE_JUNK = {  # files Spark / Hadoop / Hive leave beside the data: never read
    "_SUCCESS": b"",
    "_metadata": b"not a parquet file",
    "_common_metadata": b"PAR1 nope",
    "region=eu/day=3/.part.parquet.crc": b"\x00\x01crc",
    "region=us/_committed_1234": b"{}",
    "_temporary/0/part.parquet": b"garbage",
}


def hive_table(first_id: int, rows: int) -> pa.Table:
    ids = np.arange(first_id, first_id + rows, dtype=np.int64)
    return pa.table(
        {
            "id": pa.array(ids),
            "x": pa.array((ids * 0.5).astype(np.float64), mask=ids % 7 == 0),
            "s": pa.array([f"s{i % 5}" if i % 11 else "" for i in ids]),
            "tags": pa.array(
                [list(range(i % 4)) if i % 13 else None for i in ids], pa.list_(pa.int64())
            ),
        }
    )


@pytest.fixture(scope="session")
def hive_dataset(tmp_path_factory) -> str:
    """A two-level hive dataset, `region=<eu|us>/day=<n>/part.parquet` (day 10 sorts after 4 only
    as an integer), 400 rows with unique `id`s, row groups of 32 rows, and junk files beside it."""
    root = tmp_path_factory.mktemp("hive") / "data"
    for region, day, first, rows in HIVE_FILES:
        folder = root / f"region={region}" / f"day={day}"
        folder.mkdir(parents=True)
        pq.write_table(hive_table(first, rows), folder / "part.parquet", row_group_size=32)
    for name, content in HIVE_JUNK.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
    return str(root)


@pytest.fixture(scope="session")
def tfx_parquet_testdata() -> str:
    """The folder of TFX's own Parquet test file (the Chicago taxi sample, 10,000 rows)."""
    import tfx

    folder = os.path.join(
        os.path.dirname(tfx.__file__), "components", "testdata", "external", "parquet"
    )
    if not os.path.exists(os.path.join(folder, "data.parquet")):
        pytest.skip("tfx's testdata/external/parquet/data.parquet is not installed")
    return folder


# The GCS emulator (`gcp-storage-emulator`) on loopback, for every test that reads or writes gs://.


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_until_up(endpoint: str, proc: subprocess.Popen, log, seconds: float = 20) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            urllib.request.urlopen(endpoint + "/", timeout=1).read()  # the emulator's health check
            return
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"the GCS emulator did not start at {endpoint}:\n{log.read_text()[-2000:]}"
                ) from None
            time.sleep(0.1)


@pytest.fixture(scope="module")
def gcs(tmp_path_factory):
    """The emulator's bucket (a google.cloud.storage Bucket), with gs:// pointed at the emulator.

    A subprocess, not a server thread in this process: in-process, pyarrow's first upload once
    hung here.
    """
    from apache_beam.internal.gcp import auth as beam_auth

    folder = tmp_path_factory.mktemp("gcs")
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    log = folder / "emulator.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gcp_storage_emulator",
                "start",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--in-memory",
                "--default-bucket",
                BUCKET,
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        _wait_until_up(endpoint, proc, log)
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("STORAGE_EMULATOR_HOST", endpoint)
            # No credentials exist here and none may be used: with a credentials file that does not
            # exist, a gs:// access that bypasses the emulator fails at once (without it, pyarrow's
            # GcsFileSystem retries the metadata server for credentials for ~15 min, then fails).
            patch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(folder / "no-credentials.json"))
            # Without credentials Beam's gcsio retries google.auth.default() 4 times with backoff
            # (about 22 s here) and then connects anonymously, which the emulator needs: skip to
            # that result.
            patch.setattr(beam_auth, "get_service_credentials", lambda pipeline_options: None)
            from google.cloud import storage

            yield storage.Client.create_anonymous_client().bucket(BUCKET)
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.fixture(scope="module")
def tf_gcs(gcs, tmp_path_factory):
    """`gcs`, with TensorFlow's own GCS file system (tf.io.gfile, so TFX's fileio, Keras
    checkpoints, TensorBoard and SavedModel export) reaching the emulator through
    tests/gcs_proxy.py (which says why a proxy); in this process and its subprocesses."""
    folder = tmp_path_factory.mktemp("gcs_proxy")
    port, ca_file = free_port(), folder / "ca.pem"
    log = folder / "proxy.log"
    proxy_script = os.path.join(os.path.dirname(__file__), "gcs_proxy.py")
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, proxy_script, str(port), os.environ["STORAGE_EMULATOR_HOST"], ca_file],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 20
        while b"ready" not in log.read_bytes():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the GCS proxy did not start:\n{log.read_text()[-2000:]}")
            time.sleep(0.1)
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("https_proxy", f"http://127.0.0.1:{port}")
            patch.setenv("no_proxy", "127.0.0.1,localhost")
            patch.setenv("CURL_CA_BUNDLE", str(ca_file))
            patch.setenv("GOOGLE_AUTH_TOKEN_FOR_TESTING", "emulator")  # TF asks no server
            # google-auth's default credentials from the proxy's metadata server (for gcsio).
            patch.delenv("GOOGLE_APPLICATION_CREDENTIALS")
            patch.setenv("GCE_METADATA_HOST", f"127.0.0.1:{port}")
            patch.setenv("GCE_METADATA_IP", f"127.0.0.1:{port}")
            yield gcs
    finally:
        proc.terminate()
        proc.wait(10)


def upload(bucket, local_root: str, prefix: str, damage=None) -> list:
    """Upload a local folder's files under `prefix/`; `damage(relative, data)` may alter one."""
    names = []
    for folder, _, files in os.walk(local_root):
        for name in sorted(files):
            path = os.path.join(folder, name)
            relative = os.path.relpath(path, local_root).replace(os.sep, "/")
            with open(path, "rb") as f:
                data = f.read()
            if damage:
                data = damage(relative, data)
            bucket.blob(f"{prefix}/{relative}").upload_from_string(data)
            names.append(relative)
    return sorted(names)


@pytest.hookimpl(wrapper=True)  # marks before pytest-xdist's own reads the groups, checks after
def pytest_collection_modifyitems(config, items):
    """For `make test`'s pytest-xdist workers (`--dist loadgroup`): tests that share a
    module-scoped fixture (a pipeline run, a server, converted data) form one group, run by one
    worker, so that fixture is built once; every other test is dealt out alone. The `slow` tests
    (other processes: pipelines, servers) go first, the quick ones fill in at the end, so no long
    test starts last. Every integration test is `slow` (TFX pipelines, Beam, subprocesses)."""
    for item in items:
        if "integration" in item.path.parts:
            item.add_marker(pytest.mark.slow)
        fixtures = getattr(item, "_fixtureinfo", None)
        if fixtures is None:
            continue
        shared = sorted(
            name
            for name, defs in fixtures.name2fixturedefs.items()
            if any(d.scope == "module" for d in defs)
        )
        if shared:
            item.add_marker(pytest.mark.xdist_group(f"{item.module.__name__}:{','.join(shared)}"))
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
    yield
    _check_groups_kept(config, items)


_LOST_GROUPS = pytest.StashKey[str]()


def _check_groups_kept(config, items) -> None:
    """Note it if pytest-xdist dropped the groups (it writes them into node ids, which pytest 9.2
    ignores: pytest-xdist#1386): every worker would build every shared fixture itself, racing the
    others over what they make once. A worker's own collection error is lost in pytest-xdist's
    controller, so `groups_kept` fails the tests instead."""
    if not getattr(config.option, "loadgroup", False):
        return
    lost = [i.nodeid for i in items if i.get_closest_marker("xdist_group") and "@" not in i.nodeid]
    if lost:
        config.stash[_LOST_GROUPS] = (
            f"pytest-xdist's --dist loadgroup lost the test groups (first: {lost[0]}); "
            "use the pytest this project's uv.lock pins"
        )


@pytest.fixture(scope="session", autouse=True)
def groups_kept(request):
    """Set up before any shared fixture (session scope), so none is built when groups are lost."""
    message = request.config.stash.get(_LOST_GROUPS, None)
    if message:
        pytest.fail(message, pytrace=False)
