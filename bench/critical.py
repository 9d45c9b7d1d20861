"""The critical path of the injected latencies: the longest chain of latency the local cloud's
knobs give a deployed environment's resources, through their dependencies."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

# --- the critical path of the injected latencies ---------------------------------------------------


def critical_path_s(
    graph: Mapping[str, Sequence[Mapping[str, Any]]], latency_s: Mapping[str, float]
) -> dict[str, float]:
    """The longest chain of injected latency through each stack's resources, and their sum.

    `graph` is what `plain_automation.py --graph-out` writes: per stack, its resources with their
    type and dependencies, as Pulumi's state records them. A resource waits for its dependencies,
    then takes the latency the local cloud's knobs give its type (only aws resources get one: the
    knobs are applied by the aws plugin). The stacks form a chain (networking -> database -> app:
    each needs the outputs of the one before), so the environment's critical path is the sum.
    No orchestrator can deploy an environment faster than that on these knobs.
    """
    from stackflow.localcloud.knobs import KnobSpec

    spec = KnobSpec.parse({"latency_s": dict(latency_s)})
    out: dict[str, float] = {}
    for stack, resources in graph.items():
        by_urn = {r["urn"]: r for r in resources}
        finish: dict[str, float] = {}
        for urn in by_urn:
            _longest(urn, by_urn, finish, functools.partial(_latency, spec, stack))
        out[stack] = round(max(finish.values(), default=0.0), 3)
    out["environment"] = round(sum(out.values()), 3)
    return out


def _latency(spec: Any, node: str, resource: Mapping[str, Any]) -> float:
    from stackflow.localcloud.knobs import KnobCall, latency_for

    if not (resource["custom"] and resource["type"].startswith("aws:")):
        return 0.0
    environment = resource["urn"].split("::")[0].rsplit(":", 1)[-1]
    return latency_for(spec, KnobCall(node, environment, resource["type"], "create"))


def _longest(
    urn: str,
    by_urn: Mapping[str, Mapping[str, Any]],
    finish: dict[str, float],
    own: Callable[[Mapping[str, Any]], float],
) -> float:
    """When `urn` finishes: after its slowest dependency, plus its own latency (memoised)."""
    if urn not in finish:
        deps = [d for d in by_urn[urn]["dependencies"] if d in by_urn]
        start = max((_longest(d, by_urn, finish, own) for d in deps), default=0.0)
        finish[urn] = start + own(by_urn[urn])
    return finish[urn]
