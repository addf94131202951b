# `name as name`: type checkers take a stub's imported names as its exports only in this form
from ._shards import (borrow_buffer as borrow_buffer, fast_layout as fast_layout,
    io_threads as io_threads, MAX_IO_THREADS as MAX_IO_THREADS, read_array as read_array,
    read_layout as read_layout, read_shard as read_shard, read_window as read_window,
    release_buffers as release_buffers, shard_grid as shard_grid, ShardWriter as ShardWriter,
    sweep_partial_files as sweep_partial_files, write_layout as write_layout,
    write_shard as write_shard)
from .morton import morton_encode as morton_encode, morton_order as morton_order
from .quadtree import (call_now as call_now, node_window as node_window,
    QuadtreePlan as QuadtreePlan, walk_down as walk_down, walk_up as walk_up)
from .store import (check_tile_size as check_tile_size, create_layer as create_layer,
    create_store as create_store, DEFAULT_TILE as DEFAULT_TILE, is_store as is_store,
    link_layer as link_layer, open_store as open_store, quadtree_levels as quadtree_levels,
    read_block as read_block, read_layer as read_layer, result_dem as result_dem,
    shard_layouts as shard_layouts, TileStore as TileStore, window_shards as window_shards,
    write_block as write_block, write_layers as write_layers, write_windows as write_windows)
