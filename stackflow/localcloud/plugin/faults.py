"""The latency and faults the cloud server's knobs hand a plugin for one resource operation."""

from __future__ import annotations

import os
import threading
import time

from stackflow.localcloud.control import ControlClient
from stackflow.localcloud.errors import FaultInjected
from stackflow.localcloud.plugin.awserrors import api_call_for
from stackflow.localcloud.plugin.rules import node_and_environment

CRASH_EXIT_CODE = 70  # the exit status of a plugin that a `crash` knob ended (EX_SOFTWARE)


def apply_knobs(control: ControlClient, urn: str, token: str, operation: str) -> None:
    """Take this call's knobs from the cloud server and act on them: sleep the latency, then
    hang, crash (exit at once, no answer) or raise the fault's AWS error.

    Raises:
        FaultInjected: a transient or permanent fault, as the AWS call it stands for.
    """
    node, environment = node_and_environment(urn)
    answer = control.take_knobs(node, environment, token, operation)
    if not answer:
        return
    delay = float(answer.get("latency_s") or 0)
    if delay > 0:
        time.sleep(delay)
    fault = answer.get("fault")
    if not fault:
        return
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
