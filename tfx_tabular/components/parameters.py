"""Component parameters declared once, in each component's `spec.py`: name, type, default, what
it does, and how a command line writes its value.

The component builds its TFX ComponentSpec from them, the executor reads its properties through
`resolve` (defaults applied, JSON lists and dicts decoded), and the CLI generates its flags from the
same declarations (`tfx_tabular.cli.flags`: the flag is the name, its default and help these). No
TFX import here, so the CLI reads them without loading TFX.
"""

from __future__ import annotations

import dataclasses
import json
import typing
from collections.abc import Mapping
from typing import Any, Optional, Sequence


@dataclasses.dataclass(frozen=True)
class Parameter:
    """An execution parameter: its type (as TFX declares it), default (None: unset) and `help`
    (one line: what it does). The rest says how a command line writes the value: `metavar`, the
    allowed `choices`, a whole number's `minimum`, a `switch` (a flag without a value: given, it is on),
    or `const`, the value of the flag given without one (its value is then optional)."""

    type: Any
    default: Any = None
    optional: bool = True
    help: str = ""
    metavar: Optional[str] = None
    choices: Optional[Sequence[Any]] = None
    minimum: Optional[int] = None
    switch: bool = False
    const: Any = None

    @property
    def is_json(self) -> bool:
        # TFX hands List and Dict parameters to executors as JSON text.
        return typing.get_origin(self.type) in (list, dict)


def execution_parameters(parameters: Mapping[str, Parameter]) -> dict:
    """`ComponentSpec.PARAMETERS` for these declarations."""
    from tfx.types.component_spec import ExecutionParameter

    return {
        name: ExecutionParameter(type=p.type, optional=p.optional) for name, p in parameters.items()
    }


def resolve(exec_properties: Mapping[str, Any], parameters: Mapping[str, Parameter]) -> dict:
    """Each declared parameter's value as the executor uses it: decoded, or its default."""
    values = {}
    for name, p in parameters.items():
        value = exec_properties.get(name)
        if isinstance(value, str) and p.is_json:
            value = json.loads(value)
        values[name] = p.default if value is None else value
    return values
