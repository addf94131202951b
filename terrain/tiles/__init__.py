"""Tile store: square power-of-two tiles in a z-ordered, sharded Zarr v3 group; the quadtree
plan and walk over its tiles.

The names are loaded on first use (PEP 562): the shard reader (``terrain.tiles._shards``)
is imported without zarr, so a command's start-up can read its DEM while the main thread
imports zarr (:mod:`pipelines.cost_distance_start`).
"""

from .._lazy import lazy_names

_WHERE = {"QuadtreePlan": "quadtree", "call_now": "quadtree", "node_window": "quadtree",
          "walk_down": "quadtree", "walk_up": "quadtree", "morton_decode": "morton",
          "morton_encode": "morton", "morton_order": "morton", "DEFAULT_TILE": "store",
          "TileStore": "store", "check_tile_size": "store", "create_store": "store",
          "is_store": "store", "open_store": "store", "quadtree_levels": "store"}

__all__ = ["TileStore", "create_store", "open_store", "is_store", "check_tile_size",
           "quadtree_levels", "DEFAULT_TILE", "morton_encode", "morton_decode", "morton_order",
           "QuadtreePlan", "node_window", "walk_up", "walk_down", "call_now"]

__getattr__, __dir__ = lazy_names(__name__, _WHERE)
