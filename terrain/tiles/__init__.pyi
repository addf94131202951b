from .morton import morton_decode, morton_encode, morton_order
from .quadtree import call_now, node_window, QuadtreePlan, walk_down, walk_up
from .store import (check_tile_size, create_store, DEFAULT_TILE, is_store, open_store,
    quadtree_levels, TileStore)
from ._shards import (borrow_buffer, fast_layout, io_threads, MAX_IO_THREADS, read_array,
    read_layout, read_window, write_shard)
