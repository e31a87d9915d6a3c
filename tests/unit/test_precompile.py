"""The precompile step's parts that need no second process (tests/integration/test_kernels.py
checks the cache it fills): which kernels it covers, and how a conversion notices compiling."""

import pathlib

import numba

import tfx_tabular
from tfx_tabular.statistics import precompile


def test_every_module_with_numba_kernels_is_precompiled():
    """A kernel in a module the precompile step does not know would compile in every task."""
    package = pathlib.Path(tfx_tabular.__file__).parent
    with_kernels = {
        ".".join(path.relative_to(package.parent).with_suffix("").parts)
        for path in package.rglob("*.py")
        if "numba.njit" in path.read_text()
    }
    assert with_kernels == {m.__name__ for m in precompile.KERNEL_MODULES}
    names = {k.py_func.__name__ for k in precompile.kernels()}
    assert {"_serialize", "fingerprints", "string_table", "_split_counts"} <= names


def test_watching_compiles_calls_back_once_at_the_first_compilation():
    calls = []

    @numba.njit  # not cached: compiled in this process
    def doubled(x):
        return x * 2

    with precompile.watching_compiles(lambda: calls.append("compiling")) as watch:
        doubled(1)
        doubled(1.5)  # a second signature: compiled again
        doubled(2)  # already compiled
    assert calls == ["compiling"]
    assert watch.compiled == 2


def test_the_compile_notice_follows_quiet():
    """The conversion's compile notice reads --quiet's variable by name (a lower layer)."""
    from tfx_tabular.conversion import convert
    from tfx_tabular.runners.progress import QUIET_VARIABLE

    assert convert.QUIET_VARIABLE == QUIET_VARIABLE
