"""Errors that the command line turns into one line and exit status 2.

Library code raises :class:`InputError` for anything wrong with what the user gave (a file,
an option, a vertex id), naming the file and, for text, the line; ``terrain.run`` prints
``terrain: <message>`` and exits with status 2, no traceback.
"""

import contextlib
import os
import sys
import warnings

__all__ = ["InputError", "TerrainWarning", "where", "warn", "naming", "naming_items",
           "cannot_read", "interruption"]

#: the installed packages' folders: a warning names the first line outside them
_PACKAGES = tuple(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), name)
                  + os.sep for name in ("terrain", "pipelines"))


class InputError(ValueError):
    """Bad input: a file that cannot be read or parsed, or an option out of range.

    ``option``: the parameter the error is about, or a tuple of them, by its name; the
    command line names its flag instead (where the message names it, else in a hint).
    ``item``: ``(kind, number)`` of the one cell of a list the error is about, as its message
    says it (``("source", 1)``: "source 1"), for a caller that knows where each came from
    (:func:`naming_items`).

    >>> InputError("dem.asc: min_depth needs the in-core route", option=("min_depth",)).option
    ('min_depth',)
    """

    option = None
    item = None

    def __init__(self, *args, option=None, item=None):
        super().__init__(*args)
        if option is not None:
            self.option = option
        if item is not None:
            self.item = item


def where(path, line=None):
    """Return ``"path"`` or ``"path:line"`` for the start of an error message."""
    return f"{path}:{line}" if line is not None else f"{path}"


def cannot_read(path, error):
    """The :class:`InputError` for the file or folder ``path`` the kernel would not read
    (``error``: its :class:`OSError`, unreadable or untraversable).

    >>> cannot_read("s.zarr/elevation/c/0/0", PermissionError(13, "Permission denied"))
    InputError('s.zarr/elevation/c/0/0: cannot read (Permission denied)')
    """
    return InputError(f"{path}: cannot read ({error.strerror or error})")


@contextlib.contextmanager
def naming(parameter, source):
    """Inside, an :class:`InputError` the library raises about ``parameter`` (its message
    starting ``"parameter: "``) names ``source`` instead, the file given for it.

    >>> with naming("weights", "rain.tif"):
    ...     raise InputError("weights: cell (0, 0) is negative")
    Traceback (most recent call last):
    ...
    terrain.errors.InputError: rain.tif: cell (0, 0) is negative
    """
    try:
        yield
    except InputError as e:
        prefix = f"{parameter}: "
        if source is None or not str(e).startswith(prefix):
            raise
        raise InputError(f"{source}: {str(e)[len(prefix):]}") from None


@contextlib.contextmanager
def naming_items(kind, origins, first=0):
    """Inside, an :class:`InputError` about the ``kind`` numbered ``n`` (its ``item``) names
    where that one came from after its number: ``origins[n - first]`` (a file and line, a
    feature; None: nothing more to say).

    >>> with naming_items("source", [None, "wells.csv:3"]):
    ...     raise InputError("dem.asc: source 1 at cell (row, col) = (3, 16) is on nodata",
    ...                      item=("source", 1))
    Traceback (most recent call last):
    ...
    terrain.errors.InputError: dem.asc: source 1 (wells.csv:3) at cell (row, col) = (3, 16) is on nodata
    """
    try:
        yield
    except InputError as e:
        said = f"{kind} {e.item[1]} " if e.item and e.item[0] == kind else None
        i = e.item[1] - first if said else -1
        origin = origins[i] if 0 <= i < len(origins) else None
        if origin is None or said not in str(e):
            raise
        # the last mention: the message's own words follow the files it starts with
        head, _, tail = str(e).rpartition(said)
        raise InputError(f"{head}{said}({origin}) {tail}", option=e.option, item=e.item) \
            from None


class TerrainWarning(UserWarning):
    """Something the user should know about their input or result (the command line prints
    it as one line)."""


def warn(message, category=TerrainWarning):
    """Warn ``message``, shown at the first line outside terrain's packages that led to it
    (the user's call), not at the library's line that found it.

    Examples
    --------
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as w:
    ...     warnings.simplefilter("always")
    ...     warn("dem: something to know")
    >>> str(w[0].message), w[0].filename.endswith("errors.py")
    ('dem: something to know', False)
    """
    level, frame = 2, sys._getframe(1)
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGES):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)


def interruption(error):
    """The interruption (KeyboardInterrupt, or any other exception that is not an
    :class:`Exception`: SIGTERM's) behind ``error``, a :class:`SystemError` Numba raises when
    a signal is handled while it boxes a kernel's result (``CPUDispatcher(...) returned a
    result with an exception set``: the interrupt is its cause, or its cause's, with
    SystemErrors between); None for any other error.

    >>> try:
    ...     raise SystemError("returned a result with an exception set") from KeyboardInterrupt()
    ... except SystemError as e:
    ...     type(interruption(e)).__name__, interruption(SystemError("other"))
    ('KeyboardInterrupt', None)
    """
    cause = error
    while isinstance(cause, SystemError):
        cause = cause.__cause__
    if cause is error or isinstance(cause, Exception) or cause is None:
        return None
    return cause
