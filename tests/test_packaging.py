"""What the distributions carry: the sdist every tracked file a build or a test run reads."""

import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# tracked files that only the repository itself uses: its ignore list and its CI script
NOT_SHIPPED = {".gitignore", ".ci/run"}


def tracked_files():
    """The checkout's files as git lists them: the independent record of the source."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: no list of the source to compare with")
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True)
    return [p for p in out.stdout.decode().split("\0") if p]


def copy_of_checkout(tmp_path):
    """The tracked files alone, as a clean clone holds them (no build products, no caches)."""
    pytest.importorskip("tomllib")
    from packaging.requirements import Requirement
    from packaging.version import Version
    import setuptools
    import tomllib
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    wanted = next(Requirement(r) for r in meta["build-system"]["requires"]
                  if Requirement(r).name == "setuptools")
    if Version(setuptools.__version__) not in wanted.specifier:
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
