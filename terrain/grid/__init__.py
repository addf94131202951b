"""Grid graphs of DEMs: the exact minimum spanning forest and cost distance (grid SSSP);
names loaded on first use (lazy_loader, from the stub ``__init__.pyi``).
"""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
