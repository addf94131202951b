"""A full disk (or memory) is one line naming the output, and nothing is left:
``ingest``/``mst -o /small/x.zarr`` on a 600 KiB file system, a batch whose manifest cannot
be written, memory exhausted mid-run.

The file system is a real tmpfs where the tests may mount one (root in a container), else
those tests skip; the size limit of a process (``RLIMIT_FSIZE``: EFBIG, "File too large")
needs no privilege.
"""

import os
import resource
import signal
import stat
import subprocess
import sys
import time

import numpy as np
import pytest

from cli import assert_one_line_error, child_env

SYNC = ("--scheduler", "synchronous")


def _run(*argv, cwd, fsize=None, nofile=None):
    env = child_env()

    def limit():
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        if fsize is not None:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # write() fails with EFBIG instead
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
        if nofile is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

    return subprocess.run([sys.executable, "-m", "terrain.run", *map(str, argv)], cwd=cwd,
                          env=env, capture_output=True, text=True, preexec_fn=limit,
                          timeout=300)


@pytest.fixture(scope="module")
def dem(tmp_path_factory):
    from terrain.io import write_synth
    d = tmp_path_factory.mktemp("disk")
    write_synth(d / "g.asc", 600, 700, seed=4)
    return d / "g.asc"


@pytest.fixture
def small(tmp_path):
    """A 600 KiB tmpfs at ``tmp_path/small`` (skip where mounting is not allowed)."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=600k", "tmpfs", str(mnt)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({proc.stderr.strip()})")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], capture_output=True)


@pytest.mark.parametrize("argv", [
    ["ingest", *SYNC], ["ingest", "--scheduler", "threads"],
    ["mst", "--backend", "cpu", *SYNC], ["mst", "--backend", "cpu", "--scheduler", "threads"],
])
def test_full_disk_is_one_line_and_leaves_nothing(small, dem, argv):
    proc = _run(argv[0], dem, "-o", small / "x.zarr", *argv[1:], cwd=small.parent)
    assert_one_line_error(proc, f"terrain: {small / 'x.zarr'}: No space left on device in "
                                f"{small}; nothing written")
    assert os.listdir(small) == []


def test_batch_on_a_full_disk(small, dem):
    fd = os.open(small / "fill", os.O_WRONLY | os.O_CREAT)
    try:  # nothing left, not even for the manifest
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError:
        pass
    finally:
        os.close(fd)
    proc = _run("batch", "ingest", dem, "-o", small / "out", *SYNC, cwd=small.parent)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    # the manifest, every file pending, is written before the first file: it fails first
    assert proc.stderr.strip().splitlines() == [
        f"terrain: {small / 'out' / 'manifest.json'}: No space left on device in "
        f"{small / 'out'}; nothing written"]
    assert os.listdir(small) == ["fill"]


def test_file_size_limit_is_one_line(tmp_path, dem):
    proc = _run("mst", dem, "-o", "x.zarr", "--backend", "cpu", *SYNC, cwd=tmp_path,
                fsize=64 << 10)
    assert_one_line_error(proc, "terrain: x.zarr: File too large in ")
    assert os.listdir(tmp_path) == []


#: a command that writes ``--geotiff-dir`` (terrain.io.geotiff.write_geotiffs), per name
GEOTIFF_COMMANDS = {"cost-distance": ["--source-cell", "3,3"], "fill": [], "flow": []}


@pytest.fixture(scope="module")
def dem_store(dem):
    """``dem`` ingested, and its flow store: inputs whose outputs hold no copy of the
    elevation, so that the GeoTIFFs are the largest files written."""
    from terrain.run import main
    for argv in (["ingest", dem, "-o", dem.with_name("g.zarr")],
                 ["flow", dem, "-o", dem.with_name("f.zarr")]):
        assert main([*map(str, argv), *SYNC]) == 0
    return dem.with_name("g.zarr")


#: GeoTIFF writers (terrain.io.geotiff): (argv in a folder ``o``, a file size limit under
#: which the Zarr store fits and a GeoTIFF does not, what the error names)
GEOTIFF_RUNS = {
    "mst": (lambda g: ["mst", g, "-o", "o/m.zarr", "--geotiff", "o/m.tif", *SYNC], 300 << 10,
            "o/m.tif"),
    "watershed": (lambda g: ["watershed", g.with_name("f.zarr"), "--outlet-cell", "300,300",
                             "-o", "o/w.tif"], 1 << 20, "o/w.tif"),
    **{c: (lambda g, c=c: [c, g, "-o", "o/x.zarr", "--geotiff-dir", "o/tifs",
                           *GEOTIFF_COMMANDS[c], *SYNC], 1536 << 10, "{cwd}/o/tifs")
       for c in GEOTIFF_COMMANDS}}


@pytest.mark.parametrize("command", sorted(GEOTIFF_RUNS))
def test_geotiff_over_the_file_size_limit_is_one_line(tmp_path, dem_store, command):
    """GDAL's error names no errno (libtiff's "Write error at scanline 0"), and rasterio's
    traceback came with exit 1: the file written, grown to the limit, says why."""
    argv, fsize, named = GEOTIFF_RUNS[command]
    (tmp_path / "o").mkdir()
    proc = _run(*argv(dem_store), cwd=tmp_path, fsize=fsize)
    assert_one_line_error(proc, f"terrain: {named.format(cwd=tmp_path)}: File too large "
                                "while writing the GeoTIFFs; nothing written")
    assert os.listdir(tmp_path / "o") == []


@pytest.mark.parametrize("nofile", [16, 24])
@pytest.mark.parametrize("command", sorted(GEOTIFF_COMMANDS))
def test_too_few_open_files_is_one_line_and_leaves_nothing(tmp_path, command, nofile):
    """``ulimit -n 16``: the GeoTIFF's lock refused said ``gt: cannot write there (Too many
    open files)`` and left the store's partial (its removal ran out of descriptors too);
    ``ulimit -n 24``: an import's ``OSError`` traceback, exit 1. One line naming the limit
    now, and nothing left."""
    from terrain.io import write_synth
    write_synth(tmp_path / "g.asc", 60, 80, seed=3)
    proc = _run(command, "g.asc", "-o", "x.zarr", "--geotiff-dir", "gt",
                *GEOTIFF_COMMANDS[command], *SYNC, cwd=tmp_path, nofile=nofile)
    assert_one_line_error(proc, f"terrain: too many open files: this process may open "
                                f"{nofile} (ulimit -n); raise the limit")
    assert os.listdir(tmp_path) == ["g.asc"]


@pytest.mark.parametrize("command", sorted(GEOTIFF_COMMANDS))
def test_geotiff_dir_on_a_full_disk_is_one_line_and_leaves_nothing(small, dem, command):
    """The store fits (on another disk), the GeoTIFFs do not: libtiff's own lines on stderr
    are not shown, and neither the folder nor the store appears."""
    folder = small / "out"
    proc = _run(command, dem, "-o", "x.zarr", "--geotiff-dir", folder,
                *GEOTIFF_COMMANDS[command], *SYNC, cwd=small.parent)
    assert_one_line_error(proc, f"terrain: {folder}: No space left on device while writing "
                                "the GeoTIFFs; nothing written")
    assert os.listdir(small) == []
    assert sorted(os.listdir(small.parent)) == ["small"]


@pytest.mark.parametrize("made", [False, True], ids=["new-folder", "existing-folder"])
@pytest.mark.parametrize("command", sorted(GEOTIFF_COMMANDS))
def test_geotiff_writer_out_of_space_leaves_nothing(tmp_path, monkeypatch, capfd, command,
                                                    made):
    """Without a small file system: the GeoTIFF writer fails with ENOSPC after one layer is
    whole and the others half written (in this process), saying so on file descriptor 2 as
    libtiff does."""
    import errno
    import threading

    from cli import run_main
    from terrain.io import geotiff, write_synth

    write_synth(tmp_path / "g.asc", 60, 80, seed=3)
    folder = tmp_path / "tifs"
    if made:
        folder.mkdir()
    real, lock, calls = geotiff._write_one, threading.Lock(), []

    def out_of_space(p, tmp, cog, threads):
        with lock:
            calls.append(tmp)
            first = len(calls) == 1
        if first:
            return real(p, tmp, cog, threads)
        tmp.write_bytes(b"II*\0 half a TIFF")
        os.write(2, b"_tiffWriteProc: No space left on device.\n")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(geotiff, "_write_one", out_of_space)
    rc, out, err = run_main(capfd, command, tmp_path / "g.asc", "-o", tmp_path / "x.zarr",
                            "--geotiff-dir", folder, *GEOTIFF_COMMANDS[command])
    assert rc == 2 and out == "", err
    assert err.strip() == (f"terrain: {folder}: No space left on device while writing the "
                           "GeoTIFFs; nothing written")
    assert len(calls) == 3
    assert sorted(os.listdir(tmp_path)) == ["g.asc"] + ["tifs"] * made
    assert not made or os.listdir(folder) == []


def test_mst_geotiff_out_of_space_names_the_file(tmp_path, monkeypatch, capfd):
    """``mst ... --geotiff /small/f.tif`` on a full disk named the folder, ``/small: No space
    left on device while writing the GeoTIFFs``; every other writer names its output."""
    import errno

    from cli import run_main
    from terrain.io import geotiff, write_synth

    write_synth(tmp_path / "g.asc", 60, 80, seed=3)
    (tmp_path / "small").mkdir()

    def out_of_space(p, tmp, cog, threads):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    monkeypatch.setattr(geotiff, "_write_one", out_of_space)
    tif = tmp_path / "small" / "f.tif"
    rc, out, err = run_main(capfd, "mst", tmp_path / "g.asc", "-o", tmp_path / "m3.zarr",
                            "--geotiff", tif)
    assert rc == 2 and out == "", err
    assert err.strip() == (f"terrain: {tif}: No space left on device while writing the "
                           "GeoTIFFs; nothing written")
    assert sorted(os.listdir(tmp_path)) == ["g.asc", "small"]
    assert os.listdir(tmp_path / "small") == []


def test_watershed_out_of_space_names_the_file(tmp_path, monkeypatch, capfd):
    """``watershed ... -o /small/w.tif`` on a full disk named the folder, ``/small: No space
    left on device while writing the GeoTIFFs``; every other writer names its output."""
    import errno

    from cli import run_main
    from terrain.io import geotiff, write_synth

    write_synth(tmp_path / "g.asc", 40, 50, seed=3)
    rc, _, err = run_main(capfd, "flow", tmp_path / "g.asc", "-o", tmp_path / "f.zarr")
    assert rc == 0, err
    (tmp_path / "small").mkdir()

    def out_of_space(p, tmp, cog, threads):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    monkeypatch.setattr(geotiff, "_write_one", out_of_space)
    tif = tmp_path / "small" / "w.tif"
    rc, out, err = run_main(capfd, "watershed", tmp_path / "f.zarr", "--outlet-cell", "20,25",
                            "-o", tif, scheduler=None)
    assert rc == 2 and out == "", err
    assert err.strip() == (f"terrain: {tif}: No space left on device while writing the "
                           "GeoTIFFs; nothing written")
    assert os.listdir(tmp_path / "small") == []


def test_out_of_memory_is_one_line_and_leaves_nothing(tmp_path, dem, monkeypatch, capsys):
    """Memory exhausted mid-run (the host's, or the device's: CuPy's OutOfMemoryError is a
    MemoryError): one line with the allocation's message, status 2, no partial output."""
    import pipelines.fill
    from terrain.run import main

    def exhausted(*args, **kwargs):
        raise MemoryError("Unable to allocate 13.2 GiB for an array with shape (50220, "
                          "70520) and data type float32")
    monkeypatch.setattr(pipelines.fill, "fill_depressions", exhausted)
    out = tmp_path / "out"
    out.mkdir()
    assert main(["fill", str(dem), "-o", str(out / "f.zarr")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["terrain: out of memory: Unable to allocate 13.2 GiB for an array with "
                   "shape (50220, 70520) and data type float32"], err
    assert list(out.iterdir()) == []


@pytest.mark.parametrize("raised, said", [
    # an allocation's MemoryError without a message (an address-space limit, prlimit --as)
    (MemoryError(), "terrain: out of memory: an allocation failed"),
    # a process limit (ulimit -u) or too little memory for a thread's stack
    (RuntimeError("can't start new thread"), "terrain: cannot start a thread (the process's "
     "limit of processes and threads, ulimit -u, or its memory)")])
def test_a_limit_of_the_process_is_one_line_and_leaves_nothing(tmp_path, dem, monkeypatch,
                                                               capsys, raised, said):
    """Said 'out of memory: ' with nothing after it, or a traceback."""
    import pipelines.fill
    from terrain.run import main

    def limited(*args, **kwargs):
        raise raised
    monkeypatch.setattr(pipelines.fill, "fill_depressions", limited)
    out = tmp_path / "out"
    out.mkdir()
    assert main(["fill", str(dem), "-o", str(out / "f.zarr")]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [said]
    assert list(out.iterdir()) == []


def test_a_full_standard_output_is_one_line_after_the_outputs(tmp_path, dem):
    """``terrain mst g.asc > log`` with the log's disk full: a traceback and exit 1 after
    the store was written; one line, status 2, the store in place."""
    with open("/dev/full", "w") as full:
        proc = subprocess.run([sys.executable, "-m", "terrain.run", "mst", str(dem), "-o",
                               "m.zarr", *SYNC], cwd=tmp_path, env=child_env(), stdout=full,
                              stderr=subprocess.PIPE, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "terrain: writing standard output: No space left on device"]
    assert (tmp_path / "m.zarr" / "zarr.json").is_file()


def test_an_interrupt_inside_a_compiled_kernel_is_one_line(tmp_path, dem, monkeypatch, capsys):
    """Ctrl-C while a Numba kernel runs in the main thread (the synchronous scheduler's
    tasks) reaches Python as a SystemError whose causes lead to the KeyboardInterrupt: the
    same one line and status 130 as anywhere else."""
    import threading

    import numba
    import pipelines.fill
    from terrain.native.flag import stopped
    from terrain.run import main

    @numba.njit(nogil=True)
    def spin(flag):  # until told, then a tuple of arrays to box, as the fill kernels return
        flag[1] = 1  # running: the signal may come
        while not stopped(flag):
            pass
        return np.zeros(3), np.zeros(2, np.int64)

    flag = np.zeros(2, np.uint8)
    spin(np.ones(2, np.uint8))  # compiled before the signal

    def interrupt():  # once the kernel runs (a signal before would reach pytest itself)
        deadline = time.monotonic() + 120
        while not flag[1] and time.monotonic() < deadline:
            time.sleep(0.01)
        if flag[1]:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.1)
        flag[0] = 1

    timer = threading.Thread(target=interrupt)
    monkeypatch.setattr(pipelines.fill, "fill_depressions", lambda *a, **k: spin(flag))
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        timer.start()
        assert main(["fill", str(dem), "-o", str(tmp_path / "f.zarr"), *SYNC]) == 130
    finally:
        timer.join()
        signal.signal(signal.SIGINT, previous)
    assert capsys.readouterr().err == "terrain: interrupted\n"
    assert not list(tmp_path.glob("*f.zarr*"))


@pytest.fixture(scope="module")
def vector_sources(tmp_path_factory, dem):
    """A cost store and a flow store of ``dem``: what ``path`` and ``streams`` read."""
    from terrain.run import main
    d = tmp_path_factory.mktemp("vectors")
    for argv in (["cost-distance", dem, "--source-cell", "3,3", "-o", d / "c.zarr"],
                 ["flow", dem, "-o", d / "f.zarr"]):
        assert main([*map(str, argv), "--backend", "cpu", *SYNC]) == 0
    return d


#: (the command, a small output's options, a larger one's)
VECTOR_RUNS = {"path": (lambda d: ["path", d / "c.zarr"], ["--to-cell", "10,10"],
                        ["--to-cell", "599,699"]),
               "streams": (lambda d: ["streams", d / "f.zarr"], ["--threshold", "20000"],
                           ["--threshold", "50"])}


@pytest.mark.parametrize("suffix", [".fgb", ".gpkg"])
@pytest.mark.parametrize("command", sorted(VECTOR_RUNS))
def test_vector_lines_on_a_full_disk_keep_the_old_file(small, vector_sources, command, suffix):
    """FlatGeobuf's writer reported no failed write (exit 0, a truncated file no reader
    opens, put in place of the good one); GeoPackage's raised pyogrio's traceback. One
    line now, and the file that was there is kept."""
    out = small / f"lines{suffix}"
    head, little, large = VECTOR_RUNS[command]
    proc = _run(*head(vector_sources), *little, "-o", out, cwd=small.parent)
    assert proc.returncode == 0, proc.stderr
    good = out.read_bytes()
    st = os.statvfs(small)
    (small / "ballast").write_bytes(b"\0" * (st.f_bavail * st.f_frsize - 8192))
    proc = _run(*head(vector_sources), *large, "-o", out, "--overwrite", cwd=small.parent)
    assert_one_line_error(proc, f"terrain: {out}: No space left on device in {small}; "
                                "nothing written")
    assert out.read_bytes() == good and sorted(os.listdir(small)) == ["ballast", out.name]


@pytest.mark.parametrize("suffix, fsize", [(".fgb", 8 << 10), (".fgb", 12 << 10),
                                           (".gpkg", 8 << 10), (".gpkg", 96 << 10)])
@pytest.mark.parametrize("command", sorted(VECTOR_RUNS))
def test_vector_lines_over_the_file_size_limit_are_one_line(tmp_path, vector_sources, command,
                                                           suffix, fsize):
    """OGR's error names no errno ("Unexpected I/O failure: writing feature"): the file
    written, grown to the limit, says why. SQLite rolled a GeoPackage's failed write back
    below the limit, which said "disk I/O error", "Failed to commit transaction" or "no
    such table: gpkg_contents" by where the limit fell."""
    head, _, large = VECTOR_RUNS[command]
    proc = _run(*head(vector_sources), *large, "-o", f"lines{suffix}", cwd=tmp_path,
                fsize=fsize)
    assert_one_line_error(proc, f"terrain: lines{suffix}: File too large in {tmp_path}; "
                                "nothing written")
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("command", sorted(VECTOR_RUNS))
def test_a_truncated_flatgeobuf_is_refused_not_published(tmp_path, vector_sources, monkeypatch,
                                                         capsys, command):
    """Without a small file system: the writer returns having written half a file, as
    FlatGeobuf's does on a full disk; the lines are read back, and the old file stays."""
    import pyogrio.raw

    from cli import run_main
    real = pyogrio.raw.write

    def truncated(path, *args, **kwargs):
        real(path, *args, **kwargs)
        size = os.path.getsize(path)
        os.truncate(path, size // 2)

    out = tmp_path / "lines.fgb"
    out.write_bytes(b"the user's own file")
    monkeypatch.setattr(pyogrio.raw, "write", truncated)
    head, _, large = VECTOR_RUNS[command]
    rc, _, err = run_main(capsys, *head(vector_sources), *large, "-o", out, "--overwrite",
                          scheduler=None)
    assert rc == 2 and len(err.strip().splitlines()) == 1, err
    assert err.startswith(f"terrain: {out}"), err
    assert out.read_bytes() == b"the user's own file"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lines.fgb"]


@pytest.mark.parametrize("suffix", [".fgb", ".gpkg"])
@pytest.mark.parametrize("command", sorted(VECTOR_RUNS))
def test_vector_outputs_follow_the_umask(tmp_path, vector_sources, command, suffix):
    """Under umask 002 a GeoPackage came out 0644 (SQLite's own mode) where every other
    output was 0664: the mode is that of a file ``open`` creates under the same umask."""
    def umask_002():
        os.umask(0o002)
    head, little, _ = VECTOR_RUNS[command]
    proc = subprocess.run([sys.executable, "-m", "terrain.run", *map(str, head(vector_sources)),
                           *little, "-o", f"lines{suffix}"], cwd=tmp_path, env=child_env(),
                          capture_output=True, text=True, timeout=300, preexec_fn=umask_002)
    assert proc.returncode == 0, proc.stderr
    subprocess.run([sys.executable, "-c", "open('plain', 'w')"], cwd=tmp_path, check=True,
                   preexec_fn=umask_002)
    mode = stat.S_IMODE((tmp_path / f"lines{suffix}").stat().st_mode)
    assert mode == stat.S_IMODE((tmp_path / "plain").stat().st_mode) == 0o664
