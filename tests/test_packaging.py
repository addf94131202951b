"""What the distributions carry and declare: the sdist every tracked file a build or a test
run reads, the wheel the stubs and their typing marker (the stubs export their names to type
checkers); the metadata's version, license, Python and dependencies, against what the code
says and imports."""

import ast
import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# tracked files that only the repository itself uses: its ignore list and its CI script
NOT_SHIPPED = {".gitignore", ".ci/run"}
STUBBED = ["terrain", "terrain.grid", "terrain.graph", "terrain.hydrology", "terrain.tiles",
           "terrain.io", "pipelines"]


def metadata():
    return pytest.importorskip("tomllib").loads((ROOT / "pyproject.toml").read_text())


def tracked_files():
    """The checkout's files as git lists them: the independent record of the source."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: no list of the source to compare with")
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True)
    return [p for p in out.stdout.decode().split("\0") if p]


def copy_of_checkout(tmp_path):
    """The tracked files alone, as a clean clone holds them (no build products, no caches);
    skipped where the setuptools here is older than the build-system's."""
    setuptools = pytest.importorskip("setuptools")
    Requirement = pytest.importorskip("packaging.requirements").Requirement
    wanted = next(Requirement(r) for r in metadata()["build-system"]["requires"]
                  if Requirement(r).name == "setuptools")
    if setuptools.__version__ not in wanted.specifier:
        pytest.skip(f"the build needs {wanted}, this environment has {setuptools.__version__}")
    src = tmp_path / "src"
    for rel in tracked_files():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, src / rel)
    return src


def test_the_sdist_carries_every_tracked_file(tmp_path):
    """A distribution (Debian, conda-forge) builds and runs the tests from the sdist: it held
    the packages and 5 of the test files, without their conftest.py, helpers or data, nor
    the benchmarks the layer contracts name, nor docs/ and data/sample.asc."""
    src = copy_of_checkout(tmp_path)
    out = tmp_path / "dist"
    subprocess.run([sys.executable, "-c", "import sys; from setuptools import build_meta; "
                    "build_meta.build_sdist(sys.argv[1])", str(out)],
                   cwd=src, check=True, capture_output=True)
    [sdist] = out.glob("*.tar.gz")
    with tarfile.open(sdist) as tar:
        shipped = {m.name.split("/", 1)[1] for m in tar.getmembers() if m.isfile()}
    assert sorted(set(tracked_files()) - NOT_SHIPPED - shipped) == []
    assert not [p for p in shipped if "__pycache__" in p or p.endswith(".pyc")]


def built_metadata(src, tmp_path):
    """The ``.dist-info`` folder setuptools makes of the checkout's copy ``src``."""
    code = ("import sys; from setuptools import build_meta; "
            "print(build_meta.prepare_metadata_for_build_wheel(sys.argv[1]))")
    out = tmp_path / "meta"
    out.mkdir()
    proc = subprocess.run([sys.executable, "-c", code, str(out)], cwd=src, capture_output=True,
                          text=True, check=True)
    return out / proc.stdout.strip().splitlines()[-1]


def test_the_metadata_builds_without_deprecated_fields(tmp_path):
    """setuptools warned that ``license = { text = ... }`` would stop building after
    2027-02-18: the metadata is built with its deprecation warnings as errors."""
    src = copy_of_checkout(tmp_path)
    code = ("import sys, warnings; from setuptools.warnings import SetuptoolsDeprecationWarning; "
            "warnings.simplefilter('error', SetuptoolsDeprecationWarning); "
            "from setuptools import build_meta; "
            "build_meta.prepare_metadata_for_build_wheel(sys.argv[1])")
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path)], cwd=src,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_the_distribution_takes_the_version_that_terrain_prints(tmp_path):
    """``terrain --version`` prints ``terrain.__version__``; pyproject.toml held a version
    of its own, so a release that bumped one of the two shipped metadata and a command that
    disagreed."""
    src = copy_of_checkout(tmp_path)
    init = src / "terrain" / "__init__.py"
    init.write_text(re.sub(r'(?m)^__version__ = ".*"$', '__version__ = "97.5.3"', init.read_text()))
    meta = (built_metadata(src, tmp_path) / "METADATA").read_text()
    assert "\nVersion: 97.5.3\n" in meta


def test_the_distribution_carries_its_license_text(tmp_path):
    """BSD-3-Clause asks that the copyright notice and the conditions go with every copy:
    the metadata declared the licence and shipped no text of it."""
    info = built_metadata(copy_of_checkout(tmp_path), tmp_path)
    meta = (info / "METADATA").read_text()
    assert "\nLicense-Expression: BSD-3-Clause\n" in meta and "\nLicense-File: LICENSE\n" in meta
    shipped = next(info.rglob("LICENSE")).read_text()
    assert "BSD 3-Clause License" in shipped and "Copyright (c)" in shipped


def test_the_wheel_carries_the_stubs_and_their_typing_marker(tmp_path):
    """Without ``py.typed`` mypy reads nothing of an installed package (``import terrain``:
    "module is installed, but missing library stubs or py.typed marker")."""
    src = copy_of_checkout(tmp_path)
    lib = tmp_path / "lib"
    env = dict(os.environ, TERRAIN_NO_PRECOMPILE="1")
    subprocess.run([sys.executable, "setup.py", "-q", "build_py", "-d", str(lib)], cwd=src,
                   env=env, check=True, capture_output=True)
    for package in STUBBED:
        folder = lib.joinpath(*package.split("."))
        assert (folder / "__init__.pyi").is_file(), package
    for top in {p.split(".")[0] for p in STUBBED}:
        assert (lib / top / "py.typed").is_file(), top


@pytest.mark.parametrize("package", STUBBED)
def test_the_stubs_export_their_names_to_type_checkers(package):
    """A stub's ``from .m import x`` is private to type checkers (PEP 484: only ``x as x``
    re-exports), so mypy said ``Module "terrain" does not explicitly export attribute
    "mst"``; and a name the package sets itself (``terrain.__version__``) must be declared
    there too: mypy reads the stub instead of the module."""
    folder = ROOT.joinpath(*package.split("."))
    stub = ast.parse((folder / "__init__.pyi").read_text())
    hidden = [f"{node.module}.{a.name}" for node in stub.body if isinstance(node, ast.ImportFrom)
              for a in node.names if a.asname != a.name]
    assert hidden == []
    declared = {node.target.id for node in stub.body if isinstance(node, ast.AnnAssign)}
    module = ast.parse((folder / "__init__.py").read_text())
    own = {t.id for node in module.body if isinstance(node, ast.Assign) for t in node.targets
           if isinstance(t, ast.Name)}
    assert sorted(own - declared) == []


def imported_distributions(*folders):
    """``{distribution: a file importing it}`` of the third-party modules that the Python
    files under ``folders`` import anywhere (a function's own import too), as the installed
    packages' own records (``packages_distributions``) name them; modules that no installed
    distribution provides (CuPy without a GPU) cannot be checked and are left out."""
    import importlib.metadata
    providers = importlib.metadata.packages_distributions()
    found = {}
    for folder in folders:
        for path in sorted((ROOT / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Import):
                    modules = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0:
                    modules = [node.module]
                else:
                    continue
                for module in modules:
                    for dist in providers.get(module.split(".")[0], []):
                        name = dist.lower().replace("_", "-")
                        found.setdefault(name, str(path.relative_to(ROOT)))
    found.pop("terrain", None)
    return found


def declared(*groups):
    """The distributions ``groups`` of pyproject.toml's requirements name (``"dependencies"``
    or an extra's name); ``dask[array,distributed]`` declares distributed too, whose version
    dask's extra pins."""
    Requirement = pytest.importorskip("packaging.requirements").Requirement
    project = metadata()["project"]
    names = set()
    for group in groups:
        for spec in (project["dependencies"] if group == "dependencies"
                     else project["optional-dependencies"][group]):
            req = Requirement(spec)
            names |= {req.name.lower().replace("_", "-")} | set(req.extras)
    return names


def test_the_dependencies_are_what_the_package_imports():
    """numcodecs (the blocked cost distance's Blosc) and fsspec (stores at URLs) were imported
    but came only through zarr and dask, which may drop them; psutil was declared and never
    imported. bokeh is imported by distributed for the cluster's dashboard, not by terrain."""
    imported = imported_distributions("terrain", "pipelines")
    extras = [e for e in metadata()["project"]["optional-dependencies"] if e != "dev"]
    assert {d: f for d, f in imported.items() if d not in declared("dependencies", *extras)} == {}
    unused = declared("dependencies") - {"array", "distributed", "bokeh"} - set(imported)
    assert sorted(unused) == []


def test_the_test_extra_holds_what_the_tests_import():
    """``pip install ".[test]"`` then ``python -m pytest``: tifffile, pyproj and google-crc32c
    came with scikit-image, rioxarray and zarr 3.1 (zarr 3.0, which the requirement allows,
    has no google-crc32c: tests/tiles/test_store.py failed to import). The GPU tests run
    where a cuda extra is installed."""
    imported = imported_distributions("tests")
    allowed = declared("dependencies", "test", "cuda12", "cuda13")
    assert {d: f for d, f in imported.items() if d not in allowed} == {}


def test_the_oldest_python_admitted_has_every_dependency(tmp_path):
    """requires-python said >=3.10, where no zarr 3 (nor numcodecs 0.14) installs: pip on
    Python 3.10 took terrain and then failed to resolve ``zarr<4,>=3.0.8``. pip resolves
    each requirement for the oldest Python the metadata admits, from its package index
    (skipped where none answers)."""
    project = metadata()["project"]
    floor = re.fullmatch(r">=(\d+\.\d+)", project["requires-python"]).group(1)
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--no-deps",
                           "--ignore-installed", "--only-binary=:all:", "--python-version", floor,
                           "--target", str(tmp_path / "target"), "--retries", "0",
                           "--timeout", "20", *project["dependencies"]],
                          capture_output=True, text=True, timeout=600)
    if proc.returncode and "No matching distribution" not in proc.stderr:
        pytest.skip(f"no package index answered: {proc.stderr.strip()[-300:]}")
    assert proc.returncode == 0, proc.stderr[-1500:]
