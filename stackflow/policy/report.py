"""The policy part of a plan and of a run's summary, for the terminal and for markdown: which packs
checked it and how strictly, the rules turned off here with their reasons, and each violation.

Both read data (`PolicySet.as_dict()`, `Violation.as_dict()`), so the plan, `--json`, the summary
and the artifact say the same.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

ByStack = Sequence[tuple[str, Sequence[Mapping[str, Any]]]]  # (stack, its violations as dicts)


def policy_lines(environment: str, policies: Mapping[str, Any] | None, found: ByStack) -> list[str]:
    """The terminal's lines: the packs, what is turned off and why, then each violation."""
    if not policies:
        return []
    lines = [f"policies: {', '.join(policies['packs'])} ({_levels(policies)})"]
    lines.extend(
        f"  turned off here: {rule}: {why}" for rule, why in sorted(policies["disabled"].items())
    )
    for stack, violations in found:
        for v in violations:
            lines.append(f"  ! {v['level']} {environment}/{stack}: {_text(v)}")
    if not any(violations for _, violations in found):
        lines.append("  no violations")
    return lines


def policy_markdown(policies: Mapping[str, Any] | None, found: ByStack) -> str:
    """The same for an artifact or the approval form: a line, the rules off, a table."""
    if not policies:
        return ""
    parts = [f"Packs: {', '.join(f'`{p}`' for p in policies['packs'])} ({_levels(policies)}).\n"]
    off = [
        f"- `{rule}` turned off: {_cell(why)}" for rule, why in sorted(policies["disabled"].items())
    ]
    if off:
        parts.append("\n".join(off) + "\n")
    rows = [
        f"| {stack} | {v['level']} | `{v['policy']}` | {_cell(v['resource'])} | {_cell(v['message'])} |"
        for stack, violations in found
        for v in violations
    ]
    if rows:
        head = "| stack | level | rule | resource | violation |\n|---|---|---|---|---|\n"
        parts.append(head + "\n".join(rows) + "\n")
    else:
        parts.append("No violations.\n")
    return "\n".join(parts)


def _levels(policies: Mapping[str, Any]) -> str:
    enforcement = policies["enforcement"]
    said = "each rule as its pack says" if enforcement == "pack" else f"{enforcement} here"
    levels = ", ".join(f"{rule} {level}" for rule, level in sorted(policies["levels"].items()))
    return said + (f"; {levels}" if levels else "")


def _text(v: Mapping[str, Any]) -> str:
    message = " ".join(str(v["message"]).split())
    return f"{v['resource']}: {message} (policy {v['policy']} of pack {v['pack']})"


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")
