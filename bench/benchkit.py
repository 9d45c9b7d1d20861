"""Shared pieces of the benchmarks, by concern:

- this module: where things are (the repository, the results file, the logs), small helpers, and
  the results file and its table;
- `sessions`: the servers a run needs and the project whose environment files say what each
  benchmark environment deploys;
- `sampling`: a measured process and its descendants (wall time, CPU, memory from /proc);
- `critical`: the critical path of the injected latencies;
- `traced`: the launcher that records every `pulumi` process a side starts.

Every pipeline figure comes from the **real engine** (the Pulumi CLI through the Automation API)
deploying to the **local cloud**: moto's AWS APIs on loopback behind the project's own provider
plugins, whose latency knobs stand in for the time AWS takes. Nothing reaches AWS, and no figure
here is an AWS figure.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import platform
import statistics
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results.json"
PYTHON = sys.executable
LOGS = Path(tempfile.gettempdir()) / "stackflow-bench-logs"  # kept after a run, for a failure
REGION = "eu-west-1"
TARGET = "local cloud"
TITLE = (
    "stackflow benchmarks - real Pulumi engine on the local cloud (moto on loopback, not AWS), "
    "each figure beside a plain Automation API script's"
)
SAMPLE_S = 0.1  # /proc sampling period of the process-tree sampler


def say(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def p95(values: Sequence[float]) -> float:
    ordered = sorted(values)
    return float(ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))])


@contextlib.contextmanager
def environ(values: Mapping[str, str]) -> Iterator[None]:
    """Set environment variables for the block (settings are read from them at flow time)."""
    previous = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in previous.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def workdir(prefix: str) -> tempfile.TemporaryDirectory[str]:
    return tempfile.TemporaryDirectory(prefix=f"stackflow-bench-{prefix}-")


# --- results --------------------------------------------------------------------------------------


def versions() -> dict[str, str]:
    from stackflow.pulumi_cli import CLI_VERSION

    return {
        "pulumi-cli": CLI_VERSION,
        "pulumi-sdk": version("pulumi"),
        "prefect": version("prefect"),
        "moto": version("moto"),
        "python": platform.python_version(),
    }


def run_metadata() -> dict[str, Any]:
    """What every run records next to its figures."""
    return {
        "target": TARGET,
        "engine": "real Pulumi CLI through the Automation API, on the local cloud (moto on "
        "loopback behind the project's provider plugins); nothing reaches AWS",
        "versions": versions(),
        "cores": os.cpu_count(),
        "load_average_1m": round(os.getloadavg()[0], 2),  # other work on the machine skews figures
        "timestamp": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def merge_results(updates: Mapping[str, Any], path: Path = RESULTS) -> dict[str, Any]:
    """Read-modify-write the results file under a lock, keeping keys other scripts wrote."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".lock"), "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        data: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
        for key, value in updates.items():
            if key == "figures" and isinstance(value, Mapping):
                data["figures"] = {**data.get("figures", {}), **value}
            else:
                data[key] = value
        write_results(data, path)
    return data


def write_results(data: Mapping[str, Any], path: Path = RESULTS) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    tmp.replace(path)


def figure(
    label: str,
    ours: float | int | None,
    plain: float | int | str | None,
    unit: str,
    how: str,
    *,
    note: str = "",
) -> dict[str, Any]:
    """One row of the table: stackflow's figure beside the plain script's, and how it was made."""
    row: dict[str, Any] = {"label": label, "stackflow": ours, "plain": plain, "unit": unit}
    row["how"] = how
    if isinstance(ours, int | float) and isinstance(plain, int | float) and plain:
        row["ratio"] = round(ours / plain, 3)
    if note:
        row["note"] = note
    return row


def _fmt(value: Any, unit: str) -> str:
    if value is None:
        return "—"
    if isinstance(value, str):
        return value
    if isinstance(value, float):
        text = f"{value:.2f}" if abs(value) < 10 else f"{value:.1f}"
    else:
        text = str(value)
    return f"{text} {unit}".strip()


def rows(results: Mapping[str, Any]) -> list[tuple[str, str, str, str, str]]:
    """(figure, stackflow, plain script, stackflow / plain, how) for every figure."""
    out = []
    for row in results.get("figures", {}).values():
        ratio = row.get("ratio")
        label = row["label"] + (f" ({row['note']})" if row.get("note") else "")
        out.append(
            (
                label,
                _fmt(row["stackflow"], row["unit"]),
                _fmt(row["plain"], row["unit"]),
                "" if ratio is None else f"{ratio:.2f}",
                row["how"],
            )
        )
    return out


def table(results: Mapping[str, Any]) -> str:
    body = rows(results)
    head = ("figure (local cloud)", "stackflow", "plain script", "ratio")
    widths = [max([len(h)] + [len(r[i]) for r in body]) for i, h in enumerate(head)]
    lines = [TITLE, "  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True))]
    lines.append("-" * (sum(widths) + 6))
    lines += ["  ".join(c.ljust(w) for c, w in zip(r[:4], widths, strict=True)) for r in body]
    return "\n".join(lines)


def _cell(text: str) -> str:
    """Markdown for a cell: a leading indent as an arrow, `*` outside code spans escaped."""
    indent = text.startswith("  ")
    parts = text.strip().split("`")
    parts[::2] = [p.replace("*", "\\*").replace("|", "\\|") for p in parts[::2]]
    return ("↳ " if indent else "") + "`".join(parts)


def markdown_table(results: Mapping[str, Any]) -> str:
    """The same rows as a Markdown table (for the README)."""
    lines = [
        "| figure (local cloud) | stackflow | plain Automation API script | stackflow / plain "
        "| measured with |",
        "|---|---|---|---|---|",
    ]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows(results)]
    return "\n".join(lines)
