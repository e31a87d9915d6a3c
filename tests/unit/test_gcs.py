"""gs:// end to end against a local GCS emulator on loopback (the `gcp-storage-emulator` package).

ParquetExampleGen's core reads Parquet through pyarrow's GcsFileSystem (`open_dataset`) and writes
its shards through Beam's gcsio (`convert`). One variable points both at the emulator, as it
would for a user: STORAGE_EMULATOR_HOST, which google-cloud-storage (so Beam's gcsio) honours and
`resolve_filesystem` passes on to pyarrow. Objects are uploaded and checked with
google-cloud-storage's own client, not through the code under test.
"""

import gc
import types

import pyarrow as pa
import pytest
from conftest import BUCKET, IN_MEMORY_BEAM, upload
from test_convert import TEMP_DIR, read_split, run

from tfx_tabular.coders.columnar import DEFAULT_BATCH_ROWS
from tfx_tabular.conversion import convert as conversion
from tfx_tabular.conversion import plan
from tfx_tabular.conversion.plan import OutputOptions
from tfx_tabular.conversion.source_metadata import SOURCE_METADATA_FILE
from tfx_tabular.conversion.staging import PUBLISHED_MARKER
from tfx_tabular.source.dataset import open_dataset
from tfx_tabular.source.errors import InputError

# A GCS emulator server in another process: not in `make test-fast`.
pytestmark = pytest.mark.slow

SPLITS = ("train", "eval")


def _object_names(bucket, prefix: str) -> set:
    return {blob.name for blob in bucket.list_blobs(prefix=prefix + "/")}


@pytest.fixture(scope="module")
def converted(gcs, demo_dataset, tmp_path_factory):
    """The demo data uploaded to gs://bucket/data, converted to gs://bucket/out, and converted
    locally too; the gs:// output downloaded (by google-cloud-storage) for reading back."""
    folder = tmp_path_factory.mktemp("gcs_conversion")
    uploaded = upload(gcs, demo_dataset, "data")
    dataset = open_dataset(f"gs://{BUCKET}/data")
    options = OutputOptions(num_shards=2, columnar_batch_rows=DEFAULT_BATCH_ROWS)
    # The default local runner (one thread per core): shards read and write gs:// concurrently.
    result = conversion.convert(dataset, f"gs://{BUCKET}/out", options=options)
    local_dataset = open_dataset(demo_dataset)
    local = run(local_dataset, folder / "local", options=options, args=IN_MEMORY_BEAM)
    names = _object_names(gcs, "out")
    for name in names:
        path = folder / "downloaded" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        gcs.blob(name).download_to_filename(str(path))
    return types.SimpleNamespace(
        uploaded=uploaded,
        dataset=dataset,
        local_dataset=local_dataset,
        options=options,
        result=result,
        local=local,
        names=names,
        gs_out=folder / "downloaded" / "out",
        local_out=folder / "local",
    )


def test_gs_input_is_listed_and_its_footers_read(converted):
    dataset = converted.dataset
    assert dataset.filesystem.type_name == "gcs"
    assert "_SUCCESS" in converted.uploaded  # and ignored, as locally:
    assert [f.relative for f in dataset.files] == [n for n in converted.uploaded if n != "_SUCCESS"]
    assert [f.path for f in dataset.files] == [f"{BUCKET}/data/{f.relative}" for f in dataset.files]
    assert dataset.partition_columns == ("day",)
    assert dataset.num_rows == 3000
    assert [f.row_group_rows for f in dataset.files] == [(500, 500)] * 3
    assert dataset.schema == converted.local_dataset.schema


def test_gs_output_has_the_row_counts_and_shards(converted):
    result, options = converted.result, converted.options
    assert result.output_dir == f"gs://{BUCKET}/out" and result.num_shards == 2
    assert result.rows == converted.local.rows and sum(result.rows.values()) == 3000
    assert all(result.rows[name] > 0 for name in SPLITS)
    published = {n for n in converted.names if TEMP_DIR not in n}
    assert published == {
        f"out/Split-{name}/{plan.shard_name(i, 2, options)}" for name in SPLITS for i in range(2)
    } | {f"out/{SOURCE_METADATA_FILE}", f"out/{PUBLISHED_MARKER}"} | {
        f"out/columnar/Split-{name}/{plan.columnar_shard_name(i, 2, options)}"
        for name in SPLITS
        for i in range(2)
    } | {"out/columnar/columnar.json"}


def test_gs_records_read_back_equal_a_local_conversion(converted):
    for name in SPLITS:
        records = read_split(str(converted.gs_out), name)
        assert len(records) == converted.result.rows[name]
        assert sorted(records) == sorted(read_split(str(converted.local_out), name))


def test_gs_source_schema_is_written(converted):
    def schema(folder):
        return pa.ipc.read_schema(pa.py_buffer((folder / SOURCE_METADATA_FILE).read_bytes()))

    assert schema(converted.gs_out).equals(schema(converted.local_out), check_metadata=True)
    assert "day" in schema(converted.gs_out).names


@pytest.fixture(scope="module")
def failed(gcs, demo_dataset):
    """gs://bucket/corrupt: the demo data with one file's data pages damaged (its footer is
    intact), converted to gs://bucket/corrupt-out; the error raised from inside the pipeline, and
    the objects under corrupt-out afterwards."""
    bad = "day=2024-01-03/part-00000.parquet"

    def damage(relative, data):
        if relative != bad:
            return data
        data = bytearray(data)
        data[4:64] = b"\xff" * 60  # the first page header, after the "PAR1" magic
        return bytes(data)

    upload(gcs, demo_dataset, "corrupt", damage)
    dataset = open_dataset(f"gs://{BUCKET}/corrupt")  # footers are intact
    with pytest.raises(InputError) as excinfo:
        run(
            dataset,
            f"gs://{BUCKET}/corrupt-out",
            options=OutputOptions(num_shards=3),
            args=IN_MEMORY_BEAM,
        )
    message = str(excinfo.value)
    del excinfo
    # google-cloud-storage's BlobWriter completes its upload when garbage-collected: a writer left
    # unclosed by the failed shard would add objects now.
    gc.collect()
    return types.SimpleNamespace(bad=bad, message=message, names=_object_names(gcs, "corrupt-out"))


def test_corrupt_gs_object_fails_naming_it_and_nothing_is_published(failed):
    assert f"{BUCKET}/corrupt/{failed.bad}" in failed.message
    assert not [n for n in failed.names if TEMP_DIR not in n]  # no Split-*, no source schema


@pytest.mark.parametrize("run_name", ["converted", "failed"])
def test_no_temporary_objects_remain_on_gs(run_name, request):
    names = request.getfixturevalue(run_name).names
    assert not [n for n in names if TEMP_DIR in n], names
