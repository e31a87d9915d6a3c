"""The process's allocator: glibc told to keep freed batch buffers for the next batch, in a
conversion's encoder and in a trainer's columnar input."""

from __future__ import annotations

import ctypes
import ctypes.util
import os

# glibc's mallopt parameters (malloc.h).
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
# glibc's largest mmap threshold on 64-bit systems (DEFAULT_MMAP_THRESHOLD_MAX): mallopt refuses
# a larger one.
_MMAP_THRESHOLD_MAX = 32 << 20
# A user's own settings of glibc's thresholds, which ours would otherwise override.
_USER_SETTINGS = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")
# What a conversion keeps: its encoder's batch buffers are a few MiB each.
CONVERSION_KEPT_BYTES = 32 << 20
# What a trainer's input keeps: a group of columnar records is decoded into tens of MiB of
# column buffers, freed once its batches are cut, and the next group needs as many.
INPUT_KEPT_BYTES = 256 << 20


def _libc():
    try:
        return ctypes.CDLL(ctypes.util.find_library("c"))
    except (OSError, TypeError):
        return None


def reuse_freed_memory(kept_bytes: int = CONVERSION_KEPT_BYTES) -> bool:
    """Have glibc keep up to `kept_bytes` of freed memory for the next batch, buffers up to
    32 MiB taken from it rather than mapped each time. Under its default, adaptive mmap
    threshold, glibc mapped fresh pages for most batches and the process spent much of its CPU
    page-faulting them in. False where the process's environment sets glibc's thresholds itself
    (`MALLOC_MMAP_THRESHOLD_`, `MALLOC_TRIM_THRESHOLD_`, or in `GLIBC_TUNABLES`), or the C library
    has no mallopt or refuses the settings: nothing changes."""
    mallopt = getattr(_libc(), "mallopt", None)
    if mallopt is None or kept_bytes <= 0 or _user_set_thresholds():
        return False
    mmap_threshold = min(kept_bytes, _MMAP_THRESHOLD_MAX)
    return bool(
        mallopt(_M_MMAP_THRESHOLD, mmap_threshold) and mallopt(_M_TRIM_THRESHOLD, kept_bytes)
    )


def _user_set_thresholds() -> bool:
    tunables = os.environ.get("GLIBC_TUNABLES", "")
    return any(os.environ.get(name) for name in _USER_SETTINGS) or any(
        name in tunables for name in ("glibc.malloc.mmap_threshold", "glibc.malloc.trim_threshold")
    )


def release_freed_memory() -> bool:
    """Give the system back the freed memory glibc kept, once a conversion is over: in a process
    that goes on (`tfx-tabular run` trains in it), a wide table's conversion otherwise left
    hundreds of MiB of freed buffers mapped under the trainer. False without malloc_trim."""
    malloc_trim = getattr(_libc(), "malloc_trim", None)
    return malloc_trim is not None and bool(malloc_trim(0))
