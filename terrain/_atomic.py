"""Outputs appear atomically: written beside the target, renamed into place when complete.

After any failure (an exception, a bad input found half-way, SIGTERM or Ctrl-C turned
into an exception by the command line) the target path does not exist, or, with
``overwrite=True``, still holds what it held before.

The partial output is ``.NAME.partial-KEY`` beside the target. ``KEY`` is deterministic
(the caller's hash of its inputs' identity and parameters; by default a hash of the
target's path), so a run killed outright (SIGKILL, power loss) leaves a partial the next
run for the same target finds: it is removed with a one-line notice, or, with
``resume=True`` and the same key, handed back to the caller to finish. A lock file
(``.NAME.lock``, ``flock``) tells a live run's partial from a dead one's: the kernel drops
the lock when its holder dies, however it dies.
"""

import contextlib
import fcntl
import hashlib
import os
import shutil
import sys
import uuid
from pathlib import Path

from ._paths import check_outputs, real_path
from .errors import InputError

__all__ = ["atomic_output", "check_output_free", "partial_path", "stale_partials"]


def check_output_free(target, overwrite=False):
    """Raise :class:`InputError` when ``target`` cannot be written (see
    :func:`terrain._paths.check_outputs`; no inputs to compare against)."""
    check_outputs((), [target], overwrite)


def _remove(path):
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    elif path.exists() or path.is_symlink():
        path.unlink()


def _notice(message):
    print(f"terrain: {message}", file=sys.stderr, flush=True)


def partial_path(target, key=None):
    """Where the output for ``target`` is written before its rename: ``.NAME.partial-KEY``."""
    target = Path(target)
    if key is None:
        key = hashlib.sha256(str(real_path(target)).encode()).hexdigest()
    return target.with_name(f".{target.name}.partial-{str(key)[:16]}")


def stale_partials(target):
    """Partial (and half-swapped ``.old``) outputs beside ``target`` left by earlier runs."""
    target = Path(target)
    parent = target.parent if str(target.parent) else Path(".")
    if not parent.is_dir():
        return []
    return sorted(p for p in parent.glob(f".{target.name}.partial-*")) + \
        sorted(p for p in parent.glob(f".{target.name}.old-*"))


@contextlib.contextmanager
def _lock(target):
    """Hold ``.NAME.lock`` beside ``target`` for one run; refuse when another run holds it."""
    lock_path = target.with_name(f".{target.name}.lock")
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise InputError(f"{target}: another terrain run is writing this output") from None
        try:
            yield
        finally:
            with contextlib.suppress(OSError):
                os.unlink(lock_path)
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_output(target, overwrite=False, *, inputs=(), key=None, resume=False,
                  notify=_notice):
    """Yield a temporary path beside ``target``; rename it to ``target`` on success.

    Works for files and for directories (Zarr stores). The temporary name starts with a
    dot so that a crashed run leaves nothing that looks like a finished output.

    Parameters
    ----------
    target : str or Path
    overwrite : bool
        Replace an existing ``target``.
    inputs : iterable of paths
        What the output is made from: it may not be, contain or lie inside one of them.
    key : str, optional
        Deterministic suffix of the partial's name (a hash of inputs and parameters).
    resume : bool
        Hand back an existing partial of the same ``key`` (the caller finishes it) instead
        of removing it.
    notify : callable
        Called with a one-line message for every stale partial removed or resumed.

    Examples
    --------
    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp())
    >>> with atomic_output(d / "out.txt") as tmp:
    ...     _ = tmp.write_text("done")
    >>> (d / "out.txt").read_text(), [p.name for p in d.iterdir()]
    ('done', ['out.txt'])
    """
    target = Path(target)
    check_outputs(inputs, [target], overwrite)
    # absolute: tasks on an external cluster's workers may run in another directory
    tmp = Path(os.path.abspath(partial_path(target, key)))
    with _lock(target):
        for stale in stale_partials(target):
            if resume and stale.absolute() == tmp:
                notify(f"resuming from {stale}, left by an interrupted run")
                continue
            _remove(stale)
            notify(f"removed {stale}, left by an interrupted run")
        try:
            yield tmp
        except BaseException:
            _remove(tmp)
            raise
        if target.exists():
            # rename the old output away first so the swap leaves no half state
            old = target.with_name(f".{target.name}.old-{uuid.uuid4().hex[:8]}")
            os.replace(target, old)
            os.replace(tmp, target)
            _remove(old)
        else:
            os.replace(tmp, target)
