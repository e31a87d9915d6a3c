"""tfx_tabular.cli.flags: the flags of parameters come from their declarations, so each flag is
its parameter's name with its default and help, and sets that parameter and no other."""

import argparse
import dataclasses
import inspect

import pytest

from tfx_tabular.cli import data, flags, pipelines
from tfx_tabular.cli.app import build_parser
from tfx_tabular.components.parquet_example_gen.spec import PARAMETERS as EXAMPLE_GEN
from tfx_tabular.components.parquet_schema_gen.spec import PARAMETERS as SCHEMA_GEN
from tfx_tabular.conversion import plan
from tfx_tabular.pipelines import pipeline
from tfx_tabular.schemas.source import schema_of

CONVERSION_NAMES = [name for group in data.CONVERSION_FLAGS.values() for name in group]
# Each command's generated flags (its declarations, the parameters it sets) and its hand-written
# ones: inputs, outputs and runner settings that are no parameter of what the command runs.
COMMANDS = {
    "convert": (
        EXAMPLE_GEN,
        CONVERSION_NAMES,
        {"--split-buckets", "--split-pattern", "--example-statistics", "--beam-arg"},
    ),
    "infer-schema": (
        SCHEMA_GEN,
        data.SCHEMA_FLAGS,
        {"--output", "--example-statistics", "--beam-arg"},
    ),
    "run": (
        pipeline.PARAMETERS,
        pipelines.PIPELINE_FLAGS,
        {"--data-root", "--pipeline-root", "--pipeline-name", "--beam-arg"},
    ),
    "compile": (
        pipeline.PARAMETERS,
        pipelines.PIPELINE_FLAGS,
        {
            "--target",
            "--data-root",
            "--pipeline-root",
            "--pipeline-name",
            "--image",
            "--output",
            "--beam-arg",
            "--gpus",
            "--gpu-type",
            "--cpu-limit",
            "--memory-limit",
            "--download-volume-size",
            "--download-volume-storage-class",
            "--training-job-project",
            "--training-job-region",
            "--training-job-machine-type",
            "--training-job-replicas",
            "--training-job-service-account",
            "--training-job-input-workers",
            "--training-job-input-worker-machine-type",
        },
    ),
    "demo": (
        pipeline.PARAMETERS,
        pipelines.PIPELINE_FLAGS,
        {"--rows", "--workdir", "--pipeline-name", "--beam-arg"},
    ),
}
GLOBAL = {"--help", "--verbose", "--quiet", "--json", "--version"}
# The demo shows its example statistics: its one default that is not the declaration's.
DEMO_DEFAULTS = {"with_example_statistics": "ours"}


def _subcommand(name: str) -> argparse.ArgumentParser:
    parser = build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return sub.choices[name]


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_flag_is_a_parameter_of_that_name_with_its_default_and_help(command):
    parameters, names, hand_written = COMMANDS[command]
    generated = {}
    for action in _subcommand(command)._actions:
        if action.dest in parameters and action.dest in names:
            generated[action.dest] = action
        else:
            others = set(action.option_strings) - GLOBAL - {"-h", "-v", "-q", "-o"}
            assert others <= hand_written, f"{command}: {others} sets no parameter"
            assert not {flags.flag(n) for n in parameters} & set(action.option_strings)
    assert sorted(generated) == sorted(names)
    for name, action in generated.items():
        declared = parameters[name]
        assert action.option_strings[0] == flags.flag(name)
        default = (
            DEMO_DEFAULTS.get(name, declared.default) if command == "demo" else declared.default
        )
        assert action.default == default, f"{command} {flags.flag(name)}"
        assert action.help.startswith(declared.help) and declared.help


def test_each_command_hands_its_flags_to_a_keyword_of_the_same_name():
    options = {
        f.name for cls in (plan.SourceOptions, plan.OutputOptions) for f in dataclasses.fields(cls)
    }
    assert set(CONVERSION_NAMES) <= options  # ConversionConfig.from_parameters drops others
    assert set(data.SCHEMA_FLAGS) <= set(inspect.signature(schema_of).parameters)
    keywords = set(inspect.signature(pipeline.create_pipeline).parameters)
    assert set(pipeline.PARAMETERS) <= keywords


def test_the_values_flags_give_are_the_parameters_values():
    argv = [
        "convert", "in", "out",
        "--exclude-columns", "a,b",
        "--partition-filter", "day=1,2",
        "--partition-types", "day=string",
        "--eval-last-partitions", "2",
        "--compression", "gzip",
        "--compression-level", "9",
        "--read-batch-rows", "100",
        "--read-batch-bytes", "4096",
    ]  # fmt: skip
    values = flags.parameter_values(build_parser().parse_args(argv), EXAMPLE_GEN, CONVERSION_NAMES)
    config = plan.ConversionConfig.from_parameters(values)
    assert config.source.exclude_columns == ("a", "b")
    assert config.source.partition_filter == {"day": ["1", "2"]}
    assert config.source.partition_types == {"day": "string"}
    assert config.source.eval_last_partitions == 2
    assert (config.output.compression, config.output.compression_level) == ("gzip", 9)
    assert (config.output.read_batch_rows, config.output.read_batch_bytes) == (100, 4096)
    defaults = flags.parameter_values(
        build_parser().parse_args(["convert", "in", "out"]), EXAMPLE_GEN, CONVERSION_NAMES
    )
    assert plan.ConversionConfig.from_parameters(defaults) == plan.ConversionConfig()


def test_switches_and_optional_values_parse_as_their_parameters_take_them():
    run = ["run", "--data-root", "d", "--pipeline-root", "r"]
    args = build_parser().parse_args(run)
    assert (args.with_transform, args.enable_cache, args.with_example_statistics) == (
        False,
        True,
        None,
    )
    args = build_parser().parse_args(run + ["--no-enable-cache", "--with-example-statistics"])
    assert (args.enable_cache, args.with_example_statistics) == (False, "ours")
    args = build_parser().parse_args(run + ["--with-example-statistics", "stock"])
    assert args.with_example_statistics == "stock"
    args = build_parser().parse_args(["infer-schema", "--sample-statistics", "in", "-o", "s"])
    assert args.sample_statistics is True and args.input == "in"  # a switch takes no value


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--eval-last-partitions", "0"], "takes a whole number >= 1"),
        (["--num-shards", "-1"], "takes a whole number >= 0"),
        (["--compression-level", "10"], "invalid choice"),
        (["--decimal-as", "text"], "invalid choice"),
    ],
)
def test_declared_limits_are_usage_errors(argv, message, capsys):
    with pytest.raises(SystemExit) as exit:
        build_parser().parse_args(["convert", "in", "out", *argv])
    assert exit.value.code == 2 and message in capsys.readouterr().err
