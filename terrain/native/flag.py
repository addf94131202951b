"""The stop flag as Numba kernels read it: :func:`stopped`, for the kernels of every package
(the grid's, the graph's, the hydrology's). Imported by Numba modules only: a process that
runs C kernels alone never loads Numba for it."""

import numba
from numba.extending import intrinsic

__all__ = ["stopped"]


@intrinsic
def stopped(typingctx, flag):
    """``flag[0]`` (a uint8 array: :func:`terrain.native.interruptible`) read from memory each
    time: a plain read, which nothing in the loop writes, LLVM hoists out of the loop, and
    the kernel would never see the flag set by another thread."""
    def codegen(context, builder, sig, args):
        ary = context.make_array(sig.args[0])(context, builder, args[0])
        return builder.load_atomic(ary.data, "monotonic", 1)
    return numba.types.uint8(flag), codegen
