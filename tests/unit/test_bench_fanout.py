"""The fan-out benchmark's measuring pieces on real processes and threads (no servers): the /proc
process-tree sampler counts the CPU of children too short-lived to be sampled, the in-process
profiler charges a thread's CPU to the function it burns it in, and the README's fan-out tables
come out of a results section (with a failed size in it)."""

from __future__ import annotations

import hashlib
import importlib
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

pytestmark = pytest.mark.unit

BENCH = Path(__file__).resolve().parents[2] / "bench"
BURN = "import time\nt = time.process_time()\nwhile time.process_time() - t < {}: pass\n"


@pytest.fixture
def bench(monkeypatch: pytest.MonkeyPatch) -> Any:
    """The bench's modules, imported as its scripts import each other (bench/ first on the path)."""
    monkeypatch.syspath_prepend(str(BENCH))

    def load(name: str) -> ModuleType:
        return importlib.import_module(name)

    return load


def _watched_server(proctree: ModuleType, work: str, classify: Any, residual: str) -> Any:
    """A long-lived "server" whose tree is watched while it runs `work` (Python statements),
    then idles; the report."""
    code = (
        "import subprocess, sys, time\nsys.stdin.readline()\n"
        + work
        + "print('done', flush=True)\ntime.sleep(60)\n"
    )
    server = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        tree = proctree.Tree(server.pid, classify, residual)
        with proctree.ProcessTrees({"server": tree}, period_s=0.2) as trees:
            assert server.stdin is not None and server.stdout is not None
            server.stdin.write("go\n")
            server.stdin.flush()
            assert server.stdout.readline().strip() == "done"
        return trees.report()
    finally:
        server.kill()
        server.wait()


def test_a_server_tree_counts_children_that_lived_between_samples(bench: Any) -> None:
    proctree = bench("proctree")
    # five 20 ms children and one of 0.4 s
    children = "".join(
        f"subprocess.run([sys.executable, '-c', {BURN.format(x)!r}])\n" for x in [0.02] * 5 + [0.4]
    )
    report = _watched_server(proctree, children, proctree.one_kind("server"), "server")
    # the children burned 0.5 s (and each started an interpreter): all of it is the tree's,
    # whether the sampler saw a child or not (the server waited for them: its children fields)
    assert 0.5 <= report.cpu_s["server"] < 5
    assert report.cpu_by_kind_s["server"] == pytest.approx(report.cpu_s["server"])
    assert report.seen["server"] >= 2  # the server, and at least the 0.4 s child
    assert report.peak_mb["server"] > 1
    assert report.root_peak_mb["server"] > 1
    assert report.machine_cpu_s >= report.cpu_s["server"] - 0.05  # the machine ran it too


def test_a_child_and_its_own_child_that_end_together_are_counted_once(bench: Any) -> None:
    proctree = bench("proctree")
    # like a pulumi process and its plugin: both burn, then the child ends the grandchild, reaps
    # it and exits, both in the same sampling period
    grandchild = BURN.format(0.3) + "time.sleep(60)\n"
    child = (
        "import subprocess, sys\n"
        f"plugin = subprocess.Popen([sys.executable, '-c', {grandchild!r}])\n"
        + BURN.format(0.6)
        + "plugin.kill()\nplugin.wait()\n"
    )
    work = f"subprocess.run([sys.executable, '-c', {child!r}])\n"
    report = _watched_server(proctree, work, proctree.flow_kind, "not seen")
    assert report.cpu_s["server"] >= 0.6
    assert sum(report.cpu_by_kind_s.values()) == pytest.approx(report.cpu_s["server"], abs=0.03)


def test_a_reaped_root_takes_the_total_the_caller_gives(bench: Any) -> None:
    proctree = bench("proctree")
    with proctree.ProcessTrees({}) as trees:
        flow = subprocess.Popen([sys.executable, "-c", BURN.format(0.3)])
        trees.add("flow", proctree.Tree(flow.pid, proctree.flow_kind, "not seen"))
        flow.wait()
    trees.set_total("flow", 1.25)
    report = trees.report()
    assert report.cpu_s["flow"] == 1.25
    assert report.cpu_by_kind_s.get("flow process", 0) + report.cpu_by_kind_s.get(
        "not seen", 0
    ) == pytest.approx(1.25)


def test_process_kinds_by_command_line(bench: Any) -> None:
    proctree = bench("proctree")
    assert proctree.flow_kind("/x/.venv/bin/python bench/fanout.py a b", True) == "flow process"
    assert proctree.flow_kind("/cache/pulumi/bin/pulumi up --yes", False) == "pulumi"
    plugin = "/v/bin/python -m stackflow.localcloud.plugin aws --port 0"
    assert proctree.flow_kind(plugin, False) == "aws plugin"
    assert proctree.cloud_kind("/usr/sbin/mariadbd --no-defaults", False) == "MariaDB"
    assert proctree.cloud_kind("python -m stackflow.localcloud.server", True) == (
        "local cloud server (moto)"
    )


def _burn_in_a_named_function() -> None:
    end = time.process_time() + 0.6
    while time.process_time() < end:
        hashlib.sha256(b"x" * 4096).digest()


def test_the_profile_charges_a_threads_cpu_to_its_function(bench: Any) -> None:
    cpuprofile = bench("cpuprofile")
    profile = cpuprofile.CpuProfile(period_s=0.05).start()
    worker = threading.Thread(target=_burn_in_a_named_function, name="burner-7")
    worker.start()
    worker.join()
    found = profile.stop()
    top_function, seconds = found["by_self"][0]
    assert top_function.startswith("_burn_in_a_named_function (")
    assert seconds >= 0.3
    assert dict(found["by_thread"])["burner-N"] >= 0.3
    assert sum(v for _k, v in found["by_self"]) == pytest.approx(found["cpu_s"], abs=0.05)


def _row(database: str, n: int, wall: float, cpu: float, backoffs: int) -> dict[str, Any]:
    return {
        "database": database,
        "environments": n,
        "ok": True,
        "wall_s": wall,
        "ideal_s": max(18.8, cpu / 2),
        "ideal_bound": "CPU / cores" if cpu / 2 > 18.8 else "critical path",
        "wall_over_ideal": round(wall / max(18.8, cpu / 2), 2),
        "cpu_s": cpu,
        "cores": 2,
        "client_backoffs": backoffs,
        "client_backoff_s": 2.5 * backoffs,
        "cpu_by_kind_s": {"pulumi": cpu / 2, "Prefect server": cpu / 4, "flow process": cpu / 4},
        "peak_rss_mb": {
            "prefect_server": 210,
            "flow_process": 250,
            "flow_tree": 400 * n,
            "postgres": 100 if database == "postgres" else None,
            "local_cloud": 280,
        },
        "profile": {
            "cpu_s": 3.0,
            "cpu_before_profile_s": 0.9,
            "by_self": [["EpollSelector.select (stdlib/selectors.py:451)", 0.34]],
            "by_package": [["stdlib", 0.9], ["prefect", 0.5]],
            "by_thread": [["MainThread", 1.4]],
        },
    }


def test_the_readme_section_has_a_row_per_size_and_database_and_the_largest_n(
    bench: Any,
) -> None:
    report = bench("fanout_report")
    run_all = bench("run_all")
    skipped = {"database": "postgres", "environments": 4, "ok": False, "error": "skipped: memory"}
    section = {
        "timestamp": "2026-11-26T10:00:00+00:00",
        "cores": 2,
        "command": ".venv/bin/python bench/fanout_team.py --sizes 1,2",
        "target": report.TARGET,
        "runs": [
            _row("sqlite", 1, 60.0, 18.0, 0),
            _row("sqlite", 2, 80.0, 40.0, 3),
            _row("postgres", 1, 61.0, 19.0, 0),
            _row("postgres", 2, 70.0, 41.0, 0),
            skipped,
        ],
    }
    text = report.markdown(section)
    assert "| 2 | SQLite | 80.0 s | 20.0 s (CPU / cores) | 4.00 | 40.0 s / 2 | 3 (7.5 s) |" in text
    assert "| 4 | PostgreSQL | skipped: memory |" in text
    assert "Where the CPU went at N = 2:" in text
    assert "| pulumi | 20.0 s (50%) | 20.5 s (50%) |" in text
    assert "The flow process's own CPU at N = 2 on PostgreSQL:" in text
    assert "`EpollSelector.select (stdlib/selectors.py:451)`" in text
    readme = run_all.readme_section({"figures": {}, report.KEY: section})
    assert readme.endswith(text)
    terminal = report.text_table(section).splitlines()
    assert len(terminal) == 6 and terminal[2].split()[:4] == ["2", "SQLite", "80.0", "s"]


def test_a_size_that_would_not_fit_in_memory_is_skipped(bench: Any) -> None:
    fanout_team = bench("fanout_team")  # also: its imports (benchkit, compare) still resolve
    previous = _row("postgres", 16, 300.0, 600.0, 0)
    assert fanout_team.too_big(previous, 17) is None
    previous["peak_rss_mb"]["flow_tree"] = 10**9
    reason = fanout_team.too_big(previous, 32)
    assert reason is not None and reason.startswith("skipped: 32 environments would need")
