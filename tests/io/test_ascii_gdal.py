"""ASCII grids where terrain's reader and GDAL's (rasterio, the oracle) used to part: the
``.prj`` beside a grid, nodata matching, GRASS headers, messages (docs/gis.md, "ASCII grids")."""

import warnings

import numpy as np
import pytest
import rasterio
from rasterio.crs import CRS

from terrain.errors import InputError, TerrainWarning
from terrain.io import open_grid, read_grid
from cli import run_main
from grids import assert_bits_equal

OLD_STYLE = {"geographic": "Projection GEOGRAPHIC\nDatum WGS84\nSpheroid WGS84\nUnits DD\n"
                           "Zunits NO\nParameters\n",
             "seconds": "Projection GEOGRAPHIC\nDatum WGS84\nUnits DS\nParameters\n",
             "utm": "Projection UTM\nZone 17\nDatum NAD83\nUnits METERS\nParameters\n"}


@pytest.mark.parametrize("suffix", [".prj", ".PRJ"])
@pytest.mark.parametrize("style", sorted(OLD_STYLE))
def test_an_old_style_or_upper_case_prj_gives_gdals_crs_and_transform(tmp_path, style,
                                                                      suffix):
    """Old-style ESRI lines and a .PRJ were ignored: the CRS was lost (a geographic DEM's
    slopes divided by degrees)."""
    path = tmp_path / "g.asc"
    path.write_text("ncols 3\nnrows 2\nxllcorner -79\nyllcorner 35\ncellsize 0.5\n"
                    "1 2 3\n4 5 6\n")
    (tmp_path / f"g{suffix}").write_text(OLD_STYLE[style])
    grid = open_grid(path)
    with rasterio.open(path) as src:
        assert src.crs is not None
        assert CRS.from_wkt(grid.crs) == src.crs
        assert grid.geotransform == src.transform.to_gdal()


def test_mst_slope_of_a_dem_with_an_old_style_geographic_prj_is_refused(tmp_path, capsys):
    path = tmp_path / "g.asc"
    path.write_text("ncols 3\nnrows 3\nxllcorner -79\nyllcorner 35\ncellsize 0.001\n"
                    "1 2 3\n4 5 6\n7 8 9\n")
    (tmp_path / "g.prj").write_text(OLD_STYLE["geographic"])
    rc, _, err = run_main(capsys, "mst", path, "-o", tmp_path / "m.zarr", "--weight", "slope")
    assert rc == 2 and "is geographic" in err
    assert not (tmp_path / "m.zarr").exists()


def gdal_masked(path):
    """rasterio's reading of band 1: (float32 values, mask)."""
    with rasterio.open(path) as src:
        m = src.read(1, masked=True)
        return m.data.astype(np.float32), np.ma.getmaskarray(m)


def read_both_ways(path):
    """The grid read by ``read_grid`` and on a pool (``read_all``), which must agree."""
    z, grid = read_grid(path)
    assert_bits_equal(grid.read_all()[0], z)
    return z


HEADER = "ncols {}\nnrows 1\nxllcorner 0\nyllcorner 0\ncellsize 1\nNODATA_value {}\n"


def test_an_integer_grids_nodata_is_the_integer_and_its_rounding_is_said(tmp_path):
    """NODATA_value 16777217 also masked 16777216 (both 16777216 as float32); GDAL, reading
    Int32, masks only 16777217. Integers float32 rounds are said, as in a GeoTIFF."""
    path = tmp_path / "big.asc"
    row = "16777216 16777217 5 16777219 -16777217 16777217"
    path.write_text(HEADER.format(6, 16777217) + row + "\n")
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        z = read_both_ways(path)
    values, mask = gdal_masked(path)
    np.testing.assert_array_equal(np.isnan(z[0]), mask[0])
    assert_bits_equal(z[~mask], values[~mask])
    said = {str(w.message) for w in got if "2^24" in str(w.message)}
    assert said == {f"{path}: int32 values beyond 2^24 are rounded to float32 (elevations' "
                    "type): 16777219 at cell (0, 3) reads as 16777220"}, said


@pytest.mark.parametrize("nodata", ["-9999", "-9999.0", "0.001", "-32768", "123456.7",
                                    "1e-30", "-3.0e38"])
def test_values_near_the_nodata_are_masked_where_gdal_masks_them(tmp_path, nodata):
    """-9999.001 (one float32 step from -9999) was kept; GDAL masks float32 cells within
    about 4 to 8 steps of the nodata: the band's edges, fast and slow tokens."""
    nd = np.float32(float(nodata))
    steps = [nd]
    for direction in (np.inf, -np.inf):
        v = nd
        for _ in range(12):
            v = np.nextafter(v, np.float32(direction))
            steps.append(v)
    tokens = [repr(float(v)) for v in steps]
    # the same values past the fast path (more than 19 digits, not all zeros)
    tokens += [t + "000000000000000000001" for t in tokens if "e" not in t]
    path = tmp_path / "near.asc"
    path.write_text(HEADER.format(len(tokens), nodata) + " ".join(tokens) + "\n")
    z = read_both_ways(path)
    values, mask = gdal_masked(path)
    assert mask.sum() > 1
    assert not mask.all() or abs(nd) > 1.7e38  # both sides of the band's edges; beyond,
    # the float32 sum with the nodata overflows, and GDAL masks every cell near it
    np.testing.assert_array_equal(np.isnan(z), mask)
    assert_bits_equal(z[~mask], values[~mask])


@pytest.mark.parametrize("nodata", ["-1e39", "1E+40", "-3.5e38", "-1.0e039",
                                    "10000000000000000000000000000000000000000"])
def test_a_nodata_beyond_float32_masks_its_own_cells(tmp_path, nodata):
    """``NODATA_value -1e39`` was taken, and then its own cells refused as values beyond
    float32 (GDAL masks them): a cell that is the nodata is nodata; another value beyond
    float32 is refused still, at its line."""
    path = tmp_path / "far.asc"
    path.write_text(HEADER.format(4, nodata) + f"1.5 {nodata} 3 {nodata}\n")
    z = read_both_ways(path)
    values, mask = gdal_masked(path)
    np.testing.assert_array_equal(np.isnan(z), mask)
    assert mask.tolist() == [[False, True, False, True]]
    assert_bits_equal(z[~mask], values[~mask])
    path.write_text(HEADER.format(4, nodata) + f"1.5 {nodata} 3 -4e39\n")
    with pytest.raises(InputError, match=r"far.asc:7: value -4e39 \(row 1, column 4\) is "
                                         "beyond the float32 range"):
        read_grid(path)


GRASS = "north: 1\nsouth: 0\neast: 4\nwest: 0\nrows: 1\ncols: 4\n"


def test_grass_null_star_is_the_default_r_in_ascii_writes(tmp_path):
    """'null: *' was refused (null must be a number). GDAL reads it as a nodata of 0, which
    masks its 0 cells too; terrain's nodata is the '*' cells only (docs/gis.md)."""
    path = tmp_path / "g.asc"
    path.write_text(GRASS + "null: *\n1 * 0 4\n")
    z = read_both_ways(path)
    values, mask = gdal_masked(path)
    assert mask.tolist() == [[False, True, True, False]]
    assert_bits_equal(z, np.array([[1, np.nan, 0, 4]], np.float32))
    assert_bits_equal(z[~mask], values[~mask])


@pytest.mark.parametrize("value, refused", [("2", True), ("0.1", True), ("1", False)])
def test_grass_multiplier_is_refused_saying_why_unless_it_is_one(tmp_path, value, refused):
    """'multiplier:' was an 'unknown GRASS header key': r.in.ascii multiplies the values by
    it, GDAL ignores it (it reads the values as written)."""
    path = tmp_path / "g.asc"
    path.write_text(GRASS + f"multiplier: {value}\n1 2 3 4\n")
    if refused:
        with pytest.raises(InputError, match=rf"g.asc:7: multiplier {value}: r.in.ascii "
                                             "multiplies the values by it and GDAL ignores it"):
            open_grid(path)
    else:
        values, _ = gdal_masked(path)
        assert_bits_equal(read_both_ways(path), values)


ESRI = b"ncols 2\nnrows 2\nxllcorner 0\nyllcorner 0\ncellsize 1\n"
LONE_CR = r"its lines end with a carriage return alone \(classic Mac OS\)"


@pytest.mark.parametrize("text, message", [
    (ESRI + b"1.5 inf\n3 4\n", r"e.asc:6: value inf \(row 1, column 2\) is infinite"),
    (ESRI + b"1 2\n-Infinity 4\n", r"e.asc:7: value -Infinity \(row 2, column 1\) is infinite"),
    (ESRI + b"1 2\r3 4\r", rf"e.asc:6: {LONE_CR}"),           # was: file ends after 1 row
    (ESRI + b"1 2\n3 4\r5 6\n", rf"e.asc:7: {LONE_CR}"),      # was: row 2 has 4 values
    (ESRI[:-1] + b"\r1 2\r3 4\r", rf"e.asc:5: {LONE_CR}"),    # was: cellsize needs one value
    (b"ncols 99999999999999999999\nnrows 2\nxllcorner 0\nyllcorner 0\ncellsize 1\n1 2\n3 4\n",
     r"e.asc:1: header claims 2 x 99999999999999999999"),     # was: line 2
])
def test_messages_say_what_is_wrong_where(tmp_path, text, message):
    path = tmp_path / "e.asc"
    path.write_bytes(text)
    with pytest.raises(InputError, match=message):
        read_grid(path)
    with pytest.raises(InputError, match=message):
        open_grid(path).read_all()


@pytest.mark.parametrize("tail", [b"\n\x1a", b"\x1a", b"\r\n\x1a", b"\n\x1a\n", b"\n\x1a\x1a",
                                  b"\x1a\r\n", b"\n\x1a \n\x1a\n\n"])
def test_a_final_dos_end_of_file_mark_is_read_past_as_gdal_does(tmp_path, tail):
    """A trailing Ctrl-Z was 'more data rows than nrows' (or a bad token '4\\x1a'); so was
    one followed by a newline or by more of them, which GDAL reads past too."""
    path = tmp_path / "z.asc"
    path.write_bytes(ESRI + b"1 2\n3 4" + tail)
    values, _ = gdal_masked(path)
    assert_bits_equal(read_both_ways(path), values)


@pytest.mark.parametrize("row, gdal, terrain", [
    (b"1.5 nan NaN +nan", [1.5, np.nan, np.nan, np.nan], [1.5, np.nan, np.nan, np.nan]),
    (b"1.5 NAN -nan 4", [1.5, 0, 0, 4], [1.5, np.nan, np.nan, 4]),
    (b"1 nan 2147483648 -0", [1, 0, -2147483648, 0], [1, np.nan, 2147483648, -0.0]),
    (b"1.0 1d3 0x10 nan(123)", [1, 1, 0, 0], "non-numeric token '1d3'"),
])
def test_where_gdal_reads_otherwise_is_as_the_docs_say(tmp_path, row, gdal, terrain):
    """docs/gis.md, "ASCII grids": GDAL 3.10's readings that terrain does not follow."""
    path = tmp_path / "d.asc"
    path.write_bytes(ESRI.replace(b"ncols 2\nnrows 2", b"ncols 4\nnrows 1") + row + b"\n")
    with rasterio.open(path) as src:
        assert_bits_equal(src.read(1).astype(np.float32), np.array([gdal], np.float32))
    if isinstance(terrain, str):
        with pytest.raises(InputError, match=terrain):
            read_grid(path)
    else:
        assert_bits_equal(read_grid(path)[0], np.array([terrain], np.float32))


@pytest.mark.parametrize("nodata, row", [
    ("2147483648", "2147483647 2147483520 5 2147483648"),
    ("-2147483649", "-2147483647 -2147483520 5 -2147483648"),
    ("30000000", "30000001 1e3"),
])
def test_a_nodata_beyond_int32_or_an_exponent_makes_gdal_read_float32(tmp_path, nodata, row):
    """docs/gis.md, "ASCII grids": not only a '.' makes GDAL read Float32, but an exponent in
    the data or a NODATA_value beyond Int32; its float32 nodata test then masks integers near
    the nodata, which terrain keeps (an integer token is nodata when it equals it)."""
    path = tmp_path / "f.asc"
    tokens = row.split()
    path.write_bytes(ESRI.replace(b"ncols 2\nnrows 2", f"ncols {len(tokens)}\nnrows 1".encode())
                     + f"NODATA_value {nodata}\n{row}\n".encode())
    with rasterio.open(path) as src:
        assert src.dtypes[0] == "float32", src.dtypes
    values, mask = gdal_masked(path)
    with pytest.warns(TerrainWarning, match=r"values beyond 2\^24 are rounded"):
        z, _ = read_grid(path)
    exact = [t == nodata for t in tokens]
    np.testing.assert_array_equal(np.isnan(z[0]), exact)
    assert mask[0, 0] and not exact[0]  # GDAL masks the integer near the nodata
    assert_bits_equal(z[~mask], values[~mask])
