"""The combined plan an approval covers: per stack, what Pulumi would change (property by property),
and the pending migrations with their findings (destructive, or needing a person's review).

Pure data and its three renderings (markdown for the Prefect artifact and the approval form, lines
for the terminal, a dict for `--json` and events), so every place shows the same plan. What binds
the approval to what is applied is kept beside it: each stack's saved Pulumi update plan and the
fingerprint of its inputs, and the pending files' checksums.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from stackflow.engine.base import KNOWN_AFTER_APPLY, ChangeCounts, PropertyChange, ResourceChange
from stackflow.migrator.plan import MigrationPlanReport
from stackflow.migrator.splitter import one_line
from stackflow.migrator.version import Version
from stackflow.policy.report import policy_lines, policy_markdown
from stackflow.policy.violation import Violation

_SIGN = {"create": "+", "update": "~", "replace": "+-", "delete": "-"}
STATEMENTS_SHOWN = 20  # per file, in the artifact and on the terminal; a dry run shows them all


class PlanStatus(StrEnum):
    """What the plan says of one stack (the value is what the plan's pages show)."""

    CHANGES = "changes"  # the preview found some
    NO_CHANGES = "no changes"  # it found none
    UNCHANGED = "unchanged"  # skipped by fingerprint: the inputs of its last successful up


@dataclass(frozen=True)
class StackPlan:
    """One stack in the plan."""

    node: str
    status: PlanStatus
    changes: ChangeCounts = field(default_factory=ChangeCounts)
    resources: tuple[ResourceChange, ...] = ()
    plan_file: Path | None = None  # Pulumi's update plan, saved by the preview
    fingerprint: str = ""  # the stack's inputs when it was previewed
    note: str = ""
    violations: tuple[Violation, ...] = ()  # what the policy packs reported (advisory)

    def allows(self, change: ResourceChange) -> bool:
        """Whether `change` is one this plan shows: the same resource, the same change (or an
        update where a replace was planned, as Pulumi allows); for an in-place update, only
        properties it names, each to the value it showed, except where it showed "known after
        apply" (a value an upstream stack's update decides: any value, down to the keys inside
        it). A create or a replacement is held to its resource and, for a replacement, to the
        properties named: a new resource's generated name differs from one preview to the next."""
        planned = next((r for r in self.resources if r.urn == change.urn), None)
        if planned is None:
            return False
        if change.change != planned.change and (change.change, planned.change) != (
            "update",
            "replace",
        ):
            return False
        if planned.change == "create":
            return True
        if planned.change == "replace":
            return all(_names(planned.properties, p) for p in change.properties)
        return all(_shows(planned.properties, p) for p in change.properties)


def _shows(planned: Sequence[PropertyChange], prop: PropertyChange) -> bool:
    """Whether a planned property shows `prop`: the same one to a value that fits, or one that
    holds it (`prop` is a key or an item inside it) whose value was not known."""
    for shown in planned:
        if shown.name == prop.name:
            return _fits(shown.new, prop.new)
    return any(_inside(prop, shown) and _unknown_inside(shown.new) for shown in planned)


def _names(planned: Sequence[PropertyChange], prop: PropertyChange) -> bool:
    """Whether a planned property names `prop`, or holds it and was not known."""
    return any(
        shown.name == prop.name or (_inside(prop, shown) and _unknown_inside(shown.new))
        for shown in planned
    )


def _inside(prop: PropertyChange, holder: PropertyChange) -> bool:
    return prop.name.startswith((f"{holder.name}.", f"{holder.name}["))


def _fits(shown: Any, value: Any) -> bool:
    """Whether `value` is what a plan showed: equal, or resolved where it said known after apply."""
    if shown == KNOWN_AFTER_APPLY:
        return True
    if isinstance(shown, list) and isinstance(value, list) and len(shown) == len(value):
        return all(_fits(a, b) for a, b in zip(shown, value, strict=True))
    if isinstance(shown, dict) and isinstance(value, dict) and shown.keys() == value.keys():
        return all(_fits(shown[k], value[k]) for k in shown)
    return bool(shown == value)


def _unknown_inside(shown: Any) -> bool:
    if isinstance(shown, dict):
        return any(_unknown_inside(v) for v in shown.values())
    if isinstance(shown, list):
        return any(_unknown_inside(v) for v in shown)
    return bool(shown == KNOWN_AFTER_APPLY)


@dataclass(frozen=True)
class DeployPlan:
    """What an approval covers, and what binds it to what is then applied."""

    environment: str
    target: str  # "local cloud" or "AWS"
    stacks: tuple[StackPlan, ...]
    migrations: MigrationPlanReport | None = None  # None: the run does not migrate
    round: int = 1  # 2 and up: asked again after something changed
    why_again: str = ""
    commit: str | None = None  # the commit this plan deploys: what an approval covers too
    unprotect: tuple[str, ...] = ()  # what the file lowers of the recorded protection
    unprotect_reason: str = ""
    policies: dict[str, Any] | None = None  # the packs that checked it, rules off and why

    @property
    def empty(self) -> bool:
        """Nothing to change, nothing to migrate and no protection lowered: no approval is
        needed."""
        return (
            not any(s.changes.changed for s in self.stacks)
            and not (self.migrations and self.migrations.pending)
            and not self.unprotect
        )

    def protection_lines(self) -> list[str]:
        """The commit, and what the file lowers of the environment's protection (with why)."""
        out = [f"commit: {self.commit or 'none (the project is not a git checkout)'}"]
        if self.unprotect:
            why = f" (why: {self.unprotect_reason})" if self.unprotect_reason else ""
            out.append(f"protection lowered: {'; '.join(self.unprotect)}{why}")
        return out

    @property
    def pinned(self) -> dict[str, str]:
        """key (`V1.1`, `R__views`) -> checksum of the migration files approved."""
        return self.migrations.pinned if self.migrations else {}

    def stack(self, node: str) -> StackPlan | None:
        return next((s for s in self.stacks if s.node == node), None)

    # -- renderings --

    def lines(self) -> list[str]:
        """The plan as the terminal shows it before asking."""
        where = (
            "local cloud: moto on loopback, nothing is deployed to AWS"
            if self.target == "local cloud"
            else self.target
        )
        out = [f"plan for {self.environment}  [{where}]", *self.protection_lines()]
        if self.why_again:
            out.append(f"asked again (round {self.round}): {self.why_again}")
        for s in self.stacks:
            c = s.changes
            counts = (
                f"{c.create} to create, {c.update} to update, {c.replace} to replace, "
                f"{c.delete} to delete"
                if s.status is PlanStatus.CHANGES
                else s.status
            )
            out.append(
                f"\n{self.environment}/{s.node}: {counts}" + (f" ({s.note})" if s.note else "")
            )
            out.extend(resource_lines([r.as_dict() for r in s.resources]))
        out.append("")
        checked = policy_lines(self.environment, self.policies, self._violations())
        out.extend([*checked, ""] if checked else [])
        out.extend(migration_lines(migrations_dict(self.migrations)))
        return out

    def _violations(self) -> list[tuple[str, list[dict[str, Any]]]]:
        return [(s.node, [v.as_dict() for v in s.violations]) for s in self.stacks]

    def markdown(self) -> str:
        """The plan for the Prefect artifact and the approval form (tables: the UI renders them)."""
        parts = [f"# Plan for `{self.environment}`\n"]
        if self.target == "local cloud":
            parts.append(
                "On the **local cloud** (moto's AWS APIs on loopback): nothing is deployed to AWS.\n"
            )
        parts += [f"**{markdown_cell(line)}**\n" for line in self.protection_lines()]
        if self.why_again:
            parts.append(f"**Asked again (round {self.round}):** {markdown_cell(self.why_again)}\n")
        parts.append(
            "Approving applies exactly this: each stack under the Pulumi update plan saved by its "
            "preview (values that depend on an upstream stack's new outputs may resolve; anything "
            "else that differs stops the run), and the migration files with these checksums. "
            "If anything changed meanwhile, the run stops and asks again.\n"
        )
        rows = [
            "| stack | plan | create | update | replace | delete | note |",
            "|---|---|---|---|---|---|---|",
        ]
        for s in self.stacks:
            c = s.changes
            rows.append(
                f"| {s.node} | {s.status} | {c.create} | {c.update} | {c.replace} | {c.delete} "
                f"| {markdown_cell(s.note) or '—'} |"
            )
        parts.append("\n".join(rows) + "\n")
        changes = [
            "| stack | change | type | resource | properties |",
            "|---|---|---|---|---|",
        ]
        for s in self.stacks:
            for r in s.resources:
                props = "; ".join(_property_text(p.as_dict()) for p in r.properties) or "—"
                changes.append(
                    f"| {s.node} | {r.change} | `{r.type}` | {markdown_cell(r.name)} "
                    f"| {markdown_cell(props)} |"
                )
        if len(changes) > 2:
            parts.append("## Resource changes\n\n" + "\n".join(changes) + "\n")
        checked = policy_markdown(self.policies, self._violations())
        if checked:
            parts.append("## Policies\n\n" + checked)
        parts.append("## Migrations\n\n" + migrations_markdown(migrations_dict(self.migrations)))
        return "\n".join(parts)


def _version_json(version: object) -> int | str | None:
    """A pending file's version as data: a number when it is one (9), else its text (2.0.1);
    None for a repeatable file."""
    parsed = Version.of_record(version)
    return None if parsed is None else parsed.number_or_text


def migrations_dict(m: MigrationPlanReport | None, note: str = "") -> dict[str, Any] | None:
    """The pending migrations as data: what every rendering below reads (`--json`, the plan's and
    the preview's summaries). None: not part of the run; `note`: why they could not be read."""
    if m is None:
        return {"note": note, "pending": []} if note else None
    return {
        "database": m.database,
        "already_applied": m.already_applied,
        "pending": [
            {
                "version": _version_json(p.version),
                "file": p.name,
                "checksum": p.checksum,
                "statements": list(p.statements),
                "findings": [
                    {
                        "finding": f.describe(),
                        "allowed": f.allowed,
                        "needs_review": f.needs_review,
                        "sql": one_line(f.text),
                    }
                    for f in p.findings
                ],
            }
            for p in m.pending
        ],
    }


def migration_lines(data: dict[str, Any] | None, statements: bool = False) -> list[str]:
    """The pending migrations (`migrations_dict`) as the terminal shows them; `statements`: each
    statement too (a preview)."""
    if data is None or "database" not in data:
        return [f"migrations: {(data or {}).get('note') or 'not part of this run'}"]
    pending = data["pending"]
    if not pending:
        return [
            f"migrations: none pending on {data['database']} ({data['already_applied']} applied)"
        ]
    out = [f"migrations: {len(pending)} pending on {data['database']}"]
    for p in pending:
        count = len(p["statements"])
        out.append(f"  {p['file']}  ({count} statements, sha256 {p['checksum'][:12]})")
        for f in p["findings"]:
            flag = "allowed by its marker" if f["allowed"] else _flag(f)
            out.append(f"     ! {flag}: {f['finding']}: {f['sql']}")
        if statements:
            shown = p["statements"][:STATEMENTS_SHOWN]
            out.extend(f"     {i:>3}. {one_line(sql)}" for i, sql in enumerate(shown, 1))
            if count > len(shown):
                out.append(f"     ... and {count - len(shown)} more (migrate --dry-run)")
    return out


def migrations_markdown(data: dict[str, Any] | None) -> str:
    """The pending migrations (`migrations_dict`) for an artifact: files, checksums, findings,
    then statements."""
    if data is None or "database" not in data:
        return markdown_cell((data or {}).get("note") or "not part of this run") + "\n"
    pending = data["pending"]
    if not pending:
        return f"None pending on `{data['database']}` ({data['already_applied']} applied).\n"
    rows = [
        f"{len(pending)} pending on `{data['database']}` "
        f"({data['already_applied']} applied before).\n",
        "| file | statements | sha256 | findings |",
        "|---|---|---|---|",
    ]
    for p in pending:
        findings = "; ".join(
            ("allowed by marker: " if f["allowed"] else f"**{_flag(f)}** ")
            + f"{f['finding']}: `{markdown_cell(one_line(f['sql'], 80))}`"
            for f in p["findings"]
        )
        rows.append(
            f"| `{p['file']}` | {len(p['statements'])} | `{p['checksum'][:12]}` "
            f"| {findings or 'none'} |"
        )
    statements = []
    for p in pending:
        statements.append(f"\n**{p['file']}**\n")
        shown = p["statements"][:STATEMENTS_SHOWN]
        statements.extend(
            f"{i}. `{markdown_cell(one_line(sql, 100))}`" for i, sql in enumerate(shown, 1)
        )
        if len(p["statements"]) > len(shown):
            more = len(p["statements"]) - len(shown)
            statements.append(f"\n... and {more} more (`migrate --dry-run` shows all)")
    return "\n".join(rows) + "\n\n### Statements\n" + "\n".join(statements) + "\n"


def _flag(finding: dict[str, Any]) -> str:
    """How a finding is flagged: it can lose data, or the lint cannot tell what it does."""
    return "NEEDS REVIEW" if finding.get("needs_review") else "DESTRUCTIVE"


def resource_lines(resources: Sequence[dict[str, Any]]) -> list[str]:
    """Per resource (as `ResourceChange.as_dict()` gives it), its change and the properties
    behind it (values are already masked)."""
    lines: list[str] = []
    for r in resources:
        lines.append(f"  {_SIGN.get(r['change'], '?'):>2} {r['type']}  {r['name']}")
        lines.extend(f"       {_property_text(p)}" for p in r["properties"])
    return lines


def drift_lines(resources: Sequence[dict[str, Any]]) -> list[str]:
    """Per drifted resource (as `ResourceChange.drift_dict()` gives it), each property that moved
    with the value the state holds and the value found in the cloud (values already masked)."""
    lines: list[str] = []
    for r in resources:
        gone = r["drift"] == "deleted"
        lines.append(f"  {'-' if gone else '~':>2} {r['type']}  {r['name']}")
        if gone:
            lines.append("       gone from the cloud (the state still holds it)")
        lines.extend(
            f"       {p['name']}: stored {drift_value(p['stored'])}, found {drift_value(p['found'])}"
            for p in r["properties"]
        )
    return lines


def drift_value(value: Any) -> str:
    """A stored or found value as drift shows it (None: the property is not there)."""
    return "(none)" if value is None else _value(value)


def _property_text(prop: dict[str, Any]) -> str:
    why = "  (forces replacement)" if prop["forces_replacement"] else ""
    if prop["kind"] == "add":
        change = f"+ {_value(prop['new'])}"
    elif prop["kind"] == "delete":
        change = f"- {_value(prop['old'])}"
    else:
        change = f"{_value(prop['old'])} => {_value(prop['new'])}"
    return f"{prop['name']}: {change}{why}"


def _value(value: Any, limit: int = 70) -> str:
    text = json.dumps(value, sort_keys=True, default=str) if not isinstance(value, str) else value
    return text if len(text) <= limit else text[: limit - 1] + "…"


def markdown_cell(text: str) -> str:
    """Text that stays inside one markdown table cell or list item."""
    return " ".join(text.split()).replace("|", "\\|")
