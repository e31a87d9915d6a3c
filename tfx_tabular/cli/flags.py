"""The flags of component and pipeline parameters, generated from their declarations
(`components.parameters.Parameter`): the flag is `--` and the parameter's name with dashes, its
default and help the declared ones, so a flag cannot drift from the parameter it sets; and the
values a command line gave them, by parameter name."""

from __future__ import annotations

import argparse
import functools
import typing
from collections.abc import Mapping, Sequence

from tfx_tabular.cli.common import csv, key_values, whole_number
from tfx_tabular.components.parameters import Parameter


def flag(name: str) -> str:
    """The flag of parameter `name`."""
    return "--" + name.replace("_", "-")


def _value_type(parameter: Parameter):
    """The argparse type of a single value: a whole number's minimum checked."""
    if parameter.type is int and parameter.minimum is not None:
        return functools.partial(whole_number, least=parameter.minimum)
    return parameter.type


def _argument(parameter: Parameter) -> dict:
    """`add_argument`'s keywords for a parameter's flag."""
    options = {"default": parameter.default, "help": parameter.help}
    if parameter.switch:
        on = bool(parameter.default)
        options.update(default=on, action=argparse.BooleanOptionalAction if on else "store_true")
        return options
    kind = typing.get_origin(parameter.type)
    if kind is dict:  # KEY=VALUE, repeatable: `parameter_values` makes the dict
        options["action"] = "append"
    elif kind is list:
        options["type"] = csv
    else:
        options["type"] = _value_type(parameter)
    if parameter.const is not None:
        options.update(nargs="?", const=parameter.const)
    for key in ("metavar", "choices"):
        if getattr(parameter, key) is not None:
            options[key] = getattr(parameter, key)
    return options


def add_parameter_flags(group, parameters: Mapping[str, Parameter], names: Sequence[str]) -> None:
    """The flags of these parameters (`names`, of `parameters`) in an argparse parser or group."""
    for name in names:
        group.add_argument(flag(name), dest=name, **_argument(parameters[name]))


def parameter_values(
    args: argparse.Namespace, parameters: Mapping[str, Parameter], names: Sequence[str]
) -> dict:
    """Parameter name → the value its flag gave, as the parameter takes it (KEY=VALUE flags as a
    dict, a malformed or repeated KEY a usage error)."""
    values = {}
    for name in names:
        value, kind = getattr(args, name), parameters[name].type
        if typing.get_origin(kind) is dict and value is not None:
            value = key_values(value, flag(name))
            if typing.get_origin(typing.get_args(kind)[1]) is list:
                value = {key: csv(text) for key, text in value.items()}
        values[name] = value
    return values
