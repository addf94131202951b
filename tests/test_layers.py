"""The import contracts of pyproject.toml ([tool.importlinter]): layers import downwards
only, no cycles between the modules of a package, private modules stay private."""

import subprocess
import sys
from pathlib import Path

import pytest
from cli import child_env

ROOT = Path(__file__).resolve().parents[1]


def test_import_contracts_are_kept():
    pytest.importorskip("importlinter")
    # the checkout's packages, not an installed copy: grimp reads the source it imports
    env = child_env()
    code = "import sys; from importlinter.cli import lint_imports; sys.exit(lint_imports(no_cache=True))"
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "BROKEN" not in proc.stdout
