"""Dask task graphs composed from the terrain library (ingest, grid MST, graph runs, benchmarks)."""
