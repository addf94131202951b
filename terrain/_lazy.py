"""Package names loaded on first use (PEP 562), for packages whose light entry points
(``terrain bfs``, reading an ASCII header) must not import Numba, zarr or rasterio."""

import importlib

__all__ = ["lazy_names"]


def lazy_names(package, where):
    """``(__getattr__, __dir__)`` for the package ``package`` (its ``__name__``): a name of
    ``where`` (name -> submodule) is imported from that submodule on first access and then
    bound in the package like an eagerly imported one."""
    module = importlib.import_module(package)

    def __getattr__(name):
        if name in where:
            value = getattr(importlib.import_module(f".{where[name]}", package), name)
            setattr(module, name, value)
            return value
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__():
        return sorted(list(vars(module)) + list(where))

    return __getattr__, __dir__
