"""The benchmarks (``python -m benchmarks WHAT``, run from the checkout) run on small inputs and
report ours and the peers' figures, agreeing on the results."""

import subprocess
import sys

import pytest

from cli import ROOT


def run_benchmark(*argv, timeout=300):
    """``python -m benchmarks ARGV`` from the checkout: ``(exit status, stdout, stderr)``."""
    proc = subprocess.run([sys.executable, "-m", "benchmarks", *map(str, argv)], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)
    return proc.returncode, proc.stdout, proc.stderr


@pytest.mark.slow
def test_bench_graph_load_runs_and_agrees(tmp_path):
    rc, so, se = run_benchmark("graph-load", "--scale", 10, "--edge-factor", 4, "--repeat", 1,
                         "--workdir", tmp_path, "--scheduler", "threads")
    assert rc == 0, se
    assert "check: vertices reached vs numpy loadtxt + scipy's: agree" in so, so
    assert "numpy loadtxt + scipy" in so and "CSR build" in so


def test_bench_cost_distance_runs_and_agrees():
    rc, so, se = run_benchmark("cost-distance", "--rows", 48, "--cols", 40, "--backend", "cpu")
    assert rc == 0, se
    rows = {line.split("  ")[0].strip(): line for line in so.splitlines()}
    assert any(k.startswith("terrain in-core (cpu") for k in rows)
    for peer in ("scikit-image MCP_Geometric", "scipy dijkstra (CSR build incl.)"):
        line = rows[peer]
        assert float(line.split()[-1]) < 1e-12 or "not installed" in line


@pytest.mark.slow
def test_bench_cost_distance_peers_whole_processes_agree(tmp_path):
    """GeoTIFF in, GeoTIFF out: terrain, GRASS r.cost (when installed) and the scikit-image
    script, as processes; the peers' distances equal ours."""
    import shutil
    pytest.importorskip("skimage")
    rc, so, se = run_benchmark("cost-distance", "--peers", "--sides", 64, "--repeat", 1,
                               "--skimage-python", sys.executable, "--workdir", tmp_path,
                               timeout=600)
    assert rc == 0, se
    rows = [line.split() for line in so.splitlines() if line.lstrip().startswith("64 ")]
    names = {r[1] if r[1] == "terrain" else " ".join(r[1:3]) for r in rows}
    assert {"terrain", "skimage MCP_Geometric"} <= names, so
    assert ("GRASS r.cost" in names) == bool(shutil.which("grass"))
    for r in rows:
        if r[1] != "terrain":
            assert float(r[-1]) < 1e-6, so  # r.cost and MCP_Geometric: the same model
    with_cog = tmp_path / "out-64" / "terrain" / "distance.tif"
    assert with_cog.exists()


@pytest.mark.slow
def test_bench_blocked_runs_and_agrees(tmp_path, capsys):
    """The benchmark module's table, for a small grid: both runs, the same bits."""
    from benchmarks.cost_distance_blocked import main
    assert main(["--size", "96", "--in-core", "--compare", "--memory", "64KB",
                 "--workdir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "96² in-core" in out and "96² blocked" in out
    assert "blocked == in-core bit for bit: True" in out
    assert not list(tmp_path.glob("*.zarr"))  # the stores removed


def test_bench_startup_runs_the_installed_command_and_says_which(tmp_path):
    """Not the checkout's source: the ``terrain`` script beside ``--terrain-python``, named
    in the output (a stand-in script that logs its arguments)."""
    log = tmp_path / "ran.txt"
    script = tmp_path / "terrain"
    script.write_text(f"#!{sys.executable}\nimport sys\n"
                      f"open({str(log)!r}, 'a').write(' '.join(sys.argv[1:]) + '\\n')\n")
    script.chmod(0o755)
    rc, so, se = run_benchmark("startup", "--repeat", 1, "--terrain-python", tmp_path / "python")
    assert rc == 0, se
    assert str(script) in so.splitlines()[0], so
    assert [line.split()[0] for line in log.read_text().splitlines()] == ["mst"] * 3


def test_bench_startup_refuses_without_an_installation(tmp_path):
    rc, so, se = run_benchmark("startup", "--terrain-python", tmp_path / "python")
    assert rc == 2 and not so
    assert len(se.strip().splitlines()) == 1 and "no installed terrain command" in se, se


def run_in_process(*argv):
    """``python -m benchmarks ARGV`` in this process: its exit status."""
    from benchmarks.__main__ import main
    return main([str(a) for a in argv])


def test_a_peer_that_disagrees_fails_the_benchmark_naming_what(monkeypatch, capsys):
    """scipy's distances doubled: exit status 1 and a line saying which result differed."""
    import benchmarks.cost_distance as cd
    real = cd.scipy_cost_distance
    monkeypatch.setattr(cd, "scipy_cost_distance", lambda *a, **k: 2 * real(*a, **k))
    assert run_in_process("cost-distance", "--rows", 24, "--cols", 20, "--backend", "cpu") == 1
    checks = [line for line in capsys.readouterr().out.splitlines() if line.startswith("check:")]
    assert any("scipy dijkstra" in line and line.endswith(": DIFFER") for line in checks), checks


def test_bfs_distances_are_checked_against_scipys_tree_and_the_floor_reported(capsys):
    assert run_in_process("bfs", "--graph", "grid", "--rows", 24, "--cols", 17, "--sources", 2,
                          "--backend", "cpu") == 0
    out = capsys.readouterr().out.splitlines()
    assert any(line.startswith("check: distances from vertex")
               and line.endswith("vs scipy's BFS tree: agree") for line in out), out
    assert any(line.startswith("goal terrain cpu faster than scipy: ") for line in out), out


def test_diameter_is_checked_against_networkx(capsys):
    assert run_in_process("diameter", "--graph", "grid", "--rows", 9, "--cols", 13,
                          "--backend", "cpu") == 0
    assert "check: cpu diameter vs networkx's: agree" in capsys.readouterr().out


def test_a_benchmark_without_a_peer_says_it_compared_nothing(capsys):
    assert run_in_process("sssp", "--graph", "grid", "--rows", 8, "--cols", 8, "--sources", 1,
                          "--no-scipy", "--backend", "cpu") == 0
    out = capsys.readouterr().out
    assert "check: nothing compared" in out and "speed-up" not in out


def test_a_missed_goal_is_reported_but_does_not_fail_the_run(capsys):
    from benchmarks.common import verdict
    assert verdict([("forest", True)], [("fast", False)]) == 0
    assert verdict([("forest", False)], [("fast", True)]) == 1
    assert capsys.readouterr().out.splitlines() == [
        "check: forest: agree", "goal fast: NOT met", "check: forest: DIFFER", "goal fast: met"]


def _benchmark_modules():
    """Every module of the benchmarks run as ``python -m benchmarks.NAME``."""
    return sorted(p.stem for p in (ROOT / "benchmarks").glob("*.py")
                  if 'if __name__ == "__main__"' in p.read_text() and p.stem != "__main__")


@pytest.mark.parametrize("module", _benchmark_modules())
@pytest.mark.filterwarnings("ignore:'benchmarks.:RuntimeWarning")  # run again as __main__
def test_every_benchmark_module_answers_help(module, monkeypatch, capsys):
    import runpy
    monkeypatch.setattr(sys, "argv", [module, "--help"])
    with pytest.raises(SystemExit) as stop:
        runpy.run_module(f"benchmarks.{module}", run_name="__main__", alter_sys=True)
    assert stop.value.code == 0
    assert capsys.readouterr().out.startswith("usage: ")


def test_every_benchmark_answers_help(capsys):
    from benchmarks.__main__ import BENCHMARKS, build_parser
    for name in ["", *BENCHMARKS]:
        with pytest.raises(SystemExit) as stop:
            build_parser().parse_args([name, "--help"] if name else ["--help"])
        assert stop.value.code == 0
        assert capsys.readouterr().out.startswith("usage: python -m benchmarks")


def test_bench_diameter_without_networkx_compares_nothing(monkeypatch, capsys):
    """networkx is an optional peer: without it the benchmark runs ours and says that nothing
    was compared (exit 0; 1 is a result that DIFFERs)."""
    from benchmarks.__main__ import main
    monkeypatch.setitem(sys.modules, "networkx", None)  # import networkx: ImportError
    rc = main(["diameter", "--graph", "grid", "--rows", "30", "--cols", "30",
               "--backend", "cpu"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "networkx: skipped (not installed)" in out
    assert "check: nothing compared (networkx not installed" in out


def test_bench_flow_without_richdem_runs_ours_alone(tmp_path):
    rc, so, se = run_benchmark("flow", "--rows", 32, "--cols", 32, "--repeat", 1,
                               "--backend", "cpu", "--workdir", tmp_path,
                               "--richdem-python", tmp_path / "no" / "python")
    assert rc == 0, se
    assert "RichDEM: not run" in so and "terrain flow --filled" in so
    assert "check: nothing compared (" in so


@pytest.mark.parametrize("argv, said", [
    (["bfs", "--graph", "file", "--file", "/nonexistent/g.mtx"], "/nonexistent/g.mtx"),
    (["bfs", "--graph", "file"], "--graph file needs --file PATH")])
def test_bench_bad_input_is_one_line_exit_2(argv, said):
    """A missing file or a bad argument is the user's: exit 2 and one line, never 1 (a
    result that DIFFERs) with a traceback."""
    rc, so, se = run_benchmark(*argv)
    assert rc == 2, (so, se)
    assert "Traceback" not in se and len(se.strip().splitlines()) == 1, se
    assert se.startswith("python -m benchmarks bfs: ") and said in se, se


@pytest.mark.parametrize("peer_says, agreed", [(3, True), (4, False)])
def test_standins_whole_processes_compare_the_diameters(tmp_path, monkeypatch, capsys,
                                                        peer_says, agreed):
    """``graph_standins --processes --networkit PYTHON`` timed networkit's process, then said
    ``check: nothing compared``; each graph's diameter is now checked against networkit's (a
    stand-in interpreter here that prints ``peer_says``; the path graphs' diameter is 3)."""
    import os

    from benchmarks.graph_standins import main
    for name in ("power", "facebook", "hepph"):  # present: the stand-ins are not generated
        (tmp_path / f"{name}.txt").write_text("0\t1\n1\t2\n2\t3\n")
    peer = tmp_path / "networkit-python"
    peer.write_text(f"#!/bin/sh\necho {peer_says}\n")
    os.chmod(peer, 0o755)
    assert main([str(tmp_path), "--processes", "--repeat", "1", "--networkit", str(peer)]) == \
        (0 if agreed else 1)
    checks = [line for line in capsys.readouterr().out.splitlines() if line.startswith("check:")]
    said = "agree" if agreed else "DIFFER"
    assert checks == [f"check: {name}.txt diameter vs networkit's ({peer_says}): {said}"
                      for name in ("power", "facebook", "hepph")]
