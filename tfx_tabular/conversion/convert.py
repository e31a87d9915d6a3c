"""A conversion, end to end: plan → the Beam transform → publish, or discard. The one way a
conversion runs, for `tfx-tabular convert` and the ParquetExampleGen executor.
"""

from __future__ import annotations

import contextlib
import logging
import os
import posixpath
import sys
import time
from typing import Callable, Optional, Sequence

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions

from tfx_tabular.conversion import transform
from tfx_tabular.conversion.plan import OutputOptions, Splits, sized_for
from tfx_tabular.conversion.publish import ConversionResult, publish
from tfx_tabular.conversion.staging import PUBLISHED_MARKER, Staging
from tfx_tabular.conversion.transform import WriteExamples, watching
from tfx_tabular.runners import allocator, interrupts
from tfx_tabular.runners.progress import QUIET_VARIABLE
from tfx_tabular.runners.workers import check_sdk_workers
from tfx_tabular.source.dataset import Dataset
from tfx_tabular.source.errors import InputError
from tfx_tabular.statistics.precompile import compile_kernels

# Threads, not processes: the encoder kernels, Arrow's readers and file writes all release the GIL,
# so one thread per core scales like worker processes without their start-up in every run.
DIRECT_RUNNER_DEFAULTS = ["--direct_running_mode=multi_threading", "--direct_num_workers=0"]
STOP_SECONDS = 3.0  # for an interrupted run's writers to stop before its staging folder goes

log = logging.getLogger(__name__)


def beam_args_with_defaults(beam_pipeline_args: Sequence[str]) -> list[str]:
    """Local runs use every core: the DirectRunner with one thread per core, unless told otherwise."""
    args = list(beam_pipeline_args)
    if not any(
        a.startswith(("--runner", "--direct_running_mode", "--direct_num_workers")) for a in args
    ):
        args += DIRECT_RUNNER_DEFAULTS
    return args


def run_conversion(
    dataset: Dataset,
    splits: Splits,
    output_dir: str,
    options: OutputOptions,
    pipeline: beam.Pipeline,
    on_progress: Optional[Callable[[int], None]] = None,
    example_statistics_dir: Optional[str] = None,
) -> ConversionResult:
    """Write the shards with `pipeline` into a staging folder of this run's own, then publish
    them under `output_dir`, or remove the staging folder. The one way a conversion runs (CLI and
    executor). `on_progress(rows written)` is called from a thread while the pipeline runs.
    With `example_statistics_dir`, each split's statistics are computed in the same pass and written
    there as `Split-<name>/FeatureStats.pb` (`tfx_tabular.statistics`)."""
    check_sdk_workers(pipeline.options)
    _compile_kernels()
    options = sized_for(options, dataset)
    staging = Staging.create(output_dir)
    start = time.perf_counter()
    ran = False
    try:
        write = WriteExamples(
            dataset,
            splits,
            staging.folder,
            options,
            with_example_statistics=example_statistics_dir is not None,
        )
        with watching(staging.folder, on_progress), pipeline as p:
            _ = p | "WriteExamples" >> write
        ran = True
        failure = transform.recorded_failure(staging.folder)
        if failure is not None:
            raise failure
        result = publish(
            dataset, splits, staging, len(write.shards), options, example_statistics_dir
        )
    except BaseException:
        # A runner ends a failed run while its other threads may still convert: stop them
        # before the staging folder goes, or they write into it while it is deleted.
        if not ran:
            _stop_writers(pipeline)
        _discard(staging)
        raise
    finally:
        allocator.release_freed_memory()
    result.seconds = time.perf_counter() - start
    for line in result.warnings:
        log.warning(line)
    return result


def _discard(staging: Staging) -> None:
    """Remove the staging folder of a failed run without hiding its error: a folder that cannot
    go is logged (a later run removes it once this process is gone, `staging.clean_abandoned`)."""
    try:
        staging.discard()
    except Exception as error:
        log.warning("could not remove %s: %s", staging.folder, error)


def _compile_kernels() -> None:
    """Compile (or load from numba's cache) the kernels before the timed conversion: a cold
    cache's one-time compile is not the conversion's rate, and worker processes then load the
    kernels instead of each compiling them."""
    quiet = os.environ.get(QUIET_VARIABLE) == "off"

    def say(text: str) -> None:
        if not quiet:
            print(text, file=sys.stderr, flush=True)

    seconds = compile_kernels(
        lambda: say(
            "compiling the conversion's kernels, once (numba caches them for later runs; about "
            "20 s)"
        )
    )
    if seconds:
        say(f"kernels compiled in {seconds:.1f} s (not counted in the conversion's time)")


def _stop_writers(pipeline: beam.Pipeline) -> None:
    """An interrupt or a failed bundle reaches the main thread only: before the staging folder
    goes, stop the in-process runner's threads still converting, and cancel a job a runner
    service runs."""
    interrupts.stop_threads([transform.__name__], STOP_SECONDS)
    result = getattr(pipeline, "result", None)  # set once a runner accepted the job
    if result is not None:
        with contextlib.suppress(Exception):  # the DirectRunner's cannot be cancelled
            result.cancel()


def convert(
    dataset: Dataset,
    output_dir: str,
    splits: Splits = Splits(),
    options: OutputOptions = OutputOptions(),
    beam_pipeline_args: Sequence[str] = (),
    on_progress: Optional[Callable[[int], None]] = None,
    example_statistics_dir: Optional[str] = None,
) -> ConversionResult:
    """Convert into an empty `output_dir` with a Beam pipeline of its own (the CLI's way);
    with `example_statistics_dir`, write each split's statistics there too (see `run_conversion`)."""
    published = FileSystems.match(
        [posixpath.join(output_dir, "Split-*", "*"), posixpath.join(output_dir, PUBLISHED_MARKER)]
    )
    if any(m.metadata_list for m in published):
        raise InputError(
            f"{output_dir} already holds a conversion's output; choose an empty folder"
        )
    pipeline = beam.Pipeline(options=PipelineOptions(beam_args_with_defaults(beam_pipeline_args)))
    return run_conversion(
        dataset, splits, output_dir, options, pipeline, on_progress, example_statistics_dir
    )
