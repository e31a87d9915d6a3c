"""The converting process's allocator: glibc told to keep the encoder's freed batch buffers."""

from __future__ import annotations

import ctypes
import ctypes.util

# glibc's mallopt parameters (malloc.h).
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3


def _libc():
    try:
        return ctypes.CDLL(ctypes.util.find_library("c"))
    except (OSError, TypeError):
        return None


def reuse_freed_memory() -> bool:
    """Have glibc keep the encoder's freed batch buffers (a few MiB each) for the next batch.
    Under its default, adaptive mmap threshold, a multi-threaded conversion mapped fresh pages
    for most batches and spent much of the encoder's CPU page-faulting them in. Up to 32 MiB of
    freed memory stays mapped. False where the C library has no mallopt (nothing changes)."""
    mallopt = getattr(_libc(), "mallopt", None)
    if mallopt is None:
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, 32 << 20) and mallopt(_M_TRIM_THRESHOLD, 32 << 20))


def release_freed_memory() -> bool:
    """Give the system back the freed memory glibc kept, once a conversion is over: in a process
    that goes on (`tfx-tabular run` trains in it), a wide table's conversion otherwise left
    hundreds of MiB of freed buffers mapped under the trainer. False without malloc_trim."""
    malloc_trim = getattr(_libc(), "malloc_trim", None)
    return malloc_trim is not None and bool(malloc_trim(0))
