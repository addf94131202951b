from ._shards import (borrow_buffer, fast_layout, io_threads, MAX_IO_THREADS, read_array,
    read_layout, read_shard, read_window, release_buffers, shard_grid, ShardWriter,
    sweep_partial_files, write_layout, write_shard)
from .morton import morton_encode, morton_order
from .quadtree import call_now, node_window, QuadtreePlan, walk_down, walk_up
from .store import (check_tile_size, create_layer, create_store, DEFAULT_TILE, is_store,
    link_layer, open_store, quadtree_levels, read_block, read_layer, result_dem, shard_layouts,
    TileStore, window_shards, write_block, write_layers, write_windows)
