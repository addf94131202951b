"""A software prefetch for Numba kernels: ``prefetch(arr, i)`` hints the CPU to bring
``arr[i]`` into the caches (LLVM's ``llvm.prefetch``: a read, high temporal locality, data
cache). Numba has no prefetch of its own.

Priority-queue loops (Dial's buckets, heaps) know the vertices they will take next a few
steps ahead, but an out-of-order core cannot start those loads itself: every relaxation's
unpredictable branch ends its look-ahead. A hint issued a few pops early overlaps the cache
misses of the next vertices with the work on the current one (measured in
:mod:`terrain.graph.sssp`). The hint never faults and changes no result.

``terrain/grid/sssp.py`` has the same intrinsic as ``_prefetch`` (grid cost distance); this
module is the shared one for new kernels.
"""

import numba
from llvmlite import binding as llvm_binding
from llvmlite import ir as llvm_ir
from numba.core import cgutils
from numba.extending import intrinsic

__all__ = ["prefetch"]

# opaque pointers from LLVM 15 on
_PREFETCH_NAME = "llvm.prefetch.p0" if llvm_binding.llvm_version_info[0] >= 15 else \
    "llvm.prefetch.p0i8"


@intrinsic
def prefetch(typingctx, arr, idx):
    """``prefetch(arr, idx)`` inside a Numba kernel: hint that ``arr[idx]`` is read soon
    (no bounds check: a prefetch of any address is harmless)."""
    sig = numba.types.void(arr, idx)

    def codegen(context, builder, signature, args):
        aryty = signature.args[0]
        ary = context.make_array(aryty)(context, builder, args[0])
        ptr = cgutils.get_item_pointer(context, builder, aryty, ary, [args[1]],
                                       wraparound=False)
        i8p = llvm_ir.IntType(8).as_pointer()
        i32 = llvm_ir.IntType(32)
        fnty = llvm_ir.FunctionType(llvm_ir.VoidType(), [i8p, i32, i32, i32])
        fn = cgutils.get_or_insert_function(builder.module, fnty, _PREFETCH_NAME)
        builder.call(fn, [builder.bitcast(ptr, i8p), llvm_ir.Constant(i32, 0),
                          llvm_ir.Constant(i32, 3), llvm_ir.Constant(i32, 1)])
        return context.get_dummy_value()
    return sig, codegen
