"""The engine on the Pulumi Automation API and the real Pulumi CLI, by concern: `workspace`
(settings to LocalWorkspaces and stacks), `program` (inline programs), `command` (the CLI's
processes), `changes` (what events say), `recovery` (what an interrupted update left), and
`engine` (the operations)."""

from __future__ import annotations

from stackflow.engine.automation.changes import resource_change
from stackflow.engine.automation.command import find_pulumi_cli
from stackflow.engine.automation.engine import AutomationEngine
from stackflow.engine.automation.program import declared_exports, pulumi_program

__all__ = [
    "AutomationEngine",
    "declared_exports",
    "find_pulumi_cli",
    "pulumi_program",
    "resource_change",
]
