"""Errors that the command line turns into one line and exit status 2.

Library code raises :class:`InputError` for anything wrong with what the user gave (a file,
an option, a vertex id), naming the file and, for text, the line; ``terrain.run`` prints
``terrain: <message>`` and exits with status 2, no traceback.
"""

__all__ = ["InputError", "where"]


class InputError(ValueError):
    """Bad input: a file that cannot be read or parsed, or an option out of range."""


def where(path, line=None):
    """Return ``"path"`` or ``"path:line"`` for the start of an error message."""
    return f"{path}:{line}" if line is not None else f"{path}"
