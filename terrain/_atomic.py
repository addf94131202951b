"""Outputs appear atomically: written beside the target, renamed into place when complete.

After any failure (an exception, a bad input found half-way) the target path does not
exist, or, with ``overwrite=True``, still holds what it held before.
"""

import contextlib
import os
import shutil
import uuid
from pathlib import Path

from .errors import InputError

__all__ = ["atomic_output", "check_output_free"]


def check_output_free(target, overwrite=False):
    """Raise :class:`InputError` when ``target`` exists and ``overwrite`` is false."""
    target = Path(target)
    if target.exists() and not overwrite:
        raise InputError(f"{target}: output exists (use --overwrite to replace it)")


def _remove(path):
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    elif path.exists() or path.is_symlink():
        path.unlink()


@contextlib.contextmanager
def atomic_output(target, overwrite=False):
    """Yield a temporary path beside ``target``; rename it to ``target`` on success.

    Works for files and for directories (Zarr stores). The temporary name starts with a
    dot so that a crashed run leaves nothing that looks like a finished output.
    """
    target = Path(target)
    check_output_free(target, overwrite)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.partial-{uuid.uuid4().hex[:8]}")
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
