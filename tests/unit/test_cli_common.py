"""tfx_tabular.cli.common: an error's exit code and hint come from its type, one KEY=VALUE
parser."""

import argparse
import json
import os
import warnings

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tfx_tabular.cli import common
from tfx_tabular.cli.app import build_parser, main
from tfx_tabular.cli.common import Exit, UsageError
from tfx_tabular.conversion.staging import OutputTakenError
from tfx_tabular.pipelines.compiled_runner import RunError
from tfx_tabular.pipelines.kubeflow import CompileError
from tfx_tabular.schemas.infer import LabelError, SchemaError
from tfx_tabular.source.dataset import open_dataset
from tfx_tabular.source.errors import ColumnError, InputError, InputNotFoundError
from tfx_tabular.source.mapping import UnsupportedColumnError


@pytest.mark.parametrize(
    "error, code, hint",
    [
        (InputNotFoundError("input folder x does not exist"), Exit.DATA, common.CHECK_PATH),
        (FileNotFoundError("schema.pbtxt"), Exit.DATA, common.CHECK_PATH),
        (ColumnError("column 'a' is int64 in f1 but string in f2"), Exit.DATA, "--exclude-columns"),
        (UnsupportedColumnError("column 'm': type map<...>"), Exit.DATA, "--exclude-columns"),
        (LabelError("label 'y' is not a feature"), Exit.DATA, "--label"),
        (InputError("no Parquet files under x"), Exit.DATA, None),
        (OutputTakenError("another run published first"), Exit.DATA, None),
        (SchemaError("the curated schema names features the data does not have"), Exit.DATA, None),
        (UsageError("--split is for Examples folders"), Exit.USAGE, None),
        (CompileError("--gpus without a Trainer"), Exit.USAGE, None),
        (RunError("task Trainer failed"), Exit.FAILURE, None),
        (RuntimeError("a bug"), Exit.FAILURE, None),
    ],
)
def test_exit_code_and_hint_come_from_the_errors_type(error, code, hint):
    assert common.classify(error) == code
    found = common.hint_for(error)
    assert (found is None) if hint is None else (hint in found)


def test_the_hint_does_not_depend_on_the_wording():
    # The old rules matched substrings ("does not exist", "column '"): the type decides now.
    assert common.hint_for(InputError("input folder x does not exist")) is None
    assert common.hint_for(ColumnError("two files disagree")) == common.EXCLUDE_COLUMN


def test_every_error_type_the_cli_knows_imports():
    assert all(isinstance(t, type) for t in common.error_types())


def test_report_error_is_one_line_and_a_hint(capsys):
    assert common.report_error(ColumnError("f: column 'a' is bad\nmore"), verbose=False) == 1
    assert capsys.readouterr().err.splitlines() == [
        "tfx-tabular: error: f: column 'a' is bad",
        f"hint: {common.EXCLUDE_COLUMN}",
    ]
    assert common.report_error(KeyError("k"), verbose=False) == 3  # not ours: its type named
    assert capsys.readouterr().err.splitlines() == [
        "tfx-tabular: error: KeyError: 'k'",
        "hint: rerun with --verbose for the full message and traceback",
    ]
    assert common.report_error(RunError("task t failed"), verbose=False) == 3
    assert capsys.readouterr().err.splitlines()[0] == "tfx-tabular: error: task t failed"


def test_a_runners_error_holding_a_workers_traceback_shows_its_exception_line(capsys):
    """Beam's DirectRunner re-raises an exception of its worker threads or processes as a
    RuntimeError whose message is the traceback's text."""
    text = (
        "Traceback (most recent call last):\n"
        '  File "apache_beam/runners/common.py", line 1501, in process\n'
        "OSError: [Errno 28] No space left on device [while running 'WriteExamples/ConvertShard']\n"
    )
    assert common.report_error(RuntimeError(text), verbose=False) == 3
    assert capsys.readouterr().err.splitlines() == [
        "tfx-tabular: error: RuntimeError: OSError: [Errno 28] No space left on device "
        "[while running 'WriteExamples/ConvertShard']",
        "hint: rerun with --verbose for the full message and traceback",
    ]


def test_one_key_value_parser_for_every_flag():
    assert common.key_values(["a=1", "b=x=y", "c="], "--param") == {"a": "1", "b": "x=y", "c": ""}
    assert common.key_values(None, "--param") == {}
    with pytest.raises(UsageError, match="--labels takes KEY=VALUE, not 'team'"):
        common.key_values(["team"], "--labels")
    with pytest.raises(UsageError, match="--labels takes KEY=VALUE, not '=ml'"):
        common.key_values(["=ml"], "--labels")
    with pytest.raises(UsageError, match="--split-pattern train is given twice"):
        common.key_values(["train=a*", "train=b*"], "--split-pattern")


def _main(monkeypatch, argv) -> int:
    """The CLI in this process, leaving the environment and warning filters as they were."""
    for name in ("TF_CPP_MIN_LOG_LEVEL", "GRPC_VERBOSITY", "PYTHONWARNINGS", "TF_USE_LEGACY_KERAS"):
        monkeypatch.setenv(name, os.environ.get(name, ""))
    with warnings.catch_warnings():
        return main(argv)


@pytest.fixture
def two_types(tmp_path) -> str:
    """Two files whose column `a` does not convert to one feature: a ColumnError."""
    data = tmp_path / "data"
    data.mkdir()
    pq.write_table(pa.table({"a": pa.array([1, 2]), "y": pa.array([0, 1])}), data / "1.parquet")
    pq.write_table(pa.table({"a": pa.array(["x", "z"]), "y": pa.array([1, 0])}), data / "2.parquet")
    return str(data)


def test_a_column_error_from_the_source_gets_the_exclude_hint(two_types, tmp_path, monkeypatch):
    with pytest.raises(ColumnError):
        open_dataset(two_types)
    code = _main(monkeypatch, ["infer-schema", two_types, "-o", str(tmp_path / "s.pbtxt")])
    assert code == Exit.DATA


def test_real_errors_end_in_their_types_code_and_hint(two_types, tmp_path, monkeypatch, capsys):
    schema = str(tmp_path / "s.pbtxt")
    assert (
        _main(monkeypatch, ["infer-schema", two_types, "-o", schema, "--exclude-columns", "a"]) == 0
    )
    capsys.readouterr()
    label = ["--exclude-columns", "a", "--label", "Y"]
    assert _main(monkeypatch, ["infer-schema", two_types, "-o", schema, *label]) == 1
    assert capsys.readouterr().err.splitlines() == [
        f"tfx-tabular: error: --label 'Y' is not a column of {two_types}; did you mean 'y'?",
        f"hint: --label takes a column of {two_types}: a, y",
    ]
    assert _main(monkeypatch, ["infer-schema", two_types, "-o", schema]) == 1
    assert capsys.readouterr().err.splitlines()[-1] == f"hint: {common.EXCLUDE_COLUMN}"
    missing = str(tmp_path / "missing")
    assert _main(monkeypatch, ["infer-schema", missing, "-o", schema]) == 1
    assert capsys.readouterr().err.splitlines() == [
        f"tfx-tabular: error: input folder {missing} does not exist",
        f"hint: {common.CHECK_PATH}",
    ]


@pytest.mark.parametrize(
    "flags, message",
    [
        (
            ["--split-buckets", "train=x,eval=1"],
            "--split-buckets train=x: N must be a whole number",
        ),
        (["--split-buckets", "train=2,train=1"], "--split-buckets train is given twice"),
        (["--split-pattern", "train"], "--split-pattern takes KEY=VALUE, not 'train'"),
        (["--partition-types", "day"], "--partition-types takes KEY=VALUE, not 'day'"),
    ],
)
def test_malformed_key_values_are_usage_errors(
    two_types, tmp_path, monkeypatch, capsys, flags, message
):
    out = str(tmp_path / "out")
    assert _main(monkeypatch, ["convert", two_types, out, "--exclude-columns", "a", *flags]) == 2
    assert capsys.readouterr().err.splitlines() == [f"tfx-tabular: error: {message}"]
    assert not os.path.exists(out)


def _options(parser: argparse.ArgumentParser, command: str = "tfx-tabular"):
    """(command, parser, action) of every option --help lists, over every subcommand."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _options(sub, name)
        elif action.option_strings and action.help is not argparse.SUPPRESS:
            yield command, parser, action


def test_every_option_has_help_and_shows_its_default():
    options = list(_options(build_parser()))
    assert len(options) > 100  # every subcommand walked
    for command, parser, action in options:
        flag = f"{command} {action.option_strings[-1]}"
        assert action.help, f"{flag} has no help text"
        default = action.default
        if default in (None, [], argparse.SUPPRESS) or isinstance(default, bool):
            continue  # nothing worth showing: unset, an empty list, a switch
        shown = parser._get_formatter()._expand_help(action)
        assert f"(default: {default})" in shown, f"{flag}: {shown!r} does not show {default!r}"


def test_the_defaults_flags_need_are_in_their_help(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["run", "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    assert "--epochs N passes over the train split (default: 1)" in shown
    assert "(default: 1024)" in shown and "(default: label)" in shown
    assert "(default: None)" not in shown and "(default: False)" not in shown


@pytest.mark.parametrize(
    "argv",
    [
        ["--quiet", "--json", "convert", "i", "o"],
        ["convert", "i", "o", "--quiet", "--json"],
        ["convert", "--json", "i", "-q", "o"],
    ],
)
def test_global_flags_go_before_or_after_the_subcommand(argv):
    args = build_parser().parse_args(argv)
    assert args.quiet and args.json and not args.verbose
    assert (args.input, args.output_dir) == ("i", "o")


@pytest.mark.parametrize("argv", [["--version"], ["convert", "--version"], ["head", "--version"]])
def test_version_before_or_after_a_subcommand_is_not_a_usage_error(monkeypatch, capsys, argv):
    assert _main(monkeypatch, argv) == 0  # `convert` lacks INPUT and OUTPUT_DIR: no matter
    assert capsys.readouterr().out.startswith("tfx-tabular 0.1.0 (TFX 1.16.0, TensorFlow 2.16.2")


@pytest.mark.parametrize("argv", [["--version", "--json"], ["show-schema", "--json", "--version"]])
def test_version_with_json_is_a_json_document(monkeypatch, capsys, argv):
    assert _main(monkeypatch, argv) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["package"] == "tfx-tabular" and document["version"] == "0.1.0"
    assert document["python"].startswith("3.10.")
    dependencies = document["dependencies"]
    assert dependencies["tfx"] == "1.16.0" and dependencies["apache-beam"] == "2.61.0"
    assert dependencies["pyarrow"].startswith("10.") and "tensorflow" in dependencies


def test_a_commands_own_hint_wins_over_its_types(capsys):
    error = UsageError("--region 'x' is not a Vertex AI region", hint="the regions: ...")
    assert common.hint_for(error) == "the regions: ..."
    assert common.report_error(error, verbose=False) == Exit.USAGE
    assert capsys.readouterr().err.splitlines() == [
        "tfx-tabular: error: --region 'x' is not a Vertex AI region",
        "hint: the regions: ...",
    ]
    assert common.classify(PermissionError("f")) == Exit.DATA  # not writable: bad input


def test_an_output_under_a_file_is_not_writable(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(common.BadInputError, match=r"^-o .*/file/out/s.pbtxt: .*/file is a file"):
        common.check_writable(str(tmp_path / "file" / "out" / "s.pbtxt"), "-o")
    common.check_writable(str(tmp_path / "new" / "folder"), "--pipeline-root")  # creatable
    assert not (tmp_path / "new").exists()  # checking created nothing
    common.check_writable("gs://bucket/root", "--pipeline-root")  # the write itself checks


@pytest.mark.parametrize(
    "argv, words",
    [
        (["head", "p", "-n", "0"], "argument -n: takes a whole number >= 1, not '0'"),
        (["convert", "i", "o", "--num-shards", "x"], "takes a whole number >= 0, not 'x'"),
        (["run", "--data-root", "d", "--pipeline-root", "r", "--epochs", "0"], ">= 1"),
    ],
)
def test_counts_are_checked_as_usage(capsys, argv, words):
    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args(argv)
    assert exit_.value.code == Exit.USAGE
    assert words in capsys.readouterr().err
