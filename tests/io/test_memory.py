"""The memory a process may take (``terrain.io.available_memory``) under the limits a host
sets it: only ``MemAvailable`` was read, so a run under ``prlimit --as`` or in a cgroup with
``memory.max`` chose in-core work that the limit then refused (a MemoryError, the OOM
killer). The kernel's files are faked in a folder; one child process meets a real limit."""

import resource
import subprocess
import sys

import pytest

from cli import child_env
from terrain.io import _memory

GiB, MiB = 1 << 30, 1 << 20
#: what the fake host says it has free
HOST = 64 * GiB


@pytest.fixture
def kernel(tmp_path, monkeypatch):
    """A fake ``/proc`` and ``/sys/fs/cgroup``, and no address-space limit; returns a
    function that writes a file under either (``proc/…`` or ``cgroup/…``)."""
    proc, cgroup = tmp_path / "proc", tmp_path / "cgroup"
    monkeypatch.setattr(_memory, "PROC", str(proc))
    monkeypatch.setattr(_memory, "CGROUP_ROOT", str(cgroup))
    unlimited = (resource.RLIM_INFINITY, resource.RLIM_INFINITY)
    monkeypatch.setattr(resource, "getrlimit", lambda which: unlimited)

    def write(path, text):
        f = tmp_path / path
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(text)

    write("proc/meminfo", f"MemTotal: {2 * HOST // 1024} kB\n"
                          f"MemAvailable: {HOST // 1024} kB\nBuffers: 12 kB\n")
    write("proc/self/status", "Name:\tpython\nVmPeak:\t  900000 kB\n"
                              f"VmSize:\t {700 * MiB // 1024} kB\n"
                              f"VmData:\t {300 * MiB // 1024} kB\n")
    write("proc/self/cgroup", "0::/\n")
    return write


def test_the_host_alone(kernel):
    assert _memory.available_memory() == HOST


def test_an_address_space_limit_leaves_its_headroom(kernel, monkeypatch):
    """``prlimit --as``: the limit less the 700 MiB the process has mapped already."""
    limits = {resource.RLIMIT_AS: (GiB, 2 * GiB), resource.RLIMIT_DATA: (8 * GiB, 8 * GiB)}
    monkeypatch.setattr(resource, "getrlimit", lambda which: limits.get(
        which, (resource.RLIM_INFINITY, resource.RLIM_INFINITY)))
    assert _memory.available_memory() == GiB - 700 * MiB
    limits[resource.RLIMIT_DATA] = (500 * MiB, resource.RLIM_INFINITY)  # ``prlimit --data``
    assert _memory.available_memory() == 200 * MiB
    limits[resource.RLIMIT_AS] = (600 * MiB, 2 * GiB)  # already past it: nothing
    assert _memory.available_memory() == 0


def test_a_cgroup_v2_limit_and_its_parents(kernel):
    """The job's cgroup sets no limit, its parent does; the parent's page cache that the
    kernel reclaims first (``inactive_file``) is room."""
    kernel("proc/self/cgroup", "0::/batch/job7/step0\n")
    kernel("cgroup/batch/memory.max", "max\n")
    kernel("cgroup/batch/job7/memory.max", f"{4 * GiB}\n")
    kernel("cgroup/batch/job7/memory.current", f"{3 * GiB}\n")
    kernel("cgroup/batch/job7/memory.stat", f"anon {2 * GiB}\nfile {GiB}\n"
                                            f"active_file {768 * MiB}\n"
                                            f"inactive_file {256 * MiB}\n")
    kernel("cgroup/batch/job7/step0/memory.max", "max\n")
    kernel("cgroup/batch/job7/step0/memory.current", f"{3 * GiB}\n")
    assert _memory.available_memory() == 4 * GiB - (3 * GiB - 256 * MiB)
    # a tighter limit below it binds
    kernel("cgroup/batch/job7/step0/memory.max", f"{3 * GiB + 100 * MiB}\n")
    assert _memory.available_memory() == 100 * MiB


def test_a_hybrid_system_and_a_container_view(kernel):
    """v2 mounted at ``unified`` beside v1 controllers; v1's memory controller seen from
    inside a container, whose ``/proc/self/cgroup`` names the host's folders: the walk up
    finds the container's own limit at the hierarchy's root."""
    kernel("proc/self/cgroup", "9:name=systemd:/\n4:cpu,memory:/docker/0123abcd\n"
                               "1:cpu:/\n0::/docker/0123abcd\n")
    kernel("cgroup/unified/docker/0123abcd/memory.max", f"{8 * GiB}\n")
    kernel("cgroup/unified/docker/0123abcd/memory.current", f"{GiB}\n")
    assert _memory.available_memory() == 7 * GiB
    kernel("cgroup/memory/memory.limit_in_bytes", f"{2 * GiB}\n")
    kernel("cgroup/memory/memory.usage_in_bytes", f"{1536 * MiB}\n")
    kernel("cgroup/memory/memory.stat", f"inactive_file {10 * MiB}\n"
                                        f"total_inactive_file {64 * MiB}\n")
    assert _memory.available_memory() == 2 * GiB - (1536 - 64) * MiB
    # v1's "no limit" is a number near 2^63: the host's figure stands
    kernel("cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n")
    assert _memory.available_memory() == 7 * GiB


def test_without_memavailable_the_physical_memory(kernel):
    import os
    kernel("proc/meminfo", "MemTotal: 1000 kB\nMemFree: 10 kB\n")
    assert _memory.available_memory() == os.sysconf("SC_PHYS_PAGES") * os.sysconf(
        "SC_PAGE_SIZE")


def test_the_routes_weigh_the_limit(kernel):
    """The choices between in-core and tiled work (cost distance, fill, flow) and the blocked
    algorithm's budget take the cgroup's room, not the host's: a 5000² grid is in core with
    64 GiB free and tiled with 512 MiB left under ``memory.max``."""
    from pipelines.cost_distance import cost_distance_route
    from pipelines.fill import fill_route
    from pipelines.flow import flow_route
    from terrain.backend import get_backend

    shape, cpu = (5000, 5000), get_backend("cpu")
    routes = lambda: (cost_distance_route(shape), fill_route(shape, cpu),  # noqa: E731
                      flow_route(shape))
    assert routes() == ("in-core", "in-core", "in-core")
    kernel("proc/self/cgroup", "0::/job\n")
    kernel("cgroup/job/memory.max", f"{GiB}\n")
    kernel("cgroup/job/memory.current", f"{512 * MiB}\n")
    assert routes() == ("blocked", "tiled", "tiled")


def test_a_real_address_space_limit(tmp_path):
    """A child process limits its own address space to 300 MiB beyond what it has mapped:
    the figure is that headroom (not the host's), half of it can be had, and more than all
    of it cannot."""
    code = """if True:
        import resource
        import numpy as np
        from terrain.io import available_memory
        available_memory()  # its modules loaded before the limit is measured
        with open("/proc/self/status") as f:
            size = next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmSize:"))
        resource.setrlimit(resource.RLIMIT_AS, (size + (300 << 20), resource.RLIM_INFINITY))
        room = available_memory()
        print(room)
        np.ones(room // 2, np.uint8)
        try:
            np.ones(room + (16 << 20), np.uint8)
            print("allocated")
        except MemoryError:
            print("refused")
    """
    proc = subprocess.run([sys.executable, "-c", code], env=child_env(), capture_output=True,
                          text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    room, outcome = proc.stdout.split()
    assert 200 * MiB < int(room) <= 300 * MiB
    assert outcome == "refused"
