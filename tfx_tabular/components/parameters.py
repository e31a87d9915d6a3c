"""Component parameters declared once, in each component's `spec.py`: name, type and default.

The component builds its TFX ComponentSpec from them, the executor reads its properties through
`resolve` (defaults applied, JSON lists and dicts decoded), and the CLI takes its defaults from the
same declarations. No TFX import here, so the CLI can read defaults without loading TFX.
"""

from __future__ import annotations

import dataclasses
import json
import typing
from collections.abc import Mapping
from typing import Any


@dataclasses.dataclass(frozen=True)
class Parameter:
    """An execution parameter: its type (as TFX declares it) and default (None: unset)."""

    type: Any
    default: Any = None
    optional: bool = True

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
