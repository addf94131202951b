"""terrain.startup: the number of glibc malloc arenas is bounded, whatever the threads."""

import os
import subprocess
import sys

import pytest

COUNT_ARENAS = r"""
import ctypes, os, sys, tempfile, threading
import numpy as np
from terrain.startup import bound_malloc_arenas
print(bound_malloc_arenas())
start = threading.Barrier(24)
held = []
def work():
    start.wait()                       # all threads allocate at once: contention
    held.append([np.ones(4000, np.uint8) for _ in range(200)])   # below the mmap threshold
    start.wait()
ts = [threading.Thread(target=work) for _ in range(24)]
[t.start() for t in ts]; [t.join() for t in ts]
libc = ctypes.CDLL(None)
libc.fopen.restype = ctypes.c_void_p
path = tempfile.mktemp()
f = libc.fopen(path.encode(), b"w")
libc.malloc_info(0, ctypes.c_void_p(f)); libc.fclose(ctypes.c_void_p(f))
print(open(path).read().count("<heap nr="))
os.remove(path)
"""


def _arenas(env_value):
    env = dict(os.environ, TERRAIN_MALLOC_ARENAS=env_value)
    out = subprocess.run([sys.executable, "-c", COUNT_ARENAS], capture_output=True, text=True,
                         env=env, timeout=60, check=True).stdout.split()
    return out[0], int(out[1])


@pytest.mark.skipif(not sys.platform.startswith("linux") or not os.confstr("CS_GNU_LIBC_VERSION"),
                    reason="glibc only")
def test_arenas_are_bounded():
    limit, bounded = _arenas("2")
    assert limit == "2" and 1 <= bounded <= 2
    limit, default = _arenas("0")  # glibc's default: an arena for most of the 24 threads
    assert limit == "None" and default > 2
