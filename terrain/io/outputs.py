"""Outputs: checked against the inputs before any work, written atomically.

:func:`check_outputs` refuses, before any data is read, an output that is, contains or lies
inside an input, exists without ``overwrite``, or has no writable directory.
:func:`atomic_output` writes beside the target (``.NAME.partial-KEY``, ``KEY``
deterministic, a ``flock``ed ``.NAME.lock``) and renames when complete, so after a failure
the target is absent or as before; a finished store is sealed first (:func:`seal_store`).
Design: docs/architecture.md, "Inputs and outputs"; docs/safety.md.

>>> check_outputs(["data/sample.asc"], ["data/sample.asc"], overwrite=True)
Traceback (most recent call last):
...
terrain.errors.InputError: data/sample.asc: output is the input data/sample.asc
"""

import base64
import contextlib
import errno
import fcntl
import functools
import hashlib
import json
import math
import os
import resource
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

from ..errors import InputError
from ..startup import raise_if_stopped, signals_held

__all__ = ["atomic_output", "CHECKPOINT_DIR", "finish_companions", "staged_path", "check_output_free",
           "json_text",
           "output_beside", "code_identity", "written_by", "WRITTEN_BY_ATTR",
           "check_outputs", "input_identity", "partial_path",
           "real_path", "write_path", "seal_store", "sweep_partial_files",
           "INVENTORY_ATTR", "array_inventory", "inventory_of", "hold_lock", "DISK_FULL",
           "check_input_file", "check_store_name", "FILE_SUFFIXES", "disk_full_reason",
           "format_bytes", "gdal_path",
           "OutputExists", "OtherRunsPartial", "same_file"]


#: symbolic links followed in one path before it is refused (the kernel's own limit)
MAX_SYMLINKS = 40


def real_path(path):
    """Absolute path with ``.``, ``..`` and symlinks resolved as the kernel resolves them,
    component by component (``link/..`` is the parent of the link's *target*), so that
    what is checked is what is written; components after the first missing one stay as written.
    ``~`` is a name like any other, as the kernel reads it (the shell expands an unquoted one):
    expanded here alone, the checks would pass on one file and the writer open another.

    Examples
    --------
    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp()).resolve()
    >>> (d / "e" / "sub").mkdir(parents=True); (d / "w").mkdir()
    >>> (d / "w" / "link").symlink_to(d / "e" / "sub")
    >>> real_path(d / "w" / "link" / ".." / "dem.asc") == d / "e" / "dem.asc"
    True
    >>> real_path(d / "nosuch" / ".." / "x") == d / "nosuch" / ".." / "x"
    True
    """
    text = os.fspath(path)
    if not os.path.isabs(text):
        text = os.path.join(os.getcwd(), text)
    return Path(_resolve(text, path, [0]))


def _resolve(text, given, links):
    """:func:`real_path` of absolute ``text``; ``links``: a shared one-element symlink count."""
    current = "/"
    parts = text.split("/")
    for n, part in enumerate(parts):
        if part in ("", "."):
            continue
        if part == "..":
            current = os.path.dirname(current)
            continue
        step = os.path.join(current, part)
        try:
            mode = os.lstat(step).st_mode
        except OSError:  # missing (or unreadable): the rest as written
            return os.path.join(step, *[p for p in parts[n + 1:] if p])
        if not stat.S_ISLNK(mode):
            current = step
            continue
        links[0] += 1
        if links[0] > MAX_SYMLINKS:
            raise InputError(f"{given}: too many levels of symbolic links")
        target = os.readlink(step)
        current = _resolve(target if os.path.isabs(target) else os.path.join(current, target),
                           given, links)
    return current


def _inside(path, folder):
    return path != folder and folder in path.parents


def same_file(a, b):
    """Are the paths ``a`` and ``b`` one file (False when either cannot be checked)?

    >>> same_file(__file__, __file__), same_file(__file__, "no-such-file")
    (True, False)
    """
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _check_against_inputs(out, real, inputs):
    for given, r in inputs:
        if real == r or same_file(real, r):
            raise InputError(f"{out}: output is the input {given}")
        if _inside(r, real):
            raise InputError(f"{out}: output would contain the input {given}")
        if r.is_dir() and _inside(real, r):
            raise InputError(f"{out}: output lies inside the input {given}")


def _check_directory(out, real):
    """The output's directory exists, is a directory, is writable and lies in no store."""
    parent = real.parent
    existing, missing = parent, parent
    while not existing.exists() and existing != existing.parent:
        existing, missing = existing.parent, existing
    if not existing.is_dir():
        raise InputError(f"{out}: cannot write there, {existing} is not a directory")
    if existing != parent:
        raise InputError(f"{out}: cannot write there, directory {missing} does not exist")
    for folder in (parent, *parent.parents):
        if (folder / "zarr.json").is_file():  # a store's --overwrite would take it along
            raise InputError(f"{out}: lies inside the store {folder}, whose replacement "
                             "would remove it; write it beside the store")
    try:
        fd, probe = tempfile.mkstemp(prefix=".terrain-probe-", dir=parent)
    except OSError as e:
        raise InputError(f"{out}: cannot write in {parent} ({e.strerror})") from None
    os.close(fd)
    os.unlink(probe)


def _check_name_length(out, real):
    """The output's name leaves room for the partial output's beside it
    (:func:`partial_path`: the longest name written there; ``.NAME.old-KEY`` alike,
    ``.NAME.lock`` and ``.NAME.trash-HEX`` shorter), which the file system would refuse
    (``File name too long``) only once the run got to it."""
    try:
        most = os.pathconf(real.parent, "PC_NAME_MAX")
    except (OSError, ValueError):
        most = 255
    size = len(os.fsencode(real.name))
    extra = len(os.fsencode(partial_path(real, "0" * 64).name)) - size
    if size + extra > most:
        raise InputError(f"{out}: name too long: {size} bytes, where {real.parent} takes names "
                         f"of {most}, and the partial output written beside it adds "
                         f"{extra} (at most {most - extra})")


class OutputExists(InputError):
    """An output exists and may not be replaced; ``option`` names the parameter that would
    allow it (the command line turns it into its flag)."""

    option = "overwrite"


class OtherRunsPartial(InputError):
    """A resumed run found no partial of its own, but one of another run (other parameters,
    or another version of an input): kept, not removed; ``option`` names the parameter whose
    absence would remove it (the command line turns it into its flag)."""

    option = "resume"
    keep_partial = True  # raised inside a run at a URL: its prefix is that partial


def _check_replaceable(out, real, overwrite):
    if not (real.exists() or os.path.lexists(out)):
        return
    if not overwrite:
        raise OutputExists(f"{out}: output exists")
    if real.is_dir() and not (real / "zarr.json").is_file():
        raise InputError(f"{out}: is a directory but not a tile store; not replacing it")
    with contextlib.suppress(OSError):
        owner, folder = os.lstat(real).st_uid, os.stat(real.parent)
        # a sticky folder (/tmp, a shared 1777 one) lets only the owners rename an entry
        if (folder.st_mode & stat.S_ISVTX and os.geteuid() not in (owner, folder.st_uid)
                and not _capable(CAP_FOWNER)):
            raise InputError(f"{out}: cannot be replaced: it belongs to another user "
                             f"({_user(owner)}) in the shared (sticky) folder {real.parent}")


#: the capability that renames another user's entry of a sticky folder (linux/capability.h)
CAP_FOWNER = 3


def _capable(capability):
    """Does this process hold ``capability`` (its effective set; Linux, else assumed)?"""
    try:
        with open("/proc/self/status") as f:
            caps = next(int(line.split()[1], 16) for line in f if line.startswith("CapEff:"))
    except (OSError, StopIteration, ValueError):
        return True
    return bool(caps >> capability & 1)


def _user(uid):
    import pwd
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


#: suffixes of files, not folders: a store named so is a mistake (``-o out.tif`` would make a
#: folder called out.tif, and with overwrite replace such a file with it)
FILE_SUFFIXES = (".tif", ".tiff", ".asc", ".txt", ".csv", ".json", ".geojson", ".gpkg",
                 ".fgb", ".shp", ".png", ".jpg", ".jpeg", ".npy", ".npz", ".parquet", ".nc",
                 ".img", ".vrt", ".xyz")


def check_store_name(out):
    """:class:`InputError` when the store ``out`` is named as a file of another format.

    >>> check_store_name("dem.cost.zarr")
    >>> check_store_name("out.tif")
    Traceback (most recent call last):
    ...
    terrain.errors.InputError: out.tif: the output is a Zarr store (a folder), not a .tif file: name it out.zarr
    """
    suffix = Path(str(out).rstrip("/")).suffix
    if suffix.lower() in FILE_SUFFIXES:
        raise InputError(f"{out}: the output is a Zarr store (a folder), not a {suffix} file: "
                         f"name it {Path(str(out).rstrip('/')).with_suffix('.zarr').name}")


def check_outputs(inputs, outputs, overwrite=False):
    """Raise :class:`InputError` unless every output can be written without harm.

    Parameters
    ----------
    inputs, outputs : iterable of str or Path (None entries are skipped)
    overwrite : bool

    Raises
    ------
    InputError
        Naming the output: it is ``-`` or a stream (a device, FIFO or socket), it is,
        contains or lies inside an input, is named twice, exists
        without ``overwrite`` (or is a directory but no store), has no writable
        directory, or a name that leaves no room for its partial's; or naming an input
        that is not a regular file or a directory.
    """
    ins = [(p, real_path(p)) for p in inputs if p is not None]
    for given, _ in ins:
        _check_kind(given)
    seen = {}
    for out in outputs:
        if out is None:
            continue
        _check_not_stream(out)
        real = real_path(out)
        _check_against_inputs(out, real, ins)
        if real in seen:
            raise InputError(f"{out}: named twice as an output (also as {seen[real]})")
        seen[real] = out
        _check_directory(out, real)
        _check_name_length(out, real)
        _check_replaceable(out, real, overwrite)


def _check_not_stream(out):
    """``-``, an existing device, FIFO or socket (``/dev/null``, a terminal) and this
    process's stdout or stderr (``/dev/stdout`` when it is a file) are streams: an output is
    renamed into place, which would make ``-`` a folder, or replace the device or the link."""
    try:
        st = os.stat(out)
    except OSError:  # missing (or a dangling link): a file to be
        st = None
    streams = []
    for fd in (1, 2):
        with contextlib.suppress(OSError):
            streams.append(os.fstat(fd))
    if os.fspath(out) == "-" or st is not None and (
            not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode))
            or any(os.path.samestat(st, s) for s in streams)):
        raise InputError(f"{out}: outputs are files or stores, not streams: name a file")


def _check_kind(given):
    """An existing input must be a regular file or a directory (a store). A missing one is
    not refused here: some inputs are named only to be kept from being overwritten (a
    result's source raster, which ``plot`` does not read). The path as given is what the
    reader opens: a link of ``/proc`` (``/dev/stdin``, ``/dev/fd/N``) leads to a pipe that
    no path names, which :func:`real_path` cannot follow."""
    try:
        mode = os.stat(given).st_mode
    except OSError:
        if os.fspath(given) == "-":  # the Unix name of standard input, which is a stream
            raise InputError("-: standard input is not read: terrain reads files and stores, "
                             "whose size it checks before reading; name a file") from None
        return  # missing: the reader says so, with its own words
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        kind = ("a FIFO" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode)
                else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "special")
        raise InputError(f"{given}: not a regular file ({kind}): terrain reads files and "
                         "stores, whose size it checks before reading")


def check_input_file(path):
    """Raise :class:`InputError` unless ``path`` names a regular file or a directory (a FIFO
    hangs a reader, a device never ends); a missing path passes (its reader says so).

    >>> check_input_file("/dev/null")
    Traceback (most recent call last):
    ...
    terrain.errors.InputError: /dev/null: not a regular file (a device): terrain reads files and stores, whose size it checks before reading
    """
    _check_kind(path)


def input_identity(path):
    """``(absolute path, size, mtime_ns)`` of a file, or of a store's ``zarr.json``: what
    deterministic task keys and partial names hash."""
    real = real_path(path)
    probe = real / "zarr.json" if real.is_dir() else real
    try:
        st = probe.stat()
    except OSError:
        return (str(real), None, None)
    return (str(real), st.st_size, st.st_mtime_ns)


def check_output_free(target, overwrite=False):
    """Raise :class:`InputError` when ``target`` cannot be written (see
    :func:`terrain.io.outputs.check_outputs`; no inputs to compare against)."""
    check_outputs((), [target], overwrite)


def _remove(path):
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    elif path.exists() or path.is_symlink():
        path.unlink()


#: seconds a command spends removing the output it replaced before it hands the rest to a
#: process of its own: unlinking the replaced 10-ft MST store took 2.6-3.8 s (docs/safety.md)
DISCARD_WAIT = 0.2


#: the kinds of leftovers beside an output (``.NAME.KIND-KEY``) that :func:`_leftovers` lists:
#: a partial output, a replaced one on its way out, one a swap killed between its renames left
LEFTOVER_KINDS = ("partial", "trash", "old")


def _leftovers(target):
    """``{kind: [paths]}`` of the leftovers beside ``target`` (:data:`LEFTOVER_KINDS`),
    sorted, from one listing of its folder: a batch writes thousands of outputs into one
    folder, where a glob a kind made three listings of all of them a file."""
    target = Path(target)
    parent = target.parent if str(target.parent) else Path(".")
    found = {kind: [] for kind in LEFTOVER_KINDS}
    prefix = f".{target.name}."
    try:
        with os.scandir(parent) as entries:
            for entry in entries:
                if entry.name.startswith(prefix):
                    kind, dash, _ = entry.name[len(prefix):].partition("-")
                    if dash and kind in found:
                        found[kind].append(parent / entry.name)
    except (FileNotFoundError, NotADirectoryError, PermissionError):
        pass  # as a glob: a folder that is not there or may not be listed holds none
    return {kind: sorted(paths) for kind, paths in found.items()}


def _discard(path, target):
    """Remove ``path`` (a replaced output, its replacement in place): renamed to a name no
    later run reuses, removed here for up to :data:`DISCARD_WAIT` s, the rest by a detached
    process, so that a command returns once its output is in place."""
    trash = target.with_name(f".{target.name}.trash-{uuid.uuid4().hex[:12]}")
    try:
        os.replace(path, trash)
    except FileNotFoundError:
        return
    deadline = time.monotonic() + DISCARD_WAIT
    if not trash.is_dir() or trash.is_symlink():
        trash.unlink()
        return
    for root, _, files in os.walk(trash, topdown=False):
        for name in files:
            if time.monotonic() > deadline:
                subprocess.Popen([sys.executable, "-c", "import shutil, sys; "
                                  "shutil.rmtree(sys.argv[1], ignore_errors=True)", str(trash)],
                                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL, start_new_session=True)
                return
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(root, name))
        with contextlib.suppress(FileNotFoundError):
            os.rmdir(root)


def _notice(message):
    print(f"terrain: {message}", file=sys.stderr, flush=True)


def write_path(target):
    """Where the kernel writes ``target``: its folder resolved (:func:`real_path`), its name
    as given (a symlink output is replaced, never written through); absolute.

    >>> write_path("/tmp/../tmp/out.zarr")
    PosixPath('/tmp/out.zarr')
    """
    target = Path(target)
    if target.name in ("", ".", ".."):
        return real_path(target)
    return real_path(target.parent) / target.name


def partial_path(target, key=None):
    """Where the output for ``target`` is written before its rename: ``.NAME.partial-KEY``."""
    target = Path(target)
    if key is None:
        key = hashlib.sha256(os.fsencode(real_path(target))).hexdigest()
    return target.with_name(f".{target.name}.partial-{str(key)[:16]}")


@contextlib.contextmanager
def gdal_path(path):
    """A name of ``path`` for GDAL (rasterio, pyogrio), which takes a path only as text
    encoded as UTF-8: ``path`` itself when its bytes are UTF-8; else (bytes of another
    encoding, which Python carries as surrogate escapes, ``'\\udce9'``) the file is made under
    a UTF-8 name in its folder, reached through the folder held open (``/proc/self/fd/N``),
    and renamed to its own when the block ends without error; removed when it fails.

    >>> with gdal_path("/tmp/out.tif") as p:
    ...     p
    '/tmp/out.tif'
    """
    path = Path(path)
    if not _surrogates(str(path)) or not os.path.isdir("/proc/self/fd"):
        yield str(path)  # no /proc: macOS, whose file names are all UTF-8
        return
    folder = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        base = f"/proc/self/fd/{folder}" if _surrogates(str(path.parent)) else str(path.parent)
        name = path.name
        if _surrogates(name):  # escaped: every character UTF-8, the suffix GDAL goes by kept
            name = os.fsencode(name).decode("utf-8", "backslashreplace")
        try:
            yield f"{base}/{name}"
        except BaseException:
            if name != path.name:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(name, dir_fd=folder)
            raise
        if name != path.name:
            os.replace(name, path.name, src_dir_fd=folder, dst_dir_fd=folder)
    finally:
        os.close(folder)


def _surrogates(text):
    """Does ``text`` hold bytes that are not UTF-8 (surrogate escapes)?"""
    try:
        text.encode()
    except UnicodeEncodeError:
        return True
    return False


def stale_partials(target):
    """Partial outputs beside ``target`` left by earlier runs."""
    return _leftovers(target)["partial"]


@contextlib.contextmanager
def hold_lock(target, busy="another terrain run is writing this output", shown=None):
    """Hold ``.NAME.lock`` beside ``target`` for one run; refuse when another run holds it
    (``busy``: what the refusal says after ``shown``, by default the target's name), or
    when its folder takes no file. Yields the folder, held open: the lock is made and removed
    through it, so that a folder moved meanwhile keeps no lock (:func:`_folder_gone`)."""
    target = Path(target)
    shown = target if shown is None else shown
    lock = f".{target.name}.lock"
    try:
        folder = os.open(target.parent, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as e:
        raise InputError(f"{target.parent}: cannot write there ({e.strerror})") from None
    try:
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644, dir_fd=folder)
        except OSError as e:
            raise _lock_refused(target.parent / lock, e, f"{shown}: {busy}") from None
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                raise InputError(f"{shown}: {busy}") from None
            try:
                yield folder
            finally:
                with contextlib.suppress(OSError):
                    os.unlink(lock, dir_fd=folder)
        finally:
            os.close(fd)
    finally:
        os.close(folder)


def _lock_refused(path, error, busy):
    """The refusal of the lock file ``path`` that this user may not open (``error``): one a
    run of another user holds is ``busy``; one such a run left, in a shared folder, is named
    (only its owner may remove it there); else the folder takes no file."""
    try:
        owner = os.lstat(path).st_uid
    except OSError:
        owner = os.geteuid()  # none there: the folder refused the new file
    if owner == os.geteuid():
        return InputError(f"{path.parent}: cannot write there ({error.strerror})")
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            return InputError(busy)
        finally:
            os.close(fd)
    return InputError(f"{path}: the lock of a run of another user ({_user(owner)}), left "
                      f"where this user may not take it ({error.strerror}); that user can "
                      "remove it once no run of theirs writes this output")


def _folder_gone(folder, path):
    """Is the folder ``path``, held open as ``folder`` (a descriptor), removed or moved (its
    path no longer leads to it)?"""
    try:
        return not os.path.samestat(os.fstat(folder), os.stat(path))
    except OSError:
        return True


def _folder_gone_error(given):
    return InputError(f"{given}: its folder was removed or moved while the run wrote it; "
                      "nothing written")


def _remove_made_again(target, tmp):
    """Remove the partial ``tmp`` at its path, where a writer made it again in a folder made
    again (zarr's store makes the folders it misses), and that folder if nothing else is in
    it; not while a run holds the lock of ``target`` there."""
    if os.path.lexists(tmp) and not os.path.lexists(tmp.with_name(f".{target.name}.lock")):
        _remove(tmp)
        with contextlib.suppress(OSError):
            os.rmdir(tmp.parent)


def _remove_in(folder, name):
    """Remove the file or tree ``name`` in the folder held open as ``folder``, wherever it
    is now (a partial the run made, in a folder moved meanwhile)."""
    try:
        if stat.S_ISDIR(os.lstat(name, dir_fd=folder).st_mode):
            shutil.rmtree(name, dir_fd=folder, ignore_errors=True)
        else:
            os.unlink(name, dir_fd=folder)
    except FileNotFoundError:
        pass


def format_bytes(n):
    """``1536`` -> ``'1.5 KiB'``.

    >>> format_bytes(3 * 2**30)
    '3.0 GiB'
    """
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024


#: errors of a full disk or quota: one line naming the output, the partial removed
DISK_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


def disk_full_reason(error, folder, written=()):
    """The strerror of a full disk, quota or file size limit that ``error`` (or its causes)
    says, that a folder with less than 1 MiB free implies, or that one of the files
    ``written`` grown to the process's file size limit implies; else None: what a library's
    own error (GDAL's, through rasterio or pyogrio) means when it names no errno."""
    if _at_file_size_limit(written):
        return os.strerror(errno.EFBIG)
    seen = error
    while seen is not None:
        if isinstance(seen, OSError) and seen.errno in DISK_FULL:
            return seen.strerror or os.strerror(seen.errno)
        text = str(seen).lower()
        for n in DISK_FULL:
            if os.strerror(n).lower() in text:
                return os.strerror(n)
        if "disk full" in text or "disk is full" in text or "not enough space" in text:
            return os.strerror(errno.ENOSPC)
        seen = seen.__cause__ or seen.__context__
    try:
        if shutil.disk_usage(folder).free < (1 << 20):
            return os.strerror(errno.ENOSPC)
    except OSError:
        pass
    return None


def _at_file_size_limit(paths):
    """Has one of ``paths`` reached the process's file size limit (``RLIMIT_FSIZE``)? A
    write there fails with EFBIG (Python ignores SIGXFSZ), which GDAL reports without the
    errno (libtiff's "Write error at scanline 0")."""
    limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    if limit == resource.RLIM_INFINITY:
        return False
    for path in paths:
        try:
            if os.stat(path).st_size >= limit:
                return True
        except OSError:
            continue
    return False


#: the root attribute of a store published with companions: the key of the run that made it
RUN_ATTR = "terrain_run"
#: the root attribute of every store written: which terrain wrote it (:func:`written_by`)
WRITTEN_BY_ATTR = "written_by"


@functools.cache
def code_identity():
    """terrain's code as installed (the sources of its two packages, terrain and pipelines:
    paths, sizes and modification times, hashed; 1-5 ms). A run key holds it, so that a
    partial output left by other code (another release, an edited checkout), which holds
    what that code read and computed, is not resumed; every store records it."""
    h = hashlib.sha256()
    library = Path(__file__).parents[1]
    for package in (library, library.parent / "pipelines"):
        for folder, dirs, files in os.walk(package):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(files):
                if name.endswith((".py", ".c", ".cu", ".cuh", ".h")):
                    st = os.stat(os.path.join(folder, name))
                    rel = os.path.relpath(os.path.join(folder, name), library.parent)
                    h.update(os.fsencode(rel))  # str.encode refuses a non-UTF-8 name
                    h.update(f"\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


def written_by():
    """``terrain VERSION (code DIGEST)``: what a store records of the terrain that wrote it,
    so that outputs of another release can be told apart (``terrain info``)."""
    from .. import __version__
    return f"terrain {__version__} (code {code_identity()[:12]})"


def output_beside(input_path, suffix):
    """A command's default output: ``input_path``'s name with ``suffix`` in place of its
    extension, in its folder.

    >>> str(output_beside("data/dem.tif", ".fill.zarr")), str(output_beside("dem", ".mst.zarr"))
    ('data/dem.fill.zarr', 'dem.mst.zarr')
    """
    p = Path(input_path)
    return p.with_name((p.stem if p.suffix else p.name) + suffix)


def staged_path(path):
    """Where a companion of an output (:func:`atomic_output`) is written before it is
    published: ``.NAME.partial-KEY`` beside it."""
    return partial_path(write_path(path))


class _SpareDescriptors:
    """Descriptors held while outputs are written, let go as a failed one is cleared: a run
    that used up its limit of open files (``ulimit -n``) still has the few that removing its
    partials takes (``shutil.rmtree`` holds one a folder level and one more while it lists a
    folder: a store's shards lie four folders deep). Taken by the first output of the
    process, closed when the last one ends; a limit too low for them is refused before
    anything is written."""

    COUNT = 6

    def __init__(self):
        self._lock = threading.Lock()
        self._users = 0
        self._fds = []

    @contextlib.contextmanager
    def held(self):
        with self._lock:
            if self._users == 0:
                try:
                    while len(self._fds) < self.COUNT:
                        self._fds.append(os.open(os.devnull, os.O_RDONLY))
                except OSError:  # too few to begin: refused before anything is written
                    self._close()
                    raise
            self._users += 1
        try:
            yield
        finally:
            with self._lock:
                self._users -= 1
                if self._users == 0:
                    self._close()

    def let_go(self):
        """Close them: a failed output's clean-up begins."""
        with self._lock:
            self._close()

    def _close(self):
        while self._fds:
            os.close(self._fds.pop())


_SPARES = _SpareDescriptors()


@contextlib.contextmanager
def _staging(companions, notify):
    """Companions staged in the block (their folder made), each held by its lock; an error
    removes the staged files and a folder made for them, leaving the companions as they
    were. The caller puts them in place (:func:`_put_in_place`)."""
    made = [f for f in dict.fromkeys(c.parent for c in companions) if not f.exists()]
    folders = []
    try:
        for f in made:
            f.mkdir()
        with contextlib.ExitStack() as stack:
            for c in companions:
                folders.append(stack.enter_context(hold_lock(c)))
                for stale in stale_partials(c):
                    _clear_stale(stale, stale, stale == staged_path(c), notify)
            try:
                yield
            except BaseException as e:
                _SPARES.let_go()
                gone = [c for c, f in zip(companions, folders) if _folder_gone(f, c.parent)]
                for c, f in zip(companions, folders):
                    _remove_in(f, staged_path(c).name)
                if gone and isinstance(e, Exception):
                    made = [f for f in made if f not in {c.parent for c in gone}]
                    raise _folder_gone_error(gone[0]) from None
                raise
    except BaseException:
        _SPARES.let_go()
        for f in made:
            shutil.rmtree(f, ignore_errors=True)
        raise


def _clear_stale(stale, shown, own, notify):
    """Remove the partial ``stale`` an interrupted run left (``shown``: its name for the
    user) and say so; one that stays (another user's, in a shared folder) is said to stay,
    and refused when it is where this run writes (``own``)."""
    errors = []
    if stale.is_dir() and not stale.is_symlink():
        shutil.rmtree(stale, onerror=lambda *a: errors.append(a[2][1]))
    else:
        with contextlib.suppress(FileNotFoundError):
            try:
                stale.unlink()
            except OSError as e:
                errors.append(e)
    if not os.path.lexists(stale):
        notify(f"removed {shown}, left by an interrupted run")
        return
    whose = ""
    with contextlib.suppress(OSError):
        if (uid := os.lstat(stale).st_uid) != os.geteuid():
            whose = f" of another user ({_user(uid)})"
    why = f"cannot be removed ({errors[0].strerror if errors else 'still there'})"
    if own:
        raise InputError(f"{shown}: left by an interrupted run{whose}, where this run writes, "
                         f"{why}; nothing written")
    notify(f"{shown}: left by an interrupted run{whose}, {why}; kept")


def _put_in_place(companions):
    for c in companions:
        os.replace(staged_path(c), c)


def finish_companions(target, key, companions, write, notify=_notice):
    """Publish the companions of the store ``target`` again when it is the store of the run
    ``key`` and one of them is missing (a run stopped between the two publications):
    ``write(target)`` stages them all from it, as the block of :func:`atomic_output` does.
    True when it did so."""
    companions = [write_path(c) for c in companions]
    if not companions or all(os.path.lexists(c) for c in companions):
        return False
    target = write_path(target)
    try:
        if json.loads((target / "zarr.json").read_text())["attributes"].get(RUN_ATTR) != key:
            return False
    except (OSError, ValueError, KeyError, TypeError):
        return False
    with hold_lock(target), _staging(companions, notify):
        _finish_swaps(target, target, notify)  # the replaced store, when the kill left it
        write(target)
        with signals_held():
            _put_in_place(companions)
    notify(f"wrote {', '.join(c.name for c in companions)} again from {target}, whose run "
           "was stopped as it published them")
    return True


#: the folder of a partial output where a resumable run keeps its finished steps' results
#: (``pipelines._resume``); at a URL, one folder in it per run key
CHECKPOINT_DIR = ".terrain-checkpoints"


def _has_checkpoints(partial):
    """Does the local partial output hold a finished step's result (a run killed before its
    first holds none: a resumed run starts it over)?"""
    try:
        return any(e.name.endswith(".npz") for e in os.scandir(Path(partial) / CHECKPOINT_DIR))
    except OSError:
        return False


@contextlib.contextmanager
def atomic_output(target, overwrite=False, *, inputs=(), key=None, resume=False,
                  notify=_notice, companions=()):
    """Yield a temporary path beside ``target`` (a file or a store); rename it to ``target``
    on success. A full disk is one :class:`InputError` naming the output; only an error
    whose ``keep_partial`` is true (a lost cluster) leaves the partial for a resumed run.

    ``companions``: files made with the store ``target`` (its GeoTIFFs), which the block
    writes to their :func:`staged_path`. The output is their commit point: the old ones are
    removed as it goes into place, the new ones renamed in after it, so that no old one
    stands beside a new output and none without it. A run stopped between leaves the store
    with some of them missing, which :func:`finish_companions` publishes again (the store
    records the run's ``key``).

    Parameters
    ----------
    target : str or Path
    overwrite : bool
    inputs : iterable of paths
        What the output is made from (:func:`check_outputs`).
    key : str, optional
        Deterministic suffix of the partial's name (a hash of inputs and parameters).
    resume : bool
        Hand back an existing partial of the same ``key`` instead of removing it; with
        only other keys' partials there, :class:`OtherRunsPartial` (nothing removed).
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
    given = Path(target)
    check_outputs(inputs, [given], overwrite)
    companions = [write_path(c) for c in companions]
    for c in companions:
        _check_replaceable(c, c, overwrite)
    target = write_path(given)
    tmp = partial_path(target, key)
    with _SPARES.held(), hold_lock(target) as folder, _staging(companions, notify):
        left = _leftovers(target)
        if _finish_swaps(target, given, notify, left["old"]) and not overwrite:
            _check_replaceable(given, target, overwrite)  # there again: as if it never went
        for trash in left["trash"]:  # a removal that did not finish (its process killed)
            _discard(trash, target)
        # less a partial a finished swap put in place
        stale_ones = [p for p in left["partial"] if not left["old"] or os.path.lexists(p)]
        if resume and stale_ones and tmp not in stale_ones:
            # the key hashes the inputs' identity and the parameters: which one differs is
            # not recorded, and the user asked to keep the work, not to start over
            raise OtherRunsPartial(
                f"{given}: the partial output {given.parent / stale_ones[0].name} was left "
                "by a run with other options, another version of the input or other code of "
                "terrain, and is kept")
        for stale in stale_ones:
            shown = given.parent / stale.name  # in the user's terms
            if resume and stale == tmp and _has_checkpoints(tmp):
                notify(f"resuming from {shown}, left by an interrupted run")
                continue
            _clear_stale(stale, shown, stale == tmp, notify)
        try:
            yield tmp
            raise_if_stopped()  # a stop whose exception a callback from C dropped
            if tmp.is_file() and not tmp.is_symlink():
                # the mode of any new file here: SQLite creates a GeoPackage 0644 whatever
                # the umask, where every other writer's file follows it (0664 under 002)
                os.chmod(tmp, 0o666 & ~_umask())
            if tmp.is_dir() and (tmp / "zarr.json").is_file():
                seal_store(tmp)
                root = json.loads((tmp / "zarr.json").read_text())
                attrs = root.setdefault("attributes", {})
                attrs[WRITTEN_BY_ATTR] = written_by()
                if companions:
                    attrs[RUN_ATTR] = key
                _write_json(tmp / "zarr.json", root)
            if _folder_gone(folder, target.parent):  # its rename would fail or go astray
                raise _folder_gone_error(given)
        except BaseException as e:
            _SPARES.let_go()
            # a folder removed or moved: the run's writes there failed, whatever they said;
            # its partial goes, from where the folder is now
            gone = isinstance(e, Exception) and _folder_gone(folder, target.parent)
            # an error that says the work may go on elsewhere (a lost cluster) keeps the
            # partial and its checkpoints for a resumed run; anything else leaves nothing
            if gone or not getattr(e, "keep_partial", False):
                _remove_in(folder, tmp.name)
            if gone:
                _remove_made_again(target, tmp)
                raise _folder_gone_error(given) from None
            if isinstance(e, OSError) and e.errno in DISK_FULL:
                raise InputError(f"{given}: {e.strerror or 'no space left'} in "
                                 f"{target.parent}; nothing written") from None
            raise
        # a signal here would stop the run with its output replaced and the old one left
        # beside it, saying it was stopped: it is held, and the output goes into place
        with signals_held() as came:
            for c in companions:  # the old set goes before the new output comes
                if os.path.lexists(c):
                    _remove(c)
            if target.exists() or target.is_symlink():
                # old to .NAME.old-KEY, then new into place: a run killed between the renames
                # leaves both, and the next run finishes the swap (_finish_swaps)
                old = target.with_name(f".{target.name}.old-{tmp.name.rsplit('-', 1)[1]}")
                _remove(old)
                os.replace(target, old)
                os.replace(tmp, target)
                _discard(old, target)
            else:
                os.replace(tmp, target)
            # after it: a kill between leaves the store with some missing (finish_companions)
            _put_in_place(companions)
        if came:
            notify(f"{given}: written in full (the {came[0]} came as it was put in place)")


def _umask():
    """This process's umask, read without setting it (``os.umask`` sets it for every thread
    while it reads)."""
    try:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1], 8) for line in f if line.startswith("Umask:"))
    except (OSError, StopIteration, ValueError):  # not Linux
        mask = os.umask(0o022)
        os.umask(mask)
        return mask


def _finish_swaps(target, given, notify, olds=None):
    """Finish the swaps (old to ``.NAME.old-KEY``, partial to ``NAME``) of runs killed
    between the two renames: the whole partial goes into place, else the old output comes
    back; never is the only good copy removed. True when the output is back. ``olds``: the
    ``.NAME.old-KEY`` there (:func:`_leftovers`), else listed here."""
    back = False
    for old in _leftovers(target)["old"] if olds is None else olds:
        new = target.with_name(f".{target.name}.partial-{old.name.rsplit('-', 1)[1]}")
        if target.exists() or target.is_symlink():
            _remove(old)
            notify(f"removed {given.parent / old.name}, left by an interrupted run")
        elif new.exists():
            os.replace(new, target)
            _remove(old)
            back = True
            notify(f"finished replacing {given}, interrupted between its two renames")
        else:
            os.replace(old, target)
            back = True
            notify(f"restored {given} from {given.parent / old.name}, left by an interrupted "
                   "run")
    return back


#: the attribute of every sharded array of a finished store that lists its shard files
INVENTORY_ATTR = "terrain_shards"


def sweep_partial_files(folder):
    """Remove the ``NAME.HEX.partial`` files killed shard writers (terrain's or zarr's) left
    under ``folder``; returns how many. Only while no writer runs."""
    n = 0
    for root, _, files in os.walk(folder):
        for name in files:
            parts = name.rsplit(".", 2)
            if len(parts) == 3 and parts[2] == "partial" and len(parts[1]) == 32:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(os.path.join(root, name))
                    n += 1
    return n


def seal_store(path):
    """Record in every sharded array of the finished store at ``path`` which shard files it
    holds (:data:`INVENTORY_ATTR`: shape, shard grid, base64 bitmap), in its ``zarr.json``
    and the consolidated copy, so that readers refuse a store that lost a shard (a shard of
    fill only is never written: a deleted one would otherwise read as nodata).

    >>> import tempfile, zarr
    >>> d = tempfile.mkdtemp()
    >>> a = zarr.create_array(d, name="z", shape=(4, 6), chunks=(2, 2), shards=(2, 4),
    ...                       dtype="u1", fill_value=0)
    >>> a[0, 5] = 1
    >>> seal_store(d)
    >>> zarr.open_array(d, path="z").attrs["terrain_shards"]["shards"]
    [2, 2]
    """
    path = Path(path)
    sweep_partial_files(path)
    root_meta = path / "zarr.json"
    found = {}
    for folder, dirs, files in os.walk(path):
        if "zarr.json" not in files:
            dirs[:] = []
            continue
        meta_file = Path(folder) / "zarr.json"
        meta = json.loads(meta_file.read_text())
        if meta.get("node_type") != "array":
            dirs[:] = [d for d in dirs if not d.startswith(".")]
            continue
        dirs[:] = []  # an array's folders hold its chunks
        inventory = _inventory(Path(folder), meta)
        if inventory is None:
            continue
        meta.setdefault("attributes", {})[INVENTORY_ATTR] = inventory
        _write_json(meta_file, meta)
        found[Path(folder).relative_to(path).as_posix()] = inventory
    if not found or not root_meta.is_file():
        return
    root = json.loads(root_meta.read_text())
    consolidated = (root.get("consolidated_metadata") or {}).get("metadata")
    if isinstance(consolidated, dict):
        for rel, inventory in found.items():
            if isinstance(consolidated.get(rel), dict):
                consolidated[rel].setdefault("attributes", {})[INVENTORY_ATTR] = inventory
        _write_json(root_meta, root)


def array_inventory(folder):
    """The inventory :func:`seal_store` would write now for the array stored in ``folder``
    (what its files are), or None where it writes none."""
    try:
        meta = json.loads((Path(folder) / "zarr.json").read_text())
    except (OSError, ValueError):
        return None
    if meta.get("node_type") != "array":
        return None
    return _inventory(Path(folder), meta)


def _inventory(folder, meta):
    """:data:`INVENTORY_ATTR` of the array in the local ``folder`` (``meta``: its zarr.json)."""
    def shards():
        for root, _, files in os.walk(folder / "c"):
            rel = Path(root).relative_to(folder / "c").parts
            for name in files:
                yield (*rel, name)
    return inventory_of(meta, shards())


def inventory_of(meta, shards):
    """:data:`INVENTORY_ATTR` of an array (``meta``: its zarr.json) whose shard keys under
    ``c/`` are ``shards`` (each a sequence of key parts, ``("0", "1")`` for ``c/0/1``; other
    names are skipped); None unless sharded in the default key encoding (``c/i/j``).

    >>> meta = {"shape": [4, 6], "codecs": [{"name": "sharding_indexed"}],
    ...         "chunk_grid": {"configuration": {"chunk_shape": [2, 4]}},
    ...         "chunk_key_encoding": {"name": "default"}}
    >>> inventory_of(meta, [("0", "1"), ("1", "0.abc.partial")])["present"]
    'QA=='
    """
    try:
        codecs = meta["codecs"]
        if codecs[0]["name"] != "sharding_indexed":
            return None
        shape = [int(n) for n in meta["shape"]]
        shard = [int(n) for n in meta["chunk_grid"]["configuration"]["chunk_shape"]]
        encoding = meta["chunk_key_encoding"]
        sep = (encoding.get("configuration") or {}).get("separator", "/")
        if encoding["name"] != "default" or sep != "/":
            return None
    except (KeyError, IndexError, TypeError, ValueError):
        return None
    grid = [-(-n // s) for n, s in zip(shape, shard)]
    present = bytearray((math.prod(grid) + 7) // 8)
    for parts in shards:
        try:
            idx = [int(k) for k in parts]
        except ValueError:  # a shard writer's .partial file, anything else
            continue
        if len(idx) != len(grid) or not all(0 <= i < g for i, g in zip(idx, grid)):
            continue
        flat = 0
        for i, g in zip(idx, grid):
            flat = flat * g + i
        present[flat // 8] |= 0x80 >> (flat % 8)  # numpy.packbits' bit order
    return {"shape": shape, "shards": grid, "present": base64.b64encode(present).decode()}


def _finite(value):
    """``value`` with every float that is not finite (NaN, infinity) as None, in nested
    dicts, lists and tuples; NumPy scalars as Python's."""
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):  # a NumPy scalar
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def json_text(doc, indent=None):
    """``doc`` as strict JSON (RFC 8259): a value that is not finite is ``null``. Python's
    ``json`` writes NaN and Infinity bare, which JavaScript, Go and strict parsers refuse:
    every summary printed with ``--json``, manifest and store document goes through here.

    >>> json_text({"max": float("nan"), "n": 3, "d": [1.5, float("inf")]})
    '{"max": null, "n": 3, "d": [1.5, null]}'
    """
    return json.dumps(_finite(doc), indent=indent, allow_nan=False)


def _write_json(path, doc):
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    tmp.write_text(json_text(doc, indent=2))
    os.replace(tmp, path)
