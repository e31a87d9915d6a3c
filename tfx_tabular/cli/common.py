"""What every command shares: exit codes, errors (their exit code and hint come from their type),
lines for people, and argument helpers (KEY=VALUE options, comma-separated lists). Light: it imports nothing heavy, and the error types only when an error is
reported."""

from __future__ import annotations

import argparse
import enum
import os
import sys
import tempfile
import traceback
from collections.abc import Iterable, Mapping, Sequence
from typing import Optional

PROG = "tfx-tabular"


class Exit(enum.IntEnum):
    OK = 0
    DATA = 1  # bad input or data: the message names the file / column
    USAGE = 2  # the command line (argparse's own code, and options that do not fit together)
    FAILURE = 3  # a pipeline task or the platform failed


class CommandError(ValueError):
    """An error a command finds itself, before the work it guards; `hint` says what would do."""

    def __init__(self, message: str, hint: Optional[str] = None):
        super().__init__(message)
        self.hint = hint


class UsageError(CommandError):
    """Options that do not fit together (exit code 2, like argparse's own errors)."""


class BadInputError(CommandError):
    """A file or folder a command cannot use (exit code 1): missing, unreadable, not writable or
    not holding what it should; the message names it and its flag."""


# ---- errors: exit code and hint by type


CHECK_PATH = "check the path; gs:// URIs work too"
CHECK_PERMISSIONS = "choose a place you can write to, or change its permissions"
EXCLUDE_COLUMN = "fix the file, or leave the column out with --exclude-columns COLUMN"
LABEL = "--label takes one of the features listed"


def error_types() -> dict:
    """Error type → (exit code, hint or None). The most specific type an error is an instance of
    decides (its class's method resolution order). The messages of these types are ours, written
    for people: shown without the type's name. Any other error exits FAILURE (a task, the
    platform, or a bug), its type named, the traceback one --verbose away."""
    from tfx_tabular.pipelines.compiled_runner import RunError
    from tfx_tabular.pipelines.kubeflow import CompileError
    from tfx_tabular.schemas.infer import LabelError, SchemaError
    from tfx_tabular.source.errors import ColumnError, InputError, InputNotFoundError
    from tfx_tabular.source.mapping import UnsupportedColumnError
    from tfx_tabular.training.data_service import DataServiceError

    return {
        UsageError: (Exit.USAGE, None),
        BadInputError: (Exit.DATA, None),
        CompileError: (Exit.USAGE, None),
        InputError: (Exit.DATA, None),
        InputNotFoundError: (Exit.DATA, CHECK_PATH),
        ColumnError: (Exit.DATA, EXCLUDE_COLUMN),
        UnsupportedColumnError: (Exit.DATA, EXCLUDE_COLUMN),
        SchemaError: (Exit.DATA, None),
        LabelError: (Exit.DATA, LABEL),
        FileNotFoundError: (Exit.DATA, CHECK_PATH),
        NotADirectoryError: (Exit.DATA, None),
        IsADirectoryError: (Exit.DATA, None),
        FileExistsError: (Exit.DATA, None),
        PermissionError: (Exit.DATA, CHECK_PERMISSIONS),
        RunError: (Exit.FAILURE, None),
        DataServiceError: (Exit.DATA, None),
    }


def _rule(error: BaseException) -> Optional[tuple]:
    types = error_types()
    return next((types[t] for t in type(error).__mro__ if t in types), None)


def classify(error: BaseException) -> Exit:
    rule = _rule(error)
    return Exit.FAILURE if rule is None else rule[0]


def hint_for(error: BaseException) -> Optional[str]:
    """The error's own hint (a `hint` attribute, see CommandError), else its type's."""
    own = getattr(error, "hint", None)
    if isinstance(own, str) and own:
        return own
    rule = _rule(error)
    return None if rule is None else rule[1]


def headline(error: BaseException) -> str:
    """The line that says what failed: the message's first, or, when the message is a traceback's
    text (a runner re-raising a worker's exception, as Beam's DirectRunner does), the exception
    line that ends it, not "Traceback (most recent call last):"."""
    lines = [line.strip() for line in str(error).strip().splitlines() if line.strip()]
    if not lines:
        return ""
    return lines[-1] if lines[0].startswith("Traceback (most recent call last)") else lines[0]


def report_error(error: BaseException, verbose: bool) -> Exit:
    """One line (two with a hint) on stderr; the traceback too with --verbose."""
    rule = _rule(error)
    code, hint = classify(error), hint_for(error)
    if verbose:
        traceback.print_exception(type(error), error, error.__traceback__, file=sys.stderr)
    first = headline(error)
    shown = first if rule is not None else f"{type(error).__name__}: {first}"
    print(f"{PROG}: error: {shown}", file=sys.stderr)
    if hint is None and code == Exit.FAILURE and not verbose:
        hint = "rerun with --verbose for the full message and traceback"
    if hint:
        print(f"hint: {hint}", file=sys.stderr)
    return code


# ---- output


def say(args, text: str = "") -> None:
    """A line for people (stdout; stderr under --json); nothing under --quiet."""
    if not args.quiet:
        print(text, flush=True)


# ---- checks before the work


def named(flag: str, path: str) -> str:
    """A path as an error names it: after its flag, if it has one (not a positional)."""
    return f"{flag} {path}" if flag else path


def check_writable(path: str, flag: str = "") -> None:
    """A local output the command can write, checked before any work: the file or folder itself
    if it exists, else the nearest folder it would be created in (a file created and removed at
    once, so read-only folders, file systems and missing permissions all show, for root too).
    Object stores (`gs://`) are checked by the write itself."""
    if "://" in path:
        return
    target = os.path.abspath(path)
    while not os.path.exists(target):
        target = os.path.dirname(target)
    try:
        if os.path.isdir(target):
            with tempfile.TemporaryFile(dir=target):
                pass
        elif target != os.path.abspath(path):
            raise BadInputError(f"{named(flag, path)}: {target} is a file, not a folder")
        elif not os.access(target, os.W_OK):
            raise PermissionError(f"{target} is read-only")
    except OSError as e:
        reason = e.strerror or str(e)
        raise BadInputError(
            f"{named(flag, path)} is not writable ({reason}: {target})", hint=CHECK_PERMISSIONS
        ) from None


def check_names(
    source: str,
    column_flags: Mapping[str, Sequence[str]],
    partition_flags: Optional[Mapping[str, Sequence[str]]] = None,
) -> None:
    """The columns (flag → names) and partition keys the command line names, checked against the
    source's footers before any work, with a "did you mean"; nothing is read if no flag names
    one."""
    if not any(column_flags.values()) and not any((partition_flags or {}).values()):
        return
    from tfx_tabular.conversion import columns

    columns.check_names(source, columns.source_names(source), column_flags, partition_flags)


# ---- arguments


class HelpFormatter(argparse.HelpFormatter):
    """--help gives each option's default after its meaning, where there is one to show (not
    None, False or an empty list)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        unshown = default is None or default is False or default is argparse.SUPPRESS
        if "%(default)" in text or unshown or default == [] or not action.option_strings:
            return text
        return f"{text} (default: %(default)s)"


class Parser(argparse.ArgumentParser):
    """The parser of the command and of each subcommand: defaults shown in --help."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)


def whole_number(text: str, least: int) -> int:
    """A whole number >= `least` (an argparse type, with `least` bound)."""
    try:
        value = int(text)
    except ValueError:
        value = None
    if value is None or value < least:
        raise argparse.ArgumentTypeError(f"takes a whole number >= {least}, not {text!r}")
    return value


def positive_int(text: str) -> int:
    """A whole number > 0 (an argparse type)."""
    return whole_number(text, 1)


def non_negative_int(text: str) -> int:
    """A whole number >= 0 (an argparse type)."""
    return whole_number(text, 0)


def csv(text: str) -> list[str]:
    """A comma-separated list (an argparse type; empty items dropped)."""
    return [t for t in text.split(",") if t]


def key_values(texts: Optional[Iterable[str]], flag: str) -> dict[str, str]:
    """KEY=VALUE options (repeatable, or comma-separated lists of them) as a dict; a malformed or
    repeated KEY is a usage error naming `flag`."""
    values: dict[str, str] = {}
    for text in texts or ():
        key, equals, value = text.partition("=")
        if not equals or not key:
            raise UsageError(f"{flag} takes KEY=VALUE, not {text!r}")
        if key in values:
            raise UsageError(f"{flag} {key} is given twice")
        values[key] = value
    return values
