"""`status` as the Prefect UI shows it: a page per environment (the artifact `environment-<name>`,
one key each, so the UI keeps every version as the environment's history) and the overview
listing every environment with the same columns (the artifact `stackflow-status`). Markdown, as
Prefect's artifacts render it (tables, links; no HTML)."""

from __future__ import annotations

import time
from typing import Any

from stackflow.plan import markdown_cell
from stackflow.status.condition import Condition
from stackflow.status.explain import age, when
from stackflow.status.report import EnvironmentStatus

OVERVIEW_KEY = "stackflow-status"


def page_key(environment: str) -> str:
    """The artifact key of an environment's page (an environment's name is a valid key part:
    lowercase letters, digits and dashes)."""
    return f"environment-{environment}"


def _short(commit: Any) -> str:
    return f"`{str(commit)[:12]}`" if commit else "—"


def _cell(value: Any) -> str:
    return markdown_cell(str(value)) if value not in (None, "") else "—"


def _link(text: str, url: str | None) -> str:
    return f"[{text}]({url})" if url else text


def _page_url(ui_url: str | None, environment: str) -> str | None:
    return f"{ui_url.rstrip('/')}/artifacts/key/{page_key(environment)}" if ui_url else None


def health_words(e: EnvironmentStatus) -> str:
    """The last verify's answer in words ("—" when none is recorded)."""
    h = e.health
    if h is None:
        return "—"
    word = "healthy" if h.get("healthy") else "not healthy"
    return f"{word} ({h.get('answer') or 'no answer'}, {when(h.get('at'))})"


def branch_words(e: EnvironmentStatus, now: float) -> str:
    """The branch's head and, when it is not deployed, for how long and why."""
    b = e.branch
    if b is None:
        return "—"
    words = f"{b['name']} at {_short(b['head'])}"
    if b["behind"]:
        words += f", behind for {age(b['behind_s'])}: {b['why']}"
    return words


def expiry_words(e: EnvironmentStatus, now: float) -> str:
    if not e.expires_at:
        return "—"
    left = e.expires_at - now
    return when(e.expires_at) + (f" (in {age(left)})" if left > 0 else " (passed)")


def headline(e: EnvironmentStatus) -> str:
    """The environment in one line (the page's description, which the UI shows above the page's
    versions): condition, why, the commit deployed, health and URL."""
    parts = [f"`{e.environment}`: **{e.condition}**"]
    if e.condition is not Condition.READY or (e.branch is not None and e.branch["behind"]):
        parts.append(markdown_cell(e.why))  # when ready, the rest says all of it
    if e.commit:
        parts.append(f"deployed {_short(e.commit)}")
    if e.health is not None:
        parts.append(health_words(e))
    if e.url:
        parts.append(markdown_cell(e.url))
    return " — ".join(p for p in parts if p)[:2000]


def overview(
    environments: list[EnvironmentStatus], ui_url: str | None = None, now: float | None = None
) -> str:
    """Every environment in one table: its condition and why, the commit deployed, the branch's
    head, health, URL, expiry and last run; each name links to the environment's page."""
    now = time.time() if now is None else now
    if not environments:
        return "# stackflow status\n\nNo environment is recorded.\n"
    rows = [
        "# stackflow status",
        "",
        f"{len(environments)} environment(s), as the records said at {when(now)}. Each name "
        "opens the environment's page (its versions are its history).",
        "",
        "| environment | condition | why | deployed | branch head | health | URL | expires "
        "| last run |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for e in environments:
        last = e.runs[0] if e.runs else None
        ran = (
            _link(f"{last['operation']} {last['result']}", last.get("url")) + f" {when(last['at'])}"
            if last
            else "—"
        )
        rows.append(
            f"| {_link(e.environment, _page_url(ui_url, e.environment))} | {e.condition} "
            f"| {_cell(e.why)} | {_short(e.commit)} | {_cell(branch_words(e, now))} "
            f"| {_cell(health_words(e))} | {_cell(e.url)} | {expiry_words(e, now)} | {ran} |"
        )
    return "\n".join(rows) + "\n"


def environment_page(
    e: EnvironmentStatus, ui_url: str | None = None, now: float | None = None
) -> str:
    """One environment's page: what `status` says of it, its stacks, outputs (secrets masked)
    and its last runs."""
    now = time.time() if now is None else now
    cloud = "local cloud" if e.cloud == "local" else "AWS"
    facts = [
        ("why", _cell(e.why)),
        ("kind", f"{e.kind}, {cloud}"),
        ("deployed commit", _short(e.commit)),
        ("branch", _cell(branch_words(e, now))),
        ("URL", _cell(e.url)),
        ("health", _cell(health_words(e))),
        ("last drift check", _drift_words(e)),
        (
            "migrations",
            f"version {e.migrations_version} ({when(e.migrations_at)})"
            if e.migrations_version is not None
            else "—",
        ),
        ("expires", expiry_words(e, now)),
    ]
    if e.run is not None:
        facts.append(
            (
                "run in progress",
                f"{e.run.get('operation')}, {e.run.get('phase')} since {when(e.run.get('since'))}",
            )
        )
    head = [f"# `{e.environment}`: {e.condition}", ""]
    head += [f"- **{name}:** {value}" for name, value in facts]
    if ui_url:
        head.append(
            f"- **all environments:** [{OVERVIEW_KEY}]({ui_url.rstrip('/')}"
            f"/artifacts/key/{OVERVIEW_KEY})"
        )
    return "\n".join([*head, "", *_stacks(e), "", *_outputs(e), "", *_runs(e)]) + "\n"


def _drift_words(e: EnvironmentStatus) -> str:
    d = e.drift
    if d is None:
        return "never checked"
    found = ", ".join(
        f"{s} (since {when(d['since'].get(s))})" if d["since"].get(s) else s for s in d["found"]
    )
    return f"{when(d['checked_at'])}: " + (f"drift in {found}" if found else "no drift")


def _stacks(e: EnvironmentStatus) -> list[str]:
    rows = [
        "## Stacks",
        "",
        "| stack | condition | last operation | result | changed | commit | at | last success "
        "| last failure |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for s in e.stacks:
        failure = s.last_failure or {}
        failed = (
            f"{when(failure.get('at'))}: {failure.get('operation')} "
            f"{failure.get('status')} {failure.get('note') or ''}"
            if failure
            else "—"
        )
        rows.append(
            f"| {s.stack} | {s.condition} | {s.operation or '—'} | {s.status or '—'} "
            f"| {s.changed() or '—'} | {_short(s.commit)} | {when(s.at)} "
            f"| {when(s.last_success_at)} | {_cell(failed)} |"
        )
    return rows


def _outputs(e: EnvironmentStatus) -> list[str]:
    rows = ["## Outputs", ""]
    if not e.outputs:
        return [*rows, "None recorded yet (an `up` records them)."]
    rows += ["| stack | output | value |", "|---|---|---|"]
    for stack, values in e.outputs.items():
        rows += [f"| {stack} | `{k}` | {_cell(v)} |" for k, v in sorted(values.items())]
    return rows


def _runs(e: EnvironmentStatus) -> list[str]:
    rows = ["## Last runs", ""]
    if not e.runs:
        return [*rows, "None recorded yet."]
    rows += ["| at | operation | result | commit | run | message |", "|---|---|---|---|---|---|"]
    for r in e.runs:
        run = _link(str(r.get("run") or "—")[:8], r.get("url"))
        rows.append(
            f"| {when(r.get('at'))} | {r.get('operation')} | {r.get('result')} "
            f"| {_short(r.get('commit'))} | {run} | {_cell(r.get('message'))} |"
        )
    return rows


def gone_page(environment: str) -> str:
    """The page of an environment that is no longer recorded (destroyed)."""
    return (
        f"# `{environment}`: not deployed\n\n"
        f"`{environment}` is no longer recorded: it was destroyed. The earlier versions of this "
        "page are its history.\n"
    )
