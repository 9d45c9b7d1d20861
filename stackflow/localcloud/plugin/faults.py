"""The latency and faults the cloud server's knobs hand a plugin for one resource operation."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from stackflow.localcloud.control import ControlClient
from stackflow.localcloud.errors import FaultInjected
from stackflow.localcloud.plugin.awserrors import api_call_for
from stackflow.localcloud.plugin.rules import node_and_environment

CRASH_EXIT_CODE = 70  # the exit status of a plugin that a `crash` knob ended (EX_SOFTWARE)

T = TypeVar("T")


def with_knobs(
    control: ControlClient, urn: str, token: str, operation: str, call: Callable[[], T]
) -> T:
    """Run `call` (the AWS calls of one resource operation) under this call's knobs, taken from
    the cloud server: sleep the latency, then strike with the fault, if any, before `call` (the
    cloud untouched) or after it (`when: after`: the cloud did it, the answer is lost).

    Raises:
        FaultInjected: a transient or permanent fault, as the AWS call it stands for.
    """
    node, environment = node_and_environment(urn)
    answer = control.take_knobs(node, environment, token, operation)
    fault: dict[str, Any] | None = None
    if answer:
        delay = float(answer.get("latency_s") or 0)
        if delay > 0:
            time.sleep(delay)
        fault = answer.get("fault") or None
    if fault is not None and fault.get("when", "before") == "before":
        _strike(fault, token, operation)
    result = call()
    if fault is not None:
        _strike(fault, token, operation)
    return result


def _strike(fault: dict[str, Any], token: str, operation: str) -> None:
    """Hang, crash (exit at once, no answer) or raise the fault's AWS error."""
    if fault.get("kind") == "hang":
        threading.Event().wait()  # until the engine kills this plugin
    if fault.get("kind") == "crash":
        os._exit(CRASH_EXIT_CODE)  # no answer, no cleanup: the engine sees its provider die
    _, call = api_call_for(token, operation)
    raise FaultInjected(
        str(fault.get("code") or "InternalFailure"),
        str(fault.get("message") or "injected by the local cloud's knobs"),
        call,
    )
