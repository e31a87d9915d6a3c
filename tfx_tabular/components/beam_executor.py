"""The base of our Beam components' executors: TFX's `BaseBeamExecutor`, without TFX packaging
itself for remote workers when the Beam runner runs in this process.

Given any Beam argument, `BaseBeamExecutor` builds an sdist of the installed TFX at every run
(`tfx/utils/dependency_utils.py`: ~2 s and 49 MB in the temporary folder, never removed) and
passes it as `--extra_package`, for a remote runner's workers. A DirectRunner (threads, or
processes started from this Python) never reads it.
"""

from __future__ import annotations

import copy
from typing import Sequence

from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions
from tfx.dsl.components.base import base_beam_executor

# `--runner` values (lower case, without a "Runner" suffix, as Beam matches them) that run the
# pipeline in this process or in processes it starts from this Python; without `--runner`,
# Beam runs the DirectRunner.
IN_PROCESS_RUNNERS = ("direct", "bundlebaseddirect", "switchingdirect")


def runs_in_process(beam_pipeline_args: Sequence[str]) -> bool:
    """Whether these Beam arguments run the pipeline on this machine's Python (DirectRunner)."""
    runner = PipelineOptions(list(beam_pipeline_args)).view_as(StandardOptions).runner
    name = (runner or "direct").lower()
    return name.removesuffix("runner") in IN_PROCESS_RUNNERS


class BeamExecutor(base_beam_executor.BaseBeamExecutor):
    """`BaseBeamExecutor`, which packages TFX for a remote runner only."""

    def __init__(self, context=None):
        args = list(getattr(context, "beam_pipeline_args", None) or [])
        if not args or not all(isinstance(a, str) for a in args) or not runs_in_process(args):
            super().__init__(context)
            return
        # TFX's __init__ packages TFX whenever it sees Beam arguments: it sees none, then they
        # are the executor's as given.
        without_args = copy.copy(context)
        without_args.beam_pipeline_args = []
        super().__init__(without_args)
        self._beam_pipeline_args = args
