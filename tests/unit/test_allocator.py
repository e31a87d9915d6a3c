"""glibc's allocator told to keep freed batch buffers: observed in glibc's own accounting."""

import subprocess
import sys

import pytest

from tfx_tabular.runners import allocator

# In a fresh process (nothing freed yet, so glibc's adaptive threshold is its 128 KiB start), an
# 8 MiB buffer is mapped by itself: mallinfo2's hblkhd counts it. Once told, glibc takes it from
# the heap.
_PROBE = """
import ctypes, sys
from tfx_tabular.runners import allocator

class Info(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]

libc = ctypes.CDLL(None)
libc.mallinfo2.restype = Info
libc.malloc.restype = ctypes.c_void_p
if sys.argv[1] == "told":
    assert allocator.reuse_freed_memory(int(sys.argv[2]))
before = libc.mallinfo2().hblkhd
buffer = libc.malloc(8 << 20)
print(libc.mallinfo2().hblkhd - before)
"""


def _mapped_bytes_of_an_8_mib_buffer(*argv: str) -> int:
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, *argv], capture_output=True, text=True, check=True
    )
    return int(out.stdout)


@pytest.mark.parametrize("kept", [allocator.CONVERSION_KEPT_BYTES, allocator.INPUT_KEPT_BYTES])
def test_told_glibc_takes_batch_buffers_from_its_heap_not_fresh_mappings(kept):
    assert _mapped_bytes_of_an_8_mib_buffer("default") >= 8 << 20
    assert _mapped_bytes_of_an_8_mib_buffer("told", str(kept)) == 0


def test_nothing_to_keep_changes_nothing():
    assert not allocator.reuse_freed_memory(0)


@pytest.mark.parametrize(
    "name, value",
    [
        ("MALLOC_MMAP_THRESHOLD_", "131072"),
        ("MALLOC_TRIM_THRESHOLD_", "131072"),
        ("GLIBC_TUNABLES", "glibc.malloc.mmap_threshold=131072"),
    ],
)
def test_a_users_own_thresholds_are_left_alone(monkeypatch, name, value):
    monkeypatch.setenv(name, value)
    assert not allocator.reuse_freed_memory(allocator.INPUT_KEPT_BYTES)
