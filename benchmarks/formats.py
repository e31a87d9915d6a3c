"""How the report writes a figure: one function per kind of number."""

from __future__ import annotations


def count(x: float) -> str:
    return f"{x:,.0f}"


def rate(x: float) -> str:
    return f"{x:,.0f}"


def ratio(x: float) -> str:
    return f"{x:,.0f}x" if x >= 20 else f"{x:.2f}x"


def percent(x: float) -> str:
    """A change: +12.3%."""
    return f"{x * 100:+.1f}%"


def share(x: float) -> str:
    """A part of a whole: 7.5%, 42%."""
    return f"{x:.1%}" if x < 0.1 else f"{x:.0%}"


def mib(n: float) -> str:
    return f"{n / 2**20:,.0f} MiB"


def size(n: float) -> str:
    return f"{n / 2**30:.2f} GiB" if n >= 2**30 else f"{n / 2**20:,.1f} MiB"


def seconds(x: float) -> str:
    return f"{x:.3f}" if x < 1 else f"{x:.2f}" if x < 10 else f"{x:.1f}"


def text(x) -> str:
    return str(x)


def score(x: float) -> str:
    """A metric between 0 and 1 (AUC): 0.953."""
    return f"{x:.3f}"


def cores(x: float) -> str:
    """CPU cores needed: 0.4, 13."""
    return f"{x:.1f}" if x < 10 else f"{x:,.0f}"
