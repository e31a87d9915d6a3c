"""Our Beam components' executors, and the stock Beam components' in our pipelines, take their
Beam arguments as given and package nothing for a DirectRunner, where TFX's BaseBeamExecutor
packages TFX (an sdist in the temporary folder) at every run it is given Beam arguments; for a
remote runner they still do as TFX does."""

import os
import tempfile

import pytest
from tfx.dsl.components.base import base_beam_executor
from tfx.dsl.components.base.base_beam_executor import BaseBeamExecutor

from tfx_tabular.components.beam_executor import BeamExecutor, runs_in_process
from tfx_tabular.components.parquet_example_gen import executor as example_gen
from tfx_tabular.components.parquet_schema_gen import executor as schema_gen
from tfx_tabular.components.stock import evaluator, statistics_gen, transform
from tfx_tabular.pipelines import create_pipeline

LOCAL_ARGS = ["--direct_running_mode=multi_threading", "--direct_num_workers=2"]
DATAFLOW_ARGS = ["--runner=DataflowRunner", "--project=p", "--region=r", "--temp_location=gs://b/t"]


class _StockBeamExecutor(base_beam_executor.BaseBeamExecutor):
    def Do(self, input_dict, output_dict, exec_properties):  # noqa: N802 (TFX's name)
        raise NotImplementedError


@pytest.fixture
def temporary(tmp_path, monkeypatch):
    """The temporary folder the executors see, empty."""
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)
    return tmp_path


def _built(executor_class, args: list):
    """The executor made for `args`, and the extra packages it was given."""
    executor = executor_class(base_beam_executor.BaseBeamExecutor.Context(beam_pipeline_args=args))
    packages = [a for a in executor._beam_pipeline_args if a.startswith("--extra_package=")]
    return executor, packages


OURS = [example_gen.Executor, schema_gen.Executor]
STOCK = [statistics_gen.Executor, transform.Executor, evaluator.Executor]


@pytest.mark.parametrize("executor_class", OURS + STOCK)
def test_a_direct_runner_gets_the_beam_arguments_as_given_and_no_tfx_package(
    executor_class, temporary
):
    executor, packages = _built(executor_class, LOCAL_ARGS)
    assert executor._beam_pipeline_args == LOCAL_ARGS
    assert packages == [] and os.listdir(temporary) == []


def test_tfx_packages_itself_for_the_same_arguments(temporary):
    """What the executors avoid: the stock base class builds TFX's sdist in the temporary folder
    and passes it as an extra package."""
    _, packages = _built(_StockBeamExecutor, LOCAL_ARGS)
    assert len(packages) == 1
    assert packages[0].removeprefix("--extra_package=").startswith(str(temporary))


@pytest.mark.parametrize("executor_class", [example_gen.Executor, transform.Executor])
def test_a_remote_runner_still_gets_tfx_packaged(executor_class, temporary):
    executor, packages = _built(executor_class, DATAFLOW_ARGS)
    assert executor._beam_pipeline_args[: len(DATAFLOW_ARGS)] == DATAFLOW_ARGS
    assert len(packages) == 1 and os.listdir(temporary)


@pytest.mark.parametrize(
    "args, in_process",
    [
        ([], True),
        (LOCAL_ARGS, True),
        (["--runner=DirectRunner"], True),
        (["--runner", "direct"], True),
        (["--runner=BundleBasedDirectRunner"], True),
        (DATAFLOW_ARGS, False),
        (["--runner=PortableRunner", "--job_endpoint=embed"], False),
        (["--runner=FlinkRunner"], False),
    ],
)
def test_which_runners_run_in_this_process(args, in_process):
    assert runs_in_process(args) is in_process


def test_the_stock_executors_are_the_stock_ones_but_for_packaging():
    for ours in STOCK:
        stock = ours.__mro__[2]
        assert ours.__mro__[1] is BeamExecutor
        assert stock.__module__.startswith("tfx.components.")
        assert ours.Do is stock.Do


def test_every_beam_component_of_a_pipeline_packages_nothing_locally(tmp_path):
    args = ["--direct_num_workers=2"]
    pipeline = create_pipeline(
        "p",
        str(tmp_path),
        str(tmp_path),
        task="binary",
        with_example_statistics="stock",
        with_transform=True,
        with_evaluator=True,
        beam_pipeline_args=args,
    )
    beam = {
        c.id: c.executor_spec.executor_class
        for c in pipeline.components
        if issubclass(getattr(c.executor_spec, "executor_class", object), BaseBeamExecutor)
    }
    assert set(beam) == {
        "ParquetExampleGen",
        "ParquetSchemaGen",
        "StatisticsGen",
        "Transform",
        "Evaluator",
    }
    assert all(issubclass(executor, BeamExecutor) for executor in beam.values())
