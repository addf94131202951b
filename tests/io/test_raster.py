"""Rasters GDAL reads that hold no elevations on a north-up grid: complex bands, GCP-only
georeferencing, no georeference at all (read as an ESRI grid at (0, 0) with cells of 1)."""

import warnings

import numpy as np
import pytest
import rasterio

import terrain
from terrain.errors import InputError

from cli import run_main

xr = pytest.importorskip("xarray")


def _write(path, values, **profile):
    with warnings.catch_warnings():  # rasterio's NotGeoreferencedWarning of the writes below
        warnings.simplefilter("ignore")
        with rasterio.open(path, "w", driver="GTiff", height=values.shape[0],
                           width=values.shape[1], count=1, dtype=values.dtype.name,
                           **profile) as dst:
            dst.write(values, 1)
    return path


def _refused(capsys, tmp_path, path, message):
    out = tmp_path / "out.zarr"
    rc, _, err = run_main(capsys, "mst", path, "-o", out)
    assert rc == 2 and err == f"terrain: {path}: {message}\n", err
    assert not out.exists()
    with pytest.raises(InputError, match=f"^{path}: "):
        terrain.fill(path)


def test_a_complex_band_is_refused(tmp_path, capsys):
    z = (np.arange(12, dtype=np.float32).reshape(3, 4) + 1j).astype(np.complex64)
    path = _write(tmp_path / "cplx.tif", z, crs="EPSG:32617",
                  transform=rasterio.Affine(30, 0, 0, 0, -30, 90))
    _refused(capsys, tmp_path, path,
             "band 1 holds complex numbers (complex64): elevations are real numbers")
