"""Old keyword spellings of the components and `create_pipeline`, accepted for one release with a
DeprecationWarning. Each `spec.py` names its renamed parameters (`RENAMED_PARAMETERS`). No TFX
import here."""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Mapping
from typing import Any

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _callers_level() -> int:
    """The `stacklevel` of the first frame outside this package, seen from `warn_renamed`: the
    warning names the caller's line (Python shows DeprecationWarnings of `__main__` by default)."""
    frame, level = sys._getframe(1), 1  # warn_renamed's own frame is level 1
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE + os.sep):
        frame, level = frame.f_back, level + 1
    return level


def warn_renamed(owner: str, old: str, new: str) -> None:
    """The DeprecationWarning of an old keyword spelling, at the caller's line."""
    warnings.warn(
        f"{owner}({old}=...) is deprecated and will be removed in the next release: use {new}=...",
        DeprecationWarning,
        stacklevel=_callers_level(),
    )


def with_renamed(
    owner: str,
    values: Mapping[str, Any],
    deprecated: Mapping[str, Any],
    renamed: Mapping[str, str],
) -> dict:
    """`values` (new keyword → value, None when not given) with the old spellings in `deprecated`
    (the caller's `**kwargs`) moved to their new keywords (`renamed`: old → new), each with a
    DeprecationWarning. Any other keyword, or both spellings of one, is a TypeError, as Python
    raises for a keyword it does not know."""
    result = dict(values)
    for old, value in deprecated.items():
        new = renamed.get(old)
        if new is None:
            raise TypeError(f"{owner}() got an unexpected keyword argument {old!r}")
        if result.get(new) is not None:
            raise TypeError(f"{owner}() got both {new!r} and its deprecated spelling {old!r}")
        warn_renamed(owner, old, new)
        result[new] = value
    return result
