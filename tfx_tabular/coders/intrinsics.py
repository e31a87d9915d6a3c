"""LLVM operations numba does not offer, for the compiled writers: unaligned 8-byte word loads
and stores (a short string copied in one move), and the SSE4.2 CRC32C instruction with the check
of whether the compile target has it."""

from __future__ import annotations

import platform
from typing import Sequence

import numba
from llvmlite import binding as llvm_binding
from llvmlite import ir
from numba.core import cgutils
from numba.extending import intrinsic


@intrinsic
def load_word(typingctx, array, index):
    """Bytes array[index:index + 8] of a uint8 array as one little-endian uint64, unaligned
    (the caller checks the bounds)."""

    def codegen(context, builder, sig, args):
        data = context.make_array(sig.args[0])(context, builder, args[0]).data
        word = builder.bitcast(builder.gep(data, [args[1]]), ir.IntType(64).as_pointer())
        return builder.load(word, align=1)

    return numba.uint64(array, numba.int64), codegen


@intrinsic
def store_word(typingctx, array, index, word):
    """`word`'s 8 bytes into array[index:index + 8] of a uint8 array, unaligned (the caller
    checks the bounds)."""

    def codegen(context, builder, sig, args):
        data = context.make_array(sig.args[0])(context, builder, args[0]).data
        target = builder.bitcast(builder.gep(data, [args[1]]), ir.IntType(64).as_pointer())
        builder.store(args[2], target, align=1)
        return context.get_dummy_value()

    return numba.none(array, numba.int64, numba.uint64), codegen


def _llvm_call(builder, name: str, widths: Sequence[int], values):
    fnty = ir.FunctionType(ir.IntType(widths[0]), [ir.IntType(w) for w in widths[1:]])
    return builder.call(cgutils.get_or_insert_function(builder.module, fnty, name), values)


@intrinsic
def crc32c_u64(typingctx, crc, word):
    return numba.uint64(numba.uint64, numba.uint64), lambda context, builder, sig, args: _llvm_call(
        builder, "llvm.x86.sse42.crc32.64.64", (64, 64, 64), args
    )


@intrinsic
def crc32c_u8(typingctx, crc, byte):
    return numba.uint32(numba.uint32, numba.uint8), lambda context, builder, sig, args: _llvm_call(
        builder, "llvm.x86.sse42.crc32.32.8", (32, 32, 8), args
    )


def _target_has_sse42() -> bool:
    """Whether numba's code may use SSE4.2: the features numba targets (NUMBA_CPU_FEATURES,
    empty under NUMBA_CPU_NAME=generic: a portable cache, as the image's), else the host's. LLVM
    aborts the process on the instruction where the target lacks it."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return False
    features = numba.config.CPU_FEATURES
    if features is None:
        features = llvm_binding.get_host_cpu_features().flatten()
    return "+sse4.2" in features.split(",")


HAS_SSE42 = _target_has_sse42()
