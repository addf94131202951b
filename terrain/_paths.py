"""Checks on the paths a command reads and writes, made once, before any work.

Every command that writes passes its inputs and outputs to :func:`check_outputs` before it
reads a byte of data or starts a scheduler, so that a bad path costs nothing and nothing
is left behind. An output may never be an input, contain one or lie inside one (paths are
compared after resolving ``~``, relative parts and symlinks, and by inode for hard links);
an existing output is replaced only with ``overwrite``; the output's directory must exist,
be a directory and be writable (tested by creating and removing a probe file: as root,
``os.access`` says yes to ``/proc``).

:func:`input_identity` is what deterministic task keys and partial names hash: a file's
(or a store's metadata file's) absolute path, size and modification time.

Examples
--------
>>> check_outputs(["data/sample.asc"], ["data/sample.asc"], overwrite=True)
Traceback (most recent call last):
...
terrain.errors.InputError: data/sample.asc: output is the input data/sample.asc
"""

import os
import tempfile
from pathlib import Path

from .errors import InputError

__all__ = ["check_outputs", "input_identity", "real_path"]


def real_path(path):
    """Absolute path with ``~``, ``..`` and symlinks resolved (the target need not exist)."""
    return Path(os.path.abspath(os.path.expanduser(str(path)))).resolve(strict=False)


def _inside(path, folder):
    return path != folder and folder in path.parents


def _same_file(a, b):
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _check_against_inputs(out, real, inputs):
    for given, r in inputs:
        if real == r or _same_file(real, r):
            raise InputError(f"{out}: output is the input {given}")
        if _inside(r, real):
            raise InputError(f"{out}: output would contain the input {given}")
        if r.is_dir() and _inside(real, r):
            raise InputError(f"{out}: output lies inside the input {given}")


def _check_directory(out, real):
    """The output's directory exists, is a directory and is writable."""
    parent = real.parent
    existing = parent
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise InputError(f"{out}: cannot write there, {existing} is not a directory")
    if existing != parent:
        raise InputError(f"{out}: cannot write there, directory {parent} does not exist")
    try:
        fd, probe = tempfile.mkstemp(prefix=".terrain-probe-", dir=parent)
    except OSError as e:
        raise InputError(f"{out}: cannot write in {parent} ({e.strerror})") from None
    os.close(fd)
    os.unlink(probe)


def _check_replaceable(out, real, overwrite):
    if not (real.exists() or os.path.lexists(out)):
        return
    if not overwrite:
        raise InputError(f"{out}: output exists (use --overwrite to replace it)")
    if real.is_dir() and not (real / "zarr.json").is_file():
        raise InputError(f"{out}: is a directory but not a tile store; not replacing it")


def check_outputs(inputs, outputs, overwrite=False):
    """Raise :class:`InputError` unless every output can be written without harm.

    Parameters
    ----------
    inputs : iterable of str or Path (None entries are skipped)
        What the command reads.
    outputs : iterable of str or Path (None entries are skipped)
        What it writes (files or store directories).
    overwrite : bool
        Whether existing outputs may be replaced (never an input, never a directory that
        is not a tile store).

    Raises
    ------
    InputError
        Naming the output: it is (or contains, or lies inside) an input, is named twice,
        exists without ``overwrite``, or its directory is missing, not a directory or not
        writable.
    """
    ins = [(p, real_path(p)) for p in inputs if p is not None]
    seen = {}
    for out in outputs:
        if out is None:
            continue
        real = real_path(out)
        _check_against_inputs(out, real, ins)
        if real in seen:
            raise InputError(f"{out}: named twice as an output (also as {seen[real]})")
        seen[real] = out
        _check_directory(out, real)
        _check_replaceable(out, real, overwrite)


def input_identity(path):
    """``(absolute path, size, mtime_ns)`` of a file, or of a store's ``zarr.json``.

    Two runs over the same unchanged input hash alike; touching or rewriting it changes
    the identity (and so every task key and partial name derived from it).
    """
    real = real_path(path)
    probe = real / "zarr.json" if real.is_dir() else real
    try:
        st = probe.stat()
    except OSError:
        return (str(real), None, None)
    return (str(real), st.st_size, st.st_mtime_ns)
