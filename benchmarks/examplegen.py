"""Section 1 — ExampleGen: Parquet → TFRecord tf.Example conversion, side by side on the same data.

Measured, each in a fresh child process, repeats interleaved (one pass over every configuration
per repeat, so slow phases of a noisy machine hit all of them alike):

* ours: `tfx_tabular.conversion.convert.convert` with its default options (DirectRunner, one thread per
  core), compression none, gzip level 6 and gzip level 1;
* stock TFX 1.16: `FileBasedExampleGen` + `parquet_executor.Executor` (ReadFromParquet →
  dict_to_example → hash split → WriteSplit: Reshuffle + WriteToTFRecord, gzip), run through the
  executor's own `Do` in both DirectRunner modes (threads, as ours, and worker processes; every
  ratio uses stock's faster mode), on a `--stock-rows` subset of the same files, and once on 5x
  that many rows, to separate its start-up from its per-row cost;
* raw bounds without Beam: a plain loop in 2 processes (halves of the files) reading the same
  Parquet batches, then tfx_bsl's RecordBatchToExamplesEncoder + tf.io.TFRecordWriter, or our
  encoder + a raw file write;
* peak RSS of the whole conversion process tree against data size;
* reading the outputs back with tf.data + tf.io.parse_example, per compression.
"""

from __future__ import annotations

import glob
import os
import shutil
import time

from benchmarks import formats, harness
from benchmarks.harness import Context
from benchmarks.results import Recorder, with_rate

# Stock runs in both DirectRunner modes, one worker per core: ours' default (threads) suits its
# start-up, processes suit its GIL-bound per-row Python. Each comparison takes its faster mode.
STOCK_MODES = {"threads": "multi_threading", "processes": "multi_processing"}
STOCK_SCALE = 5  # stock also runs once on STOCK_SCALE x --stock-rows (capped at --rows)
BATCH_SIZE = 8192  # our convert()'s default batch size; the raw loops read the same batches
READ_BATCH = 4096
STOCK_SPLIT_PATTERN = "*/*.parquet"  # stock's default '*' would match the day=... folders
MAX_RSS_ROWS = 10_000_000
LOOPS = {  # kind → configuration
    "tfx_bsl": "loop: tfx_bsl encoder + TFRecordWriter",
    "ours": "loop: our encoder + file write",
}

COMPRESSIONS = {  # name → (compression, gzip level)
    "none": ("none", 6),
    "gzip-6": ("gzip", 6),
    "gzip-1": ("gzip", 1),
}


# --- measured tasks (run in a child process by benchmarks.worker) -----------------------------


def task_convert_ours(input_base: str, output_dir: str, compression: str, level: int) -> dict:
    from tfx_tabular.conversion import convert, plan
    from tfx_tabular.source.dataset import open_dataset

    start = time.perf_counter()
    dataset = open_dataset(input_base)
    result = convert.convert(
        dataset,
        output_dir,
        options=plan.OutputOptions(compression=compression, compression_level=level),
    )
    seconds = time.perf_counter() - start
    rows = sum(result.rows.values())
    if rows != dataset.num_rows:
        raise RuntimeError(f"ours wrote {rows} rows of {dataset.num_rows}")
    return {
        "rows": rows,
        "seconds": seconds,
        "convert_seconds": result.seconds,
        "num_shards": result.num_shards,
        "bytes": harness.folder_bytes(output_dir, "data_tfrecord"),
    }


def task_warm_up(input_base: str, output_dir: str) -> dict:
    """One untimed conversion in the driver process (DirectRunner in_memory): it runs the same
    DoFn code as the measured runs, so numba's on-disk cache holds every kernel they call."""
    from tfx_tabular.conversion import convert
    from tfx_tabular.source.dataset import open_dataset

    start = time.perf_counter()
    result = convert.convert(
        open_dataset(input_base),
        output_dir,
        beam_pipeline_args=["--direct_running_mode=in_memory"],
    )
    return {"rows": sum(result.rows.values()), "seconds": time.perf_counter() - start}


def task_convert_stock(input_base: str, output_dir: str, expected_rows: int, mode: str) -> dict:
    import tensorflow as tf
    from tfx.components.example_gen import utils
    from tfx.components.example_gen.custom_executors import parquet_executor
    from tfx.proto import example_gen_pb2
    from tfx.types import standard_artifacts
    from tfx.types import standard_component_specs as specs
    from tfx.utils import proto_utils

    input_config = example_gen_pb2.Input(
        splits=[example_gen_pb2.Input.Split(name="single_split", pattern=STOCK_SPLIT_PATTERN)]
    )
    output_config = utils.make_default_output_config(input_config)  # train 2 : eval 1 buckets
    exec_properties = {
        specs.INPUT_BASE_KEY: input_base,
        specs.INPUT_CONFIG_KEY: proto_utils.proto_to_json(input_config),
        specs.OUTPUT_CONFIG_KEY: proto_utils.proto_to_json(output_config),
        specs.OUTPUT_DATA_FORMAT_KEY: example_gen_pb2.FORMAT_TF_EXAMPLE,
    }
    examples = standard_artifacts.Examples()
    examples.uri = output_dir
    executor = parquet_executor.Executor(
        parquet_executor.Executor.Context(
            beam_pipeline_args=[
                f"--direct_running_mode={STOCK_MODES[mode]}",
                "--direct_num_workers=0",
            ]
        )
    )
    start = time.perf_counter()
    executor.Do({}, {specs.EXAMPLES_KEY: [examples]}, exec_properties)
    seconds = time.perf_counter() - start
    files = sorted(glob.glob(os.path.join(output_dir, "Split-*", "*")))
    rows = int(
        tf.data.TFRecordDataset(files, compression_type="GZIP").reduce(
            0, lambda count, _: count + 1
        )
    )
    # Rates count the input rows; rows stock lost (seen with its multi-threaded DirectRunner)
    # are reported, not hidden.
    return {
        "rows": expected_rows,
        "written": rows,
        "lost_rows": expected_rows - rows,
        "seconds": seconds,
        "bytes": harness.folder_bytes(output_dir, "data_tfrecord"),
    }


_LOOP_DATASET = None  # set before forking the loop processes


def _as_large_lists(batch):
    """A batch as tfx_bsl's encoder wants it: every column large_list<int64|float32|large_binary>."""
    import numpy as np
    import pyarrow as pa

    def leaf(t):
        if pa.types.is_integer(t):
            return pa.int64()
        return pa.float32() if pa.types.is_floating(t) else pa.large_binary()

    columns = []
    for column in batch.columns:
        t = column.type
        if pa.types.is_list(t) or pa.types.is_large_list(t):
            columns.append(column.cast(pa.large_list(leaf(t.value_type))))
            continue
        n = len(column)
        if column.null_count:
            valid = column.is_valid().to_numpy(zero_copy_only=False)
            offsets = np.zeros(n + 1, dtype=np.int64)
            np.cumsum(valid, out=offsets[1:])
            offsets = pa.array(offsets, mask=np.append(~valid, False))
            column = column.drop_null()
        else:
            offsets = pa.array(np.arange(n + 1, dtype=np.int64))
        columns.append(pa.LargeListArray.from_arrays(offsets, column.cast(leaf(t))))
    return pa.RecordBatch.from_arrays(columns, names=batch.schema.names)


def _loop_process(kind: str, file_indices: list, path: str) -> int:
    from tfx_tabular.coders import encoding
    from tfx_tabular.source.reading import read_batches

    dataset = _LOOP_DATASET
    rows = 0

    def batches():
        for index in file_indices:
            info = dataset.files[index]
            yield from read_batches(dataset, info, range(len(info.row_group_rows)), BATCH_SIZE)

    if kind == "tfx_bsl":
        import tensorflow as tf
        from tfx_bsl.coders import example_coder

        encoder = example_coder.RecordBatchToExamplesEncoder()
        with tf.io.TFRecordWriter(path) as writer:
            for batch in batches():
                for record in encoder.encode(_as_large_lists(batch)):
                    writer.write(record)
                rows += batch.num_rows
    else:
        features = dataset.features
        with open(path, "wb") as handle:
            for batch in batches():
                handle.write(encoding.encode(batch, features, framed=True).buffer)
                rows += batch.num_rows
    return rows


def task_loop(kind: str, input_base: str, output_dir: str, processes: int = 2) -> dict:
    """Read → encode → write with no Beam, `processes` forked processes over halves of the files."""
    import multiprocessing

    from tfx_tabular.coders import encoding
    from tfx_tabular.source.dataset import open_dataset
    from tfx_tabular.source.reading import read_batches

    global _LOOP_DATASET
    dataset = _LOOP_DATASET = open_dataset(input_base)
    if kind == "tfx_bsl":  # import and warm up before forking, outside the timed region
        import tensorflow as tf  # noqa: F401
        from tfx_bsl.coders import example_coder

        first = next(read_batches(dataset, dataset.files[0], [0], 64))
        example_coder.RecordBatchToExamplesEncoder().encode(_as_large_lists(first))
    else:
        first = next(read_batches(dataset, dataset.files[0], [0], 64))
        encoding.encode(first, dataset.features, framed=True)  # loads numba's cached kernels
    groups: list[list[int]] = [[] for _ in range(processes)]
    loads = [0] * processes
    for index in sorted(range(len(dataset.files)), key=lambda i: -dataset.files[i].num_rows):
        target = loads.index(min(loads))
        groups[target].append(index)
        loads[target] += dataset.files[index].num_rows
    os.makedirs(output_dir, exist_ok=True)
    paths = [os.path.join(output_dir, f"part-{i}.tfrecord") for i in range(processes)]
    start = time.perf_counter()
    with multiprocessing.get_context("fork").Pool(processes) as pool:
        counts = pool.starmap(
            _loop_process, [(kind, g, p) for g, p in zip(groups, paths, strict=True)]
        )
    seconds = time.perf_counter() - start
    if sum(counts) != dataset.num_rows:
        raise RuntimeError(f"{kind} loop wrote {sum(counts)} rows of {dataset.num_rows}")
    return {"rows": sum(counts), "seconds": seconds, "bytes": harness.folder_bytes(output_dir)}


def task_loops_then_reads(
    loop_kinds: list, loop_input: str, loop_output: str, read_outputs: dict, expected_rows: int
) -> dict:
    """The Beam-free loops, then the tf.data reads, in one child (TensorFlow is imported once;
    the loops fork before TensorFlow has run anything)."""
    import tensorflow as tf  # noqa: F401  (before any fork)

    loops = {}
    for kind in loop_kinds:
        loops[kind] = task_loop(kind, loop_input, os.path.join(loop_output, kind))
        shutil.rmtree(os.path.join(loop_output, kind), ignore_errors=True)
    return {"loops": loops, **task_read(read_outputs, expected_rows)}


def task_read(outputs: dict, expected_rows: int) -> dict:
    """Each output read once as the Trainer reads it: `tfx_tabular.input_fn` (evaluation mode:
    every record once, in file order), parsing every feature, in `outputs` order."""
    import tensorflow as tf

    from tfx_tabular import input_fn, schemas
    from tfx_tabular.conversion.source_metadata import read_source_metadata
    from tfx_tabular.schemas.infer import infer_schema

    results, features = {}, 0
    for name, output_dir in outputs.items():
        files = sorted(glob.glob(os.path.join(output_dir, "Split-*", "data_tfrecord-*")))
        compression = "GZIP" if files[0].endswith(".gz") else ""
        schema = infer_schema(read_source_metadata(output_dir), label="label")
        features = len(schemas.feature_spec(schema))
        start = time.perf_counter()
        rows = 0
        try:
            for _, labels in input_fn(files, schema, READ_BATCH, "label", training=False):
                rows += int(labels.shape[0])
        except tf.errors.OpError as e:
            results[name] = {"error": _unreadable(files[0], compression, e)}
            continue
        seconds = time.perf_counter() - start
        if rows != expected_rows:
            raise RuntimeError(f"read {rows} rows of {expected_rows} from {output_dir}")
        results[name] = {"rows": rows, "seconds": seconds, "files": len(files)}
    return {"reads": results, "features": features}


def _unreadable(path: str, compression: str, error: Exception) -> str:
    """Why tf.data could not read an output file, as precisely as can be told."""
    import gzip

    if compression == "GZIP":
        with gzip.open(path) as handle:
            if handle.read(2) == b"\x1f\x8b":
                return (
                    "the .gz shards are gzip-compressed twice (a gzip stream inside a gzip "
                    "stream), so TFRecordDataset(compression_type='GZIP') sees no records"
                )
    return f"{type(error).__name__}: {str(error).splitlines()[0][:200]}"


# --- orchestration ---------------------------------------------------------------------------


def _rss_sizes(rows: int) -> list[int]:
    """Data sizes for peak memory: rows/10 (a subset: the first rows of each file, so its batches
    are partial), rows, and 10 × rows (generated whole). The target compares rows with 10 × rows,
    where every batch is full at both sizes. No 10 × rows beyond MAX_RSS_ROWS (the disk space of
    its dataset and TFRecords); the target then falls back to rows/10 against rows."""
    return sorted(
        {max(1, rows // 10), rows} | ({rows * 10} if rows * 10 <= MAX_RSS_ROWS else set())
    )


def _rotated(names: list, repeat: int) -> list:
    """`names` rotated by `repeat`: the order within a repeat varies from one to the next."""
    k = repeat % len(names)
    return names[k:] + names[:k]


def _report(label: str, sample: dict, repeat: int, repeats: int, unit: str = "rows/s") -> None:
    extra = ""
    if "peak_rss" in sample:
        extra = (
            f"  peak PSS {formats.mib(sample['peak_pss']):>9}, RSS "
            f"{formats.mib(sample['peak_rss']):>9}  (process {sample['wall']:.1f} s)"
        )
    if sample.get("lost_rows"):
        extra += f"  LOST {sample['lost_rows']:,} rows"
    print(
        f"  [{repeat + 1}/{repeats}] {label:<40} {sample['rows']:>10,} rows  "
        f"{sample['seconds']:7.2f} s  {sample['rows'] / sample['seconds']:>10,.0f} {unit}{extra}",
        flush=True,
    )


class _Measurement:
    """The section's configurations (one label each) and the steps that run them."""

    def __init__(self, ctx: Context):
        self.ctx = ctx
        rows = ctx.rows
        self.stock_rows = min(ctx.stock_rows, rows)
        # Stock once more on 5x its rows: its scaling (start-up vs per row) and a same-size pairing.
        self.stock_big_rows = (
            min(rows, STOCK_SCALE * self.stock_rows) if self.stock_rows < rows else None
        )
        self.other_sizes = sorted(
            (set(_rss_sizes(rows)) | ({self.stock_big_rows} if self.stock_big_rows else set()))
            - {rows}
        )
        self.out = ctx.path("out")
        self.main = ""  # the --rows dataset, set by prepare()
        self.recorder = Recorder("examplegen")

    def prepare(self) -> None:
        """The datasets, then one untimed warm-up conversion."""
        print("Section 1 — ExampleGen: preparing datasets", flush=True)
        self.main = self.ctx.dataset(self.ctx.rows)
        for n in self.other_sizes + [self.stock_rows]:
            self.ctx.dataset(n)
        shutil.rmtree(self.out, ignore_errors=True)
        smallest = self.other_sizes[0] if self.other_sizes else self.ctx.rows
        print(
            f"  warm-up: one untimed in-process conversion of {smallest:,} rows (fills numba's "
            "on-disk kernel cache, so no measured run compiles the encoder)",
            flush=True,
        )
        harness.run_task(
            self.ctx,
            "warm-up",
            "examplegen:task_warm_up",
            input_base=self.ctx.dataset(smallest),
            output_dir=os.path.join(self.out, "warm-up"),
        )
        shutil.rmtree(os.path.join(self.out, "warm-up"), ignore_errors=True)

    def _add(self, label: str, sample: dict, repeat: int, unit: str = "rows/s") -> None:
        sample = with_rate(sample)
        self.recorder.add(label, sample)
        _report(label, sample, repeat, self.ctx.repeats, unit)

    def _convert(self, label: str, name: str, task: str, repeat: int, **params) -> str:
        """One conversion in its own child, writing `<out>/<name>`; returns that folder."""
        target = os.path.join(self.out, name)
        run = harness.run_task(self.ctx, name, f"examplegen:{task}", output_dir=target, **params)
        self._add(label, harness.sample(run), repeat)
        return target

    def _stock(self, label: str, name: str, repeat: int, rows: int, mode: str) -> None:
        target = self._convert(
            label,
            name,
            "task_convert_stock",
            repeat,
            input_base=self.ctx.dataset(rows),
            expected_rows=rows,
            mode=mode,
        )
        shutil.rmtree(target, ignore_errors=True)

    def repeat(self, repeat: int) -> None:
        """One pass over every configuration, in an order rotated by `repeat`."""
        outputs = {}
        for name in _rotated(list(COMPRESSIONS), repeat):
            compression, level = COMPRESSIONS[name]
            outputs[name] = self._convert(
                f"ours, {name}",
                f"ours-{name}-{repeat}",
                "task_convert_ours",
                repeat,
                input_base=self.main,
                compression=compression,
                level=level,
            )
        self._loops_and_reads(repeat, outputs)
        for target in outputs.values():
            shutil.rmtree(target, ignore_errors=True)
        for n in _rotated(self.other_sizes, repeat) if self.other_sizes else []:
            shutil.rmtree(
                self._convert(
                    f"ours, none, {n:,} rows",
                    f"ours-none-{n}-{repeat}",
                    "task_convert_ours",
                    repeat,
                    input_base=self.ctx.dataset(n),
                    compression="none",
                    level=6,
                ),
                ignore_errors=True,
            )
        for mode in _rotated(list(STOCK_MODES), repeat):
            self._stock(
                f"stock TFX ({mode}), gzip", f"stock-{mode}-{repeat}", repeat, self.stock_rows, mode
            )
            if self.stock_big_rows and repeat == 0:  # one run: stock takes a while there
                label = f"stock TFX ({mode}), gzip, {STOCK_SCALE}x rows (1 run)"
                self._stock(label, f"stock-big-{mode}", repeat, self.stock_big_rows, mode)

    def _loops_and_reads(self, repeat: int, outputs: dict) -> None:
        """The Beam-free loops, then reading `outputs` back, in one child."""
        both = harness.run_task(
            self.ctx,
            f"loops-reads-{repeat}",
            "examplegen:task_loops_then_reads",
            loop_kinds=_rotated(list(LOOPS), repeat),
            loop_input=self.main,
            loop_output=os.path.join(self.out, f"loops-{repeat}"),
            read_outputs={n: outputs[n] for n in _rotated(list(COMPRESSIONS), repeat)},
            expected_rows=self.ctx.rows,
        ).result
        for kind, result in both["loops"].items():
            self._add(LOOPS[kind], result, repeat)
        self.recorder.add("dataset", {"features": both["features"]})
        for name, result in both["reads"].items():
            if "error" in result:
                self.recorder.add(f"read, {name}", result)
                print(
                    f"  [{repeat + 1}/{self.ctx.repeats}] read {name}: UNREADABLE — "
                    f"{result['error']}",
                    flush=True,
                )
            else:
                self._add(f"read, {name}", result, repeat, "ex/s")

    def rows(self) -> list[dict]:
        """The section's rows: the dataset's facts and every configuration's samples."""
        self.recorder.add("dataset", harness.dataset_facts(self.main))
        return self.recorder.rows()


def run(ctx: Context) -> list[dict]:
    """Measure the section; returns its rows (see `results`)."""
    measurement = _Measurement(ctx)
    measurement.prepare()
    print(
        f"Section 1 — ExampleGen: {ctx.repeats} repeat(s), interleaved; stock on "
        f"{measurement.stock_rows:,} rows, the rest on {ctx.rows:,}",
        flush=True,
    )
    for repeat in range(ctx.repeats):
        measurement.repeat(repeat)
    shutil.rmtree(measurement.out, ignore_errors=True)
    return measurement.rows()
