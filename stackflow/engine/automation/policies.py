"""The policy packs of a stack's preview or update: what `pulumi preview/up` is given
(`--policy-pack`, `--policy-pack-config`), and the refusal a mandatory violation becomes."""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from stackflow.engine.automation.workspace import Workspaces
from stackflow.engine.base import Listener, Operation, StackSpec
from stackflow.errors import PolicyViolated
from stackflow.policy.analyzer import install_analyzer
from stackflow.policy.staged import prepare
from stackflow.policy.violation import Violation, refusal


class PolicyRuns:
    """The packs each preview and `up` of a stack with policies runs (see `stackflow.policy`)."""

    def __init__(self, ws: Workspaces) -> None:
        self.ws = ws
        self._lock = threading.Lock()
        self._installed: set[Path] = set()

    def options(self, spec: StackSpec, operation: Operation, listener: Listener) -> dict[str, Any]:
        """The Automation API's policy options for this operation ({}: no policies run).

        Raises:
            PolicyPackError: a pack's virtualenv, copy or rules could not be made or read.
        """
        if spec.policies is None or operation not in (Operation.PREVIEW, Operation.UP):
            return {}
        with self._lock:  # two stacks starting at once make a virtualenv once
            prepared = prepare(spec.policies, self.ws.settings.state.policy, listener.line)
            home = self.plugin_home()
            if home not in self._installed:
                install_analyzer(home)
                self._installed.add(home)
        return prepared.options()

    def plugin_home(self) -> Path:
        """The Pulumi home whose plugins the CLI reads: the local cloud's own, else the one the
        user's CLI uses."""
        if self.ws.pulumi_home is not None:
            return self.ws.pulumi_home
        return Path(os.environ.get("PULUMI_HOME") or Path.home() / ".pulumi")

    @staticmethod
    def refused(spec: StackSpec, violations: Sequence[Violation]) -> PolicyViolated | None:
        """The error a failed operation ends with when a mandatory rule stopped it."""
        if not any(v.mandatory for v in violations):
            return None
        return PolicyViolated(spec.label, refusal(spec.label, violations), violations)
