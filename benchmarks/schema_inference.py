"""Schema inference: ours (Parquet footers only) versus stock StatisticsGen + SchemaGen (two
full passes over the converted data), on the same dataset; plus footer inference over 1,000
files, and whether the two schemas agree on feature names and types."""

from __future__ import annotations

import os
import time

from benchmarks import harness
from benchmarks.harness import Context
from benchmarks.results import Recorder

MANY_FILES = 1000
# Stock StatisticsGen computes statistics in per-example Python: worker processes suit it best.
STOCK_BEAM_ARGS = ["--direct_running_mode=multi_processing", "--direct_num_workers=0"]
STOCK = "stock StatisticsGen + SchemaGen"


def task_ours(input_base: str) -> dict:
    from tfx_tabular.conversion.source_metadata import SourceMetadata
    from tfx_tabular.schemas.infer import infer_schema
    from tfx_tabular.source.dataset import open_dataset

    start = time.perf_counter()
    dataset = open_dataset(input_base)
    schema = infer_schema(SourceMetadata.of(dataset), label="label")
    seconds = time.perf_counter() - start
    return {
        "seconds": seconds,
        "files": len(dataset.files),
        "rows": dataset.num_rows,
        "feature_count": len(schema.feature),
        "features": {f.name: int(f.type) for f in schema.feature},
    }


def task_many_files(root: str, files: int) -> dict:
    import numpy as np
    import pyarrow.parquet as pq

    from tfx_tabular.demo import criteo

    if not os.path.isdir(root) or len(os.listdir(root)) < files:
        rng = np.random.default_rng(1)
        os.makedirs(root, exist_ok=True)
        for i in range(files):
            pq.write_table(
                criteo.criteo_batch(50 + i % 7, rng), os.path.join(root, f"part-{i:05d}.parquet")
            )
    return task_ours(root)


def task_convert(input_base: str, output_dir: str, strings: bool = False) -> dict:
    """The Examples a TabularTrainer pipeline's ParquetExampleGen writes (columnar batches too,
    with the `strings` as for a trainer reading exact strings)."""
    from tfx_tabular.coders import columnar
    from tfx_tabular.conversion import convert, plan

    if not os.path.isfile(os.path.join(output_dir, columnar.FOLDER, columnar.LAYOUT_FILE)):
        dataset, splits = plan.plan_conversion(input_base)
        options = plan.OutputOptions(
            columnar_batch_rows=columnar.DEFAULT_BATCH_ROWS, columnar_strings=strings
        )
        convert.convert(dataset, output_dir, splits, options)
    return {}


def stock_statistics_gen(examples_dir: str, statistics_uri: str):
    """Run stock TFX StatisticsGen's executor over converted Examples (train, eval); returns
    its ExampleStatistics artifact."""
    from tfx.components.statistics_gen import executor as statistics_gen
    from tfx.types import artifact_utils, standard_artifacts

    examples = standard_artifacts.Examples()
    examples.uri = examples_dir
    examples.split_names = artifact_utils.encode_split_names(["train", "eval"])
    statistics = standard_artifacts.ExampleStatistics()
    statistics.uri = statistics_uri
    statistics_gen.Executor(statistics_gen.Executor.Context(beam_pipeline_args=STOCK_BEAM_ARGS)).Do(
        {"examples": [examples]}, {"statistics": [statistics]}, {"exclude_splits": "[]"}
    )
    return statistics


def task_stock(examples_dir: str, work: str) -> dict:
    """Stock TFX StatisticsGen and SchemaGen executors over the converted Examples."""
    from tensorflow_metadata.proto.v0 import schema_pb2
    from tfx.components.schema_gen import executor as schema_gen
    from tfx.types import standard_artifacts
    from tfx.utils import io_utils

    schema = standard_artifacts.Schema()
    schema.uri = os.path.join(work, "schema")
    start = time.perf_counter()
    statistics = stock_statistics_gen(examples_dir, os.path.join(work, "statistics"))
    middle = time.perf_counter()
    schema_gen.Executor().Do(
        {"statistics": [statistics]},
        {"schema": [schema]},
        {"infer_feature_shape": 1, "exclude_splits": "[]"},
    )
    end = time.perf_counter()
    inferred = io_utils.parse_pbtxt_file(
        os.path.join(schema.uri, "schema.pbtxt"), schema_pb2.Schema()
    )
    return {
        "seconds": end - start,
        "statistics_seconds": middle - start,
        "feature_count": len(inferred.feature),
        "features": {f.name: int(f.type) for f in inferred.feature},
    }


def type_differences(ours: dict, stock: dict) -> list[str]:
    """Where two schemas' feature names and types (name → type number) disagree."""
    differences = [f"only in ours: {n}" for n in sorted(set(ours) - set(stock))]
    differences += [f"only in stock: {n}" for n in sorted(set(stock) - set(ours))]
    differences += [
        f"{n}: ours type {ours[n]}, stock {stock[n]}"
        for n in sorted(set(ours) & set(stock))
        if ours[n] != stock[n]
    ]
    return differences


def run(ctx: Context) -> list[dict]:
    """Measure the section; returns its rows (see `results`)."""
    data = ctx.dataset(ctx.rows)
    examples = ctx.path("schema", "examples")
    harness.run_task(
        ctx, "schema-convert", "schema_inference:task_convert", input_base=data, output_dir=examples
    )
    recorder = Recorder("schema_inference")
    for repeat in range(ctx.repeats):
        ours = harness.run_task(
            ctx, f"schema-ours-{repeat}", "schema_inference:task_ours", input_base=data
        ).result
        recorder.add("ours, footers only", ours)
        print(f"  schema ours {repeat + 1}/{ctx.repeats}: {ours['seconds']:.3f} s", flush=True)
    for repeat in range(ctx.repeats):
        many = harness.run_task(
            ctx,
            f"schema-many-{repeat}",
            "schema_inference:task_many_files",
            root=ctx.path("schema", "many-files"),
            files=MANY_FILES,
        ).result
        recorder.add(f"ours, {MANY_FILES:,} small files", many)
        print(f"  schema over {MANY_FILES} files: {many['seconds']:.3f} s", flush=True)
    stock = harness.run_task(
        ctx,
        "schema-stock",
        "schema_inference:task_stock",
        examples_dir=examples,
        work=ctx.path("schema", "stock"),
    ).result
    differences = type_differences(ours["features"], stock["features"])
    print(f"  stock StatisticsGen + SchemaGen: {stock['seconds']:.1f} s; {differences}", flush=True)
    recorder.add(STOCK, {**stock, "type_differences": len(differences)})
    return recorder.rows()
