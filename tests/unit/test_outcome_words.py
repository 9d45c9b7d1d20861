"""A node's status is written once, in `stackflow.outcome.Status`: the syntax trees of the
product's modules hold no status word as a string literal outside an enum. A word that names
something else in one module (the drift command, a migration's state) is listed below with what
it names there, and each listing must still be needed."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from stackflow.outcome import Status

pytestmark = pytest.mark.unit
ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ["cli", "deployments", "flows", "graph", "tasks", "stackflow", "programs"]
WORDS = frozenset(s.value for s in Status)

# (a module, or a folder ending in "/", and a word): what the word names there instead
OTHER_MEANINGS = {
    ("cli/commands/cloud.py", "stopped"): "a local server's state",
    ("cli/commands/server.py", "stopped"): "a local server's state",
    ("cli/commands/__init__.py", "drift"): "the drift command",
    ("cli/commands/drift.py", "drift"): "the drift flow the command runs",
    ("deployments/specs.py", "drift"): "the drift flow, which its deployments name",
    ("flows/pipeline.py", "drift"): "the drift flow",
    ("stackflow/engine/automation/drift.py", "read"): "Pulumi's read step of a resource",
    ("stackflow/engine/automation/host/process.py", "read"): "a project process's message field",
    ("stackflow/engine/pending/ec2.py", "failed"): "an EC2 resource's state, as AWS says it",
    ("stackflow/localcloud/", "read"): "a resource operation of the local cloud's plugins",
    ("stackflow/migrator/", "failed"): "a migration's state in the schema history table",
    ("stackflow/environment_records.py", "failed"): "an environment's last deploy",
    ("stackflow/status/pages.py", "healthy"): "the app's health record, in words",
    ("stackflow/status/text.py", "healthy"): "the app's health record, in words",
}
_KEYED = frozenset({"get", "pop", "setdefault"})  # a mapping's methods that name a key


def _not_values(tree: ast.Module) -> set[int]:
    """The string constants that are not values: docstrings, an enum's own body, and the keys
    of serialised forms (a dict's key, a subscript, the key `get` names: a field's name)."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                skip.add(id(first.value))
        if isinstance(node, ast.ClassDef) and any(_name(b).endswith("Enum") for b in node.bases):
            skip.update(id(inner) for inner in ast.walk(node))
        elif isinstance(node, ast.Dict):
            skip.update(id(key) for key in node.keys if key is not None)
        elif isinstance(node, ast.Subscript):
            skip.add(id(node.slice))
        elif isinstance(node, ast.Call) and _name(node.func) in _KEYED and node.args:
            skip.add(id(node.args[0]))
    return skip


def _name(node: ast.expr) -> str:
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


def status_literals(path: Path) -> Iterator[tuple[int, str]]:
    """(line, word) of each status word written as a string literal value in `path`."""
    tree = ast.parse(path.read_text(), filename=str(path))
    skip = _not_values(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and node.value in WORDS and id(node) not in skip:
            yield node.lineno, str(node.value)


def _meaning(relative: str, word: str) -> tuple[str, str] | None:
    """The OTHER_MEANINGS entry that covers `word` in `relative`, if any."""
    for place, listed in OTHER_MEANINGS:
        inside = place.endswith("/") and relative.startswith(place)
        if listed == word and (relative == place or inside):
            return place, listed
    return None


def test_no_status_word_is_a_string_literal_outside_its_enum() -> None:
    found, used = [], set()
    for package in PRODUCT:
        for path in sorted((ROOT / package).rglob("*.py")):
            relative = str(path.relative_to(ROOT))
            for line, word in status_literals(path):
                entry = _meaning(relative, word)
                if entry is None:
                    found.append(f"{relative}:{line}: {word!r}")
                else:
                    used.add(entry)
    assert not found, "write Status.<MEMBER> (stackflow.outcome), not the word:\n" + "\n".join(
        found
    )
    assert set(OTHER_MEANINGS) == used, f"no longer needed: {set(OTHER_MEANINGS) - used}"


def test_the_scan_sees_a_status_word_wherever_a_value_stands(tmp_path: Path) -> None:
    """What the scan counts as a value and what it leaves: a comparison, an argument, a set
    member and an f-string's part are values; a docstring, an enum's body and a field's name
    are not."""
    module = tmp_path / "module.py"
    module.write_text(
        '"""updated"""\n'
        "import enum\n"
        "class Kind(enum.StrEnum):\n"
        '    FAILED = "failed"\n'
        "def f(o, d):\n"
        '    """stopped"""\n'
        '    if o.status == "unchanged" or d["failed"] or d.get("stopped"):\n'
        '        return {"drift": 1}, publish(status="previewed"), f"failed{o}"\n'
        '    return o.status in {"not run", "cancelled"}\n'
    )
    assert sorted(status_literals(module)) == [
        (7, "unchanged"),
        (8, "failed"),
        (8, "previewed"),
        (9, "cancelled"),
        (9, "not run"),
    ]
