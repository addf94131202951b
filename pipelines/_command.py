"""What every grid command (``mst``, ``fill``, ``flow``, ``cost-distance``) does around its
route: the route asked checked (:func:`asked_route`), its input described from the header
(:func:`open_input`, also what ``--dry-run`` plans from), its output written as a partial
and published with its GeoTIFFs (:class:`CommandOutput`), and its summary printed
(:func:`print_summary`). A command then reads as: describe the input, check the options,
run the route, publish, print.
"""

import contextlib
import dataclasses
from pathlib import Path

from terrain.errors import InputError
from terrain.io.georef import finish_store
from terrain.io.outputs import json_text

__all__ = ["InputGrid", "open_input", "CommandOutput", "asked_route", "print_summary", "ROUTES"]

#: the routes of ``fill`` and ``flow``; ``cost-distance`` adds its blocked SSSP
ROUTES = ("auto", "in-core", "tiled")


def asked_route(route, routes=ROUTES):
    """``route`` when it is one of ``routes`` ("auto" leaves the choice to the command's
    planner), else :class:`~terrain.errors.InputError`.

    >>> asked_route("tiled")
    'tiled'
    """
    if route not in routes:
        raise InputError(f"route {route!r}: expected one of {', '.join(routes)}")
    return route


def print_summary(summary, input_path, as_json, lines):
    """Print a command's summary: as JSON naming the ``input_path`` it read beside the
    summary's ``output`` (``--json``), else its ``lines(summary)``."""
    print(json_text({"input": str(input_path), **summary}, indent=2) if as_json
          else lines(summary))


@dataclasses.dataclass(frozen=True)
class InputGrid:
    """The DEM a grid command reads, from its header only: a tile store (its own tiles and
    shards) or a raster, cut into the command's tiles.

    Attributes
    ----------
    path : Path or terrain.io.remote.Location
        As the command was given it.
    shape : (int, int)
    tile : int
    tiles_per_shard : int
    cellsize : (float, float)
    geotransform : list of float
    crs : str or None
    units : str or None
        The elevations' unit; None where not known.
    raster : AsciiGrid or RasterGrid or None
        The opened raster (:func:`terrain.io.open_grid`); None for a tile store.
    """

    path: object
    shape: tuple
    tile: int
    tiles_per_shard: int
    cellsize: tuple
    geotransform: list
    crs: object = None
    units: object = None
    raster: object = None

    @property
    def from_store(self):
        """True for a tile store (read where it is), False for a raster (ingested)."""
        return self.raster is None

    @property
    def shard_side(self):
        """Cells a side of a shard."""
        return self.tile * self.tiles_per_shard

    @property
    def source(self):
        """The DEM as a result records it: its URL, or its absolute path (a result is
        verified from anywhere)."""
        from terrain.io.remote import is_remote
        return str(self.path) if is_remote(self.path) else str(Path(self.path).resolve())

    def geo(self):
        """The georeference a route copies into its output: ``geotransform``, ``crs``,
        ``source`` and ``units``."""
        return {"geotransform": list(self.geotransform), "crs": self.crs,
                "source": self.source, "units": self.units}


def open_input(path, tile=512, *, stores=True, tile_count=True):
    """The :class:`InputGrid` of ``path``: a tile store (at a path, a URL or a
    :class:`terrain.io.remote.Location`), else (and always when ``stores`` is False) a raster
    cut into tiles of ``tile`` (:func:`terrain.tiles.store.check_tile_size`; with
    ``tile_count``, :func:`terrain.tiles.store.check_tile_count` too). Reads headers only.

    Raises
    ------
    InputError
        A folder that is no tile store, a store at a URL that is not there, a bad tile, a
        raster :func:`terrain.io.open_grid` refuses.
    """
    from terrain.io import open_grid
    from terrain.io.georef import unit_of
    from terrain.io.remote import is_remote
    from terrain.tiles import is_store, open_store
    from terrain.tiles.store import check_tile_count, check_tile_size, tiles_per_shard
    if stores and (is_remote(path) or is_store(path)):
        store = open_store(path)
        return InputGrid(path, tuple(int(s) for s in store.shape), int(store.tile),
                         int(store.tiles_per_shard), store.cellsize,
                         list(store.geotransform), store.attrs.get("crs"),
                         unit_of(store.elevation.attrs))
    if stores and Path(path).is_dir():
        raise InputError(f"{path}: is a directory, not a grid file or a tile store written by "
                         "ingest")
    tile = check_tile_size(tile)
    raster = open_grid(path)
    shape = tuple(int(s) for s in raster.shape)
    if tile_count:
        check_tile_count(tile, shape, path)
    return InputGrid(path, shape, tile, tiles_per_shard(tile, shape), raster.cellsize,
                     list(raster.geotransform), raster.crs, getattr(raster, "units", None),
                     raster)


class CommandOutput:
    """The store a grid command writes and the GeoTIFFs published with it (its companions),
    as one: written into a partial output named by the run's ``key``, then published
    (:func:`terrain.io.remote.output_at`). ``--resume`` finishes the partial a killed run of
    the same ``key`` left, or the GeoTIFFs of a store it published.

    Parameters
    ----------
    path : Path or terrain.io.remote.Location
        The output store.
    key : str
        The run's key (:func:`pipelines._resume.run_key`).
    summary : str
        The store's attribute that holds the run's summary (``"fill"``, ...).
    geotiffs : list of paths
        The GeoTIFFs published with the store; none when not asked.
    write_geotiffs : callable
        ``write_geotiffs(store)`` stages them all from the store
        (:func:`terrain.io.outputs.staged_path`) and returns what the summary records of them.
    overwrite, resume : bool
        ``--overwrite``, ``--resume``.
    """

    def __init__(self, path, key, summary, *, geotiffs=(), write_geotiffs=None,
                 overwrite=False, resume=False):
        self.path, self.key, self.summary = path, key, summary
        self.geotiffs, self._write_geotiffs = list(geotiffs), write_geotiffs
        self.overwrite, self.resume = overwrite, resume

    def finished(self):
        """On ``--resume`` of a run that published its store but not all its GeoTIFFs (a
        stop between the two): the GeoTIFFs staged again from the store and published
        (:func:`terrain.io.outputs.finish_companions`), and the store's summary returned;
        else None (the run goes on)."""
        if not self.resume:
            return None
        from terrain.io.outputs import finish_companions
        from terrain.io.zarr_meta import open_group
        recorded = []
        if not finish_companions(self.path, self.key, self.geotiffs,
                                 lambda store: recorded.append(self._write_geotiffs(store))):
            return None
        return {**open_group(self.path, mode="r").attrs[self.summary], "geotiff": recorded[0]}

    def steps_kept(self):
        """On ``--resume``: whether the partial output holds a killed run's steps, which the
        route that wrote them finishes (:func:`pipelines._resume.steps_kept`); else the run
        takes the route a fresh one would."""
        from ._resume import steps_kept
        return self.resume and steps_kept(self.path, self.key)

    @contextlib.contextmanager
    def partial(self, inputs, *, began=None, cluster=None, cluster_inputs=()):
        """``(partial, kept)``: the partial output the run writes, published when the block
        ends (an error: nothing is), and the checkpoints a killed run left in it
        (:func:`pipelines._resume.prepare_resume`; empty unless resumed) for
        :func:`pipelines._resume.drop_checkpoints` to count.

        ``inputs``: what the output may not be, nor hold (:func:`terrain.io.remote.output_at`;
        ``began``: their fingerprints when the run began). ``cluster``: a scheduler that runs
        the work on a cluster, opened first (reached before any work); ``cluster_inputs``:
        the files it must see as this process does.
        """
        from terrain.io.remote import output_at

        from ._resume import prepare_resume
        if cluster is None:
            scheduler = contextlib.nullcontext()
        else:
            from .cluster import open_scheduler
            scheduler = open_scheduler(cluster, inputs=cluster_inputs)
        with scheduler, output_at(self.path, self.overwrite, inputs=inputs, key=self.key,
                                  resume=self.resume, companions=self.geotiffs,
                                  began=began) as tmp:
            yield tmp, prepare_resume(tmp) if self.resume else {}

    def write_geotiffs(self, tmp, summary):
        """Stage the GeoTIFFs (if any were asked) from the partial output ``tmp`` (published
        after it), recorded in ``summary``."""
        if self.geotiffs:
            summary["geotiff"] = self._write_geotiffs(tmp)

    def publish(self, tmp, summary):
        """The run's ``summary`` into the partial ``tmp``'s attribute, its metadata
        consolidated, then the GeoTIFFs staged from it (published after it; a failure:
        neither)."""
        from terrain.io.zarr_meta import open_group
        open_group(tmp, mode="r+").attrs.update({self.summary: summary})
        finish_store(tmp)
        self.write_geotiffs(tmp, summary)
