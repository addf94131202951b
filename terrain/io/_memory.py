"""The memory this process may still take: what the routes that choose between in-core and
tiled work (and the budgets of the blocked algorithm, the graph reader and ``synth``) weigh
their working sets against.

The host's ``MemAvailable`` is one bound; a process under ``prlimit --as`` (``RLIMIT_AS``),
``--data`` (``RLIMIT_DATA``) or in a cgroup with a memory limit (a container, a systemd
unit, a batch scheduler's job) may take far less, and a route that weighed the host's figure
ended in a ``MemoryError`` or the OOM killer.
"""

import os
import resource

__all__ = ["available_memory"]

#: where the kernel's files are read (tests point these at files of their own)
PROC = "/proc"
CGROUP_ROOT = "/sys/fs/cgroup"

#: address-space limits, with the line of ``/proc/self/status`` that says how much of each
#: the process holds already (Python, NumPy and GDAL map hundreds of MB before any work)
_ADDRESS_LIMITS = (("RLIMIT_AS", "VmSize:"), ("RLIMIT_DATA", "VmData:"))


def available_memory():
    """Bytes this process can still allocate without swapping or being refused: the least
    of the host's ``MemAvailable`` (else its physical memory), each address-space limit
    (``RLIMIT_AS``, ``RLIMIT_DATA``) less what the process has mapped of it, and each memory
    limit of the process's cgroups (v2 ``memory.max``, v1 ``memory.limit_in_bytes``, the
    cgroup's and its ancestors') less what the cgroup holds.

    Returns
    -------
    int
        Bytes, at least 0.

    Examples
    --------
    >>> 0 < available_memory() <= _host_available()
    True
    """
    rooms = [_host_available(), *_address_space_rooms(), *_cgroup_rooms()]
    return max(0, min(rooms))


def _host_available():
    """The host's ``MemAvailable`` in bytes, else its physical memory (a kernel before 3.14,
    a system without ``/proc``)."""
    try:
        with open(os.path.join(PROC, "meminfo")) as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 1 << 62


def _status_bytes():
    """The ``kB`` lines of ``/proc/self/status`` as bytes, by their label (``VmSize:``)."""
    held = {}
    try:
        with open(os.path.join(PROC, "self", "status")) as f:
            for line in f:
                label, _, rest = line.partition("\t")
                parts = rest.split()
                if len(parts) == 2 and parts[1] == "kB" and parts[0].isdigit():
                    held[label] = int(parts[0]) * 1024
    except OSError:
        pass
    return held


def _address_space_rooms():
    """What each finite address-space limit leaves of itself (its soft limit: the one an
    allocation meets)."""
    held = None
    for name, label in _ADDRESS_LIMITS:
        soft, _ = resource.getrlimit(getattr(resource, name))
        if soft == resource.RLIM_INFINITY or soft < 0:
            continue
        if held is None:
            held = _status_bytes()
        yield soft - held.get(label, 0)


def _read_int(path):
    """The number a cgroup file holds; None for ``max`` (no limit), a missing or unreadable
    file."""
    try:
        with open(path) as f:
            text = f.read().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _inactive_file(directory):
    """The cgroup's page cache the kernel reclaims first (``inactive_file`` of its
    ``memory.stat``; v1's ``total_inactive_file`` counts its descendants too): charged to the
    cgroup, yet no obstacle to an allocation, so a run that just wrote a large file is not
    told its memory is gone."""
    found = {}
    try:
        with open(os.path.join(directory, "memory.stat")) as f:
            for line in f:
                key, _, value = line.partition(" ")
                if key in ("inactive_file", "total_inactive_file"):
                    found[key] = int(value)
    except (OSError, ValueError):
        return 0
    return found.get("total_inactive_file", found.get("inactive_file", 0))


def _cgroup_paths():
    """``(hierarchy folder, path)`` of each memory hierarchy the process belongs to, from
    ``/proc/self/cgroup``: v2's single line ``0::PATH`` (mounted at the root, or at
    ``unified`` on a hybrid system) and v1's ``N:…memory…:PATH``."""
    try:
        with open(os.path.join(PROC, "self", "cgroup")) as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    found = []
    for line in lines:
        hierarchy, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        if hierarchy == "0" and controllers == "":
            found += [(CGROUP_ROOT, path, 2), (os.path.join(CGROUP_ROOT, "unified"), path, 2)]
        elif "memory" in controllers.split(","):
            found.append((os.path.join(CGROUP_ROOT, "memory"), path, 1))
    return found


def _cgroup_rooms():
    """What each memory limit on the way from the process's cgroup up to its hierarchy's
    root leaves: a parent's limit (a systemd slice, the container around a job) binds the
    cgroups below it. Inside a container the path may name the host's folders, absent from
    the container's view: the walk up then starts at the first folder that exists."""
    for root, path, version in _cgroup_paths():
        limit_file, usage_file = (("memory.max", "memory.current") if version == 2 else
                                  ("memory.limit_in_bytes", "memory.usage_in_bytes"))
        parts = [p for p in os.path.normpath("/" + path).split("/") if p]
        for depth in range(len(parts), -1, -1):
            directory = os.path.join(root, *parts[:depth])
            limit = _read_int(os.path.join(directory, limit_file))
            if limit is None:
                continue
            used = _read_int(os.path.join(directory, usage_file)) or 0
            yield limit - max(0, used - _inactive_file(directory))
