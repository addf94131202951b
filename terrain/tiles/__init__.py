"""Tile store: square power-of-two tiles in a z-ordered, sharded Zarr v3 group; the quadtree
plan and walk over its tiles."""

from .quadtree import QuadtreePlan, call_now, node_window, walk_down, walk_up
from .morton import morton_decode, morton_encode, morton_order
from .store import (DEFAULT_TILE, TileStore, check_tile_size, create_store, is_store,
                    open_store, quadtree_levels)

__all__ = ["TileStore", "create_store", "open_store", "is_store", "check_tile_size",
           "quadtree_levels", "DEFAULT_TILE", "morton_encode", "morton_decode", "morton_order",
           "QuadtreePlan", "node_window", "walk_up", "walk_down", "call_now"]
