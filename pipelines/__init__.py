"""Dask task graphs composed from the terrain library, and the command handlers that run them.

Each command has one handler ``NAME_command(args) -> exit status`` (the parsed command line);
the names are loaded on first use (lazy_loader, from the stub ``__init__.pyi``), so a command
imports only its own pipeline.
"""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
