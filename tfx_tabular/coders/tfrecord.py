"""TFRecord framing: each record is its length (uint64, little-endian), the masked CRC32C of
those 8 bytes, the data, and the masked CRC32C of the data. CRC32C by the SSE4.2 instruction
where the compile target has it, else slicing-by-8 tables."""

from __future__ import annotations

import sys

import numba
import numpy as np

from tfx_tabular.coders import intrinsics

if sys.byteorder != "little":  # the kernels read 8-byte little-endian words
    raise ImportError("tfx_tabular.coders.tfrecord needs a little-endian machine")

LENGTH_BYTES = 8
CRC_BYTES = 4
HEAD_BYTES = LENGTH_BYTES + CRC_BYTES  # before a record's data
TAIL_BYTES = CRC_BYTES  # after it
FRAME_BYTES = HEAD_BYTES + TAIL_BYTES
_CRC32C_POLYNOMIAL = 0x82F63B78  # Castagnoli's, bit-reversed
_CRC_MASK_DELTA = 0xA282EAD8  # TFRecord's masking constant


def _crc32c_tables() -> np.ndarray:
    table = np.zeros((8, 256), dtype=np.uint32)
    for i in range(256):
        crc = i
        for _ in range(8):
            crc = (crc >> 1) ^ _CRC32C_POLYNOMIAL if crc & 1 else crc >> 1
        table[0, i] = crc
    for i in range(256):
        for k in range(1, 8):
            table[k, i] = (table[k - 1, i] >> 8) ^ table[0, table[k - 1, i] & 0xFF]
    return table


CRC_TABLES = _crc32c_tables()


@numba.njit(cache=True, nogil=True)
def crc32c_table(buf, start, end, tables):
    """Slicing-by-8 CRC32C, for CPUs without the SSE4.2 instruction."""
    crc = np.uint32(0xFFFFFFFF)
    i = start
    while i + 8 <= end:
        lo = crc ^ (
            np.uint32(buf[i])
            | (np.uint32(buf[i + 1]) << 8)
            | (np.uint32(buf[i + 2]) << 16)
            | (np.uint32(buf[i + 3]) << 24)
        )
        crc = (
            tables[7, lo & 0xFF]
            ^ tables[6, (lo >> 8) & 0xFF]
            ^ tables[5, (lo >> 16) & 0xFF]
            ^ tables[4, lo >> 24]
            ^ tables[3, buf[i + 4]]
            ^ tables[2, buf[i + 5]]
            ^ tables[1, buf[i + 6]]
            ^ tables[0, buf[i + 7]]
        )
        i += 8
    while i < end:
        crc = tables[0, (crc ^ buf[i]) & 0xFF] ^ (crc >> 8)
        i += 1
    return crc ^ np.uint32(0xFFFFFFFF)


@numba.njit(cache=True, nogil=True)
def crc32c_sse42(buf, start, end, tables):
    """CRC32C with the SSE4.2 instruction (several times the table version's speed); `tables`
    is unused, kept so both kernels take the same arguments."""
    n_words = (end - start) // 8
    words = buf[start : start + 8 * n_words].view(np.uint64)
    crc = np.uint64(0xFFFFFFFF)
    for w in range(n_words):
        crc = intrinsics.crc32c_u64(crc, words[w])
    c = np.uint32(crc)
    for i in range(start + 8 * n_words, end):
        c = intrinsics.crc32c_u8(c, buf[i])
    return c ^ np.uint32(0xFFFFFFFF)


_crc32c = crc32c_sse42 if intrinsics.HAS_SSE42 else crc32c_table


@numba.njit(cache=True, nogil=True, inline="always")
def put_masked_crc(buf, pos, start, end, tables):
    """TFRecord's masked CRC32C of buf[start:end], little-endian at buf[pos:pos + 4]."""
    crc = _crc32c(buf, start, end, tables)
    masked = np.uint32(((crc >> 15) | (crc << 17)) + np.uint32(_CRC_MASK_DELTA))
    for k in range(CRC_BYTES):
        buf[pos + k] = np.uint8((masked >> np.uint32(8 * k)) & np.uint32(0xFF))


@numba.njit(cache=True, nogil=True, inline="always")
def put_record_head(buf, pos, length, tables):
    """A record's head at buf[pos]: the data's `length` and its masked CRC32C; returns where the
    data goes."""
    size = np.uint64(length)
    for k in range(LENGTH_BYTES):
        buf[pos + k] = np.uint8((size >> np.uint64(8 * k)) & np.uint64(0xFF))
    put_masked_crc(buf, pos + LENGTH_BYTES, pos, pos + LENGTH_BYTES, tables)
    return pos + HEAD_BYTES
