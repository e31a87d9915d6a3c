"""The demo's data: the Criteo-shaped dataset (`criteo`) used by `make demo`, the tests and the
benchmarks.
"""

__all__ = [
    "criteo",
]
