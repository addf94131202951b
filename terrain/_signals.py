"""SIGTERM as an exception, so that a terminated run cleans up like an interrupted one.

Python turns SIGINT (Ctrl-C) into :class:`KeyboardInterrupt`; :func:`terminate_raises`
turns SIGTERM into :class:`Terminated` the same way, in the main thread, so every
``finally`` and :func:`terrain._atomic.atomic_output` cleanup runs (the partial output is
removed) and the command line prints one line instead of dying silently.
"""

import contextlib
import signal

__all__ = ["Terminated", "terminate_raises"]


class Terminated(BaseException):
    """SIGTERM arrived (a BaseException, like KeyboardInterrupt: ``except Exception``
    blocks do not swallow it)."""


def _raise_terminated(signum, frame):
    raise Terminated()


@contextlib.contextmanager
def terminate_raises():
    """Within the block, SIGTERM raises :class:`Terminated` in the main thread."""
    try:
        previous = signal.signal(signal.SIGTERM, _raise_terminated)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
