# fill (terrain/hydrology/fill.py)
from .fill import (depression_hierarchy, depression_labels, fill_depressions, fill_leaf_down,
    fill_leaf_up, fill_merge, fill_split, fill_tiled, FillResult, FillSpec, fits_on_device,
    HIERARCHY_COLUMNS, kept_pits, label_border, label_count, label_ids, label_merge,
    label_numbering, label_split, LabelBorder, LeafBlock, outlet_cells, PortGraph, read_halo)
