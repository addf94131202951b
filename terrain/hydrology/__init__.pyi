# fill (terrain/hydrology/fill.py)
from .fill import (depression_labels, fill_depressions, fill_tiled, FillResult, FillSpec,
    outlet_cells)
