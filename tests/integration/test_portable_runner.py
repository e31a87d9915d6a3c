"""Beam's portable runner as Flink / Spark deployments on Kubernetes use it: a job service
(`--runner=PortableRunner --job_endpoint=embed`) and a SEPARATE SDK worker pool process
(`worker_pool_main`, `--environment_type=EXTERNAL`) on loopback, input and output on the GCS
emulator. The pool and its workers are other processes: they share nothing with the driver but
the emulator and the pipeline's pickled transforms.

Beam 2.61's Python job service runs one SDK worker per job (its FnApiRunner is built without the
options' worker count); two workers from one pool are Beam's FnApiRunner given the pool as its
default environment and `--direct_num_workers=2` (`two_worker_pipeline`).
"""

import os
import subprocess
import sys
import time
import types

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.runners.portability.fn_api_runner import FnApiRunner
from apache_beam.transforms.environments import ExternalEnvironment
from conftest import BUCKET, IN_MEMORY_BEAM, free_port, upload
from test_cli_errors import assert_nothing_left, assert_one_line_naming, inside_cases

from tfx_tabular.conversion import convert as conversion
from tfx_tabular.conversion import plan
from tfx_tabular.runners.worker_pool import start_local_pool
from tfx_tabular.runners.workers import TIMEOUT_VARIABLE
from tfx_tabular.source.dataset import open_dataset

pytestmark = pytest.mark.slow

VENV_BIN = os.path.dirname(sys.executable)
CLI = os.path.join(VENV_BIN, "tfx-tabular")


def _start_pool(folder, path: str) -> types.SimpleNamespace:
    """A worker pool process whose workers run `python` from `path`, pointed at the emulator as
    the driver is (the fixture set STORAGE_EMULATOR_HOST and the credentials file)."""
    log = folder / "pool.log"
    proc, port = start_local_pool(str(log), path, env=dict(os.environ, TF_USE_LEGACY_KERAS="1"))
    args = ["--runner=PortableRunner", "--job_endpoint=embed", "--environment_type=EXTERNAL"]
    args.append(f"--environment_config=localhost:{port}")
    return types.SimpleNamespace(proc=proc, log=log, port=port, args=args)


def _workers_started(pool) -> list[str]:
    return [line for line in pool.log.read_text().splitlines() if "Starting worker with" in line]


@pytest.fixture(scope="module")
def pool(gcs, tmp_path_factory):
    """A pool whose workers run the venv's python: the image's PATH (venv first)."""
    started = _start_pool(tmp_path_factory.mktemp("pool"), f"{VENV_BIN}:{os.environ['PATH']}")
    yield started
    started.proc.terminate()
    started.proc.wait(10)


@pytest.fixture(scope="module")
def broken_pool(gcs, tmp_path_factory):
    """A pool whose `python` is one without apache_beam (the venv left off its PATH)."""
    path = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if p != VENV_BIN)
    started = _start_pool(tmp_path_factory.mktemp("broken-pool"), path)
    yield started
    started.proc.terminate()
    started.proc.wait(10)


@pytest.fixture(scope="module")
def data(gcs, demo_dataset):
    upload(gcs, demo_dataset, "portable-data")
    return f"gs://{BUCKET}/portable-data"


def read_split(output_dir: str, name: str) -> list:
    import tensorflow as tf

    files = tf.io.gfile.glob(os.path.join(output_dir, f"Split-{name}", "*"))
    assert files, f"no shards in {output_dir}/Split-{name}"
    return [r.numpy() for r in tf.data.TFRecordDataset(files)]


def _cli(*args, timeout=300, **env) -> subprocess.CompletedProcess:
    return subprocess.run(
        [CLI, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=dict(os.environ, **env),
    )


def _download_split(gcs, prefix: str, name: str, folder) -> list:
    for blob in gcs.list_blobs(prefix=f"{prefix}/Split-{name}/"):
        path = folder / blob.name
        path.parent.mkdir(parents=True, exist_ok=True)
        blob.download_to_filename(str(path))
    return read_split(str(folder / prefix), name)


@pytest.fixture(scope="module")
def local_conversion(demo_dataset, tmp_path_factory):
    out = tmp_path_factory.mktemp("portable-local") / "out"
    options = plan.OutputOptions(num_shards=2)
    conversion.convert(open_dataset(demo_dataset), str(out), options=options)
    return str(out)


def test_convert_cli_runs_on_the_worker_pool_from_gs_to_gs(
    gcs, pool, data, local_conversion, tmp_path
):
    before = len(_workers_started(pool))
    out = f"gs://{BUCKET}/portable-out"
    result = _cli(
        "convert", data, out, "--num-shards", "2", *(f"--beam-arg={a}" for a in pool.args)
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "3,000 rows" in result.stdout
    # The pre-flight worker and the conversion's worker: both started by the pool process.
    assert len(_workers_started(pool)) >= before + 2, pool.log.read_text()[-3000:]
    for name in ("train", "eval"):
        records = _download_split(gcs, "portable-out", name, tmp_path)
        assert records and sorted(records) == sorted(read_split(local_conversion, name))


def two_worker_pipeline(pool) -> beam.Pipeline:
    runner = FnApiRunner(default_environment=ExternalEnvironment(f"localhost:{pool.port}"))
    return beam.Pipeline(runner=runner, options=PipelineOptions(["--direct_num_workers=2"]))


def test_conversion_with_two_workers_of_the_pool(
    gcs, pool, data, demo_dataset, local_conversion, tmp_path
):
    before = len(_workers_started(pool))
    dataset, splits = plan.plan_conversion(data)
    options = plan.OutputOptions(num_shards=4)
    out = f"gs://{BUCKET}/portable-two"
    result = conversion.run_conversion(
        dataset,
        splits,
        out,
        options,
        two_worker_pipeline(pool),
        example_statistics_dir=f"gs://{BUCKET}/portable-two-statistics",
    )
    assert sum(result.rows.values()) == 3000
    assert len(_workers_started(pool)) == before + 2, pool.log.read_text()[-3000:]
    for name in ("train", "eval"):
        records = _download_split(gcs, "portable-two", name, tmp_path)
        assert sorted(records) == sorted(read_split(local_conversion, name))
    # The workers' statistics parts (on GCS), merged by the driver: the same bytes as one
    # local process computes for the same shards.
    local_dataset, local_splits = plan.plan_conversion(demo_dataset)
    local = tmp_path / "local-statistics"
    conversion.convert(
        local_dataset,
        str(tmp_path / "local"),
        local_splits,
        options,
        IN_MEMORY_BEAM,
        example_statistics_dir=str(local),
    )
    for name in ("train", "eval"):
        blob = gcs.blob(f"portable-two-statistics/Split-{name}/FeatureStats.pb")
        assert (
            blob.download_as_bytes() == (local / f"Split-{name}" / "FeatureStats.pb").read_bytes()
        )


def test_a_pool_without_apache_beam_fails_fast_naming_the_cause(broken_pool, data):
    start = time.monotonic()
    result = _cli(
        "convert",
        data,
        f"gs://{BUCKET}/never",
        *(f"--beam-arg={a}" for a in broken_pool.args),
        timeout=120,  # it used to hang for ever: the process must also exit
        **{TIMEOUT_VARIABLE: "5"},
    )
    assert result.returncode == 3, result.stderr
    assert "no SDK worker of the pool" in result.stderr and "PATH" in result.stderr, result.stderr
    assert time.monotonic() - start < 90
    assert "No module named 'apache_beam'" in broken_pool.log.read_text()


def test_no_pool_at_the_address_fails_at_once(data):
    result = _cli(
        "convert",
        data,
        f"gs://{BUCKET}/never",
        "--beam-arg=--runner=PortableRunner",
        "--beam-arg=--job_endpoint=embed",
        "--beam-arg=--environment_type=EXTERNAL",
        f"--beam-arg=--environment_config=localhost:{free_port()}",
        timeout=60,
    )
    assert result.returncode == 3, result.stderr
    assert "no SDK worker pool answers at localhost:" in result.stderr, result.stderr


def test_statistics_mode_on_the_worker_pool(gcs, pool, data):
    from tfx_tabular.schemas.source import schema_of

    args = [*pool.args, f"--temp_location=gs://{BUCKET}/tmp"]
    portable = schema_of(data, label="label", sample_statistics=True, beam_pipeline_args=args)
    local = schema_of(
        data, label="label", sample_statistics=True, beam_pipeline_args=IN_MEMORY_BEAM
    )
    assert portable.sample_statistics.rows == local.sample_statistics.rows == 3000
    assert portable.sample_statistics.string_domains == local.sample_statistics.string_domains > 0
    assert portable.schema == local.schema
    assert not list(gcs.list_blobs(prefix="tmp/"))  # the staged sample is removed


def test_statistics_mode_off_the_local_runner_needs_a_shared_temp_location(pool, data):
    from tfx_tabular.schemas.source import schema_of
    from tfx_tabular.source.errors import InputError

    with pytest.raises(InputError, match="--temp_location"):
        schema_of(data, sample_statistics=True, beam_pipeline_args=pool.args)


def test_example_gen_component_with_the_portable_beam_args(pool, demo_dataset, tmp_path):
    from ml_metadata.proto import metadata_store_pb2
    from tfx import v1 as tfx
    from tfx.orchestration import metadata
    from tfx.orchestration.beam.beam_dag_runner import BeamDagRunner

    from tfx_tabular.components import ParquetExampleGen

    before = len(_workers_started(pool))
    sqlite = str(tmp_path / "metadata.sqlite")
    pipeline = tfx.dsl.Pipeline(
        pipeline_name="portable-example-gen",
        # Local input and root: TFX's ExampleGen driver fingerprints the input and TFX keeps its
        # artifacts through tf.io.gfile, whose GCS client cannot be pointed at the emulator.
        pipeline_root=str(tmp_path / "root"),
        components=[ParquetExampleGen(input_base=demo_dataset, split_by_partition="day")],
        metadata_connection_config=metadata.sqlite_metadata_connection_config(sqlite),
        beam_pipeline_args=pool.args,
    )
    BeamDagRunner().run(pipeline)
    with metadata.Metadata(metadata.sqlite_metadata_connection_config(sqlite)) as m:
        [examples] = m.store.get_artifacts_by_type("Examples")
    assert examples.state == metadata_store_pb2.Artifact.LIVE
    rows = examples.custom_properties["row_counts"].struct_value
    assert (rows["train"], rows["eval"]) == (2000, 1000)
    assert len(_workers_started(pool)) >= before + 2


@pytest.fixture(scope="module")
def job_server(gcs, tmp_path_factory):
    """Beam's Python job service as a process of its own (`--job_endpoint=localhost:PORT`), as a
    Flink or Spark job server is."""
    port = free_port()
    log = tmp_path_factory.mktemp("job-server") / "job-server.log"
    service = "apache_beam.runners.portability.local_job_service_main"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", service, f"--port={port}"], stdout=out)
    yield f"--job_endpoint=localhost:{port}"
    proc.terminate()
    proc.wait(10)


def _through(job_server: str, pool) -> list[str]:
    return [job_server if a == "--job_endpoint=embed" else a for a in pool.args]


def test_convert_through_a_job_server_process(
    job_server, pool, demo_dataset, local_conversion, tmp_path
):
    # Local paths: gs:// on this path is the embedded service's test above, and each job whose
    # workers touch gs:// waits ~22 s for credentials that do not exist here.
    out = str(tmp_path / "out")
    before = len(_workers_started(pool))
    args = [f"--beam-arg={a}" for a in _through(job_server, pool)]
    result = _cli("convert", demo_dataset, out, "--num-shards", "2", *args)
    assert result.returncode == 0, result.stderr[-3000:]
    assert len(_workers_started(pool)) == before + 2  # the probe job's worker, the conversion's
    for name in ("train", "eval"):
        assert sorted(read_split(out, name)) == sorted(read_split(local_conversion, name))


def test_a_broken_pool_behind_a_job_server_fails_fast_too(job_server, broken_pool, data):
    args = [f"--beam-arg={a}" for a in _through(job_server, broken_pool)]
    result = _cli(
        "convert", data, f"gs://{BUCKET}/never", *args, timeout=120, **{TIMEOUT_VARIABLE: "5"}
    )
    assert result.returncode == 3, result.stderr
    assert "no SDK worker of the pool" in result.stderr and "PATH" in result.stderr, result.stderr


@pytest.mark.parametrize("case", ["null_inside_a_list", "corrupt_data_page"])
def test_an_error_inside_the_conversion_is_one_line_on_the_worker_pool(
    job_server, pool, tmp_path, case
):
    """The error matrix's cases raised in the pool's workers, another process than the driver
    (`test_cli_errors.py`): one line naming the file and column, nothing left."""
    source, flags, column = inside_cases(tmp_path / "data")[case]
    out, statistics = str(tmp_path / "out"), str(tmp_path / "statistics")
    args = [f"--beam-arg={a}" for a in _through(job_server, pool)]
    failed = _cli("convert", source, out, *flags, "--example-statistics", statistics, *args)
    assert_one_line_naming(failed, os.path.join(source, "bad.parquet"), column)
    assert_nothing_left(out, statistics)
