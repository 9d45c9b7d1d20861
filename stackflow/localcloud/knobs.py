"""The local cloud's latency and fault knobs: the spec, how a call matches it, and a client.

The cloud server owns the knobs (so a fault's `count` is consumed once across every plugin process)
and keeps them in `<root>/knobs.json`. A plugin asks `take(...)` before each resource operation and
gets the latency to sleep and, maybe, the fault to raise.

Spec (JSON):

    {"latency_s": {"*": 0.2, "database": 3, "env:dev": 1, "aws:rds/instance:Instance": 5},
     "faults": [{"kind": "transient", "code": "Throttling", "message": "Rate exceeded",
                 "count": 2, "node": "database", "environment": "dev",
                 "type": "aws:rds/instance:Instance", "operations": ["create"]}]}

A latency selector is `*`, a node (`networking`, `database`, `app`), an environment (`env:dev`) or
a type token; the largest matching latency applies. A fault's match keys are optional (absent:
any); `count` null means forever. The first matching fault that has counts left is consumed.

A fault's kind says what the plugin does with the call it hits:

    transient   refuse it with an AWS error a retry may get past (default: Throttling)
    permanent   refuse it with an AWS error a retry will not fix (default: InvalidParameterValue)
    hang        never answer, until the engine cancels the update or kills the plugin
    crash       end the plugin process at once, mid-call, without answering (`os._exit`): a
                provider that crashed; `code` and `message` are not used

A fault's `when` says where in the call it strikes: `before` (the default) the AWS call is made,
so the cloud is untouched, or `after` it, so the cloud has done what was asked and only the answer
is lost: `{"kind": "hang", "when": "after", "type": "aws:rds/instance:Instance"}` holds the
answer of a create whose instance exists (what a `pulumi` killed at that moment leaves: a pending
create of a resource the cloud holds).

Refusals read as pulumi-aws prints an AWS error: the call's `code` and `message`, StatusCode 400.
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from stackflow.localcloud.control import ControlClient
from stackflow.localcloud.errors import ControlApiError
from stackflow.localcloud.errors import (
    KnobsError as KnobsError,  # flows/cloud_cli.py imports it here
)

Operation = Literal["create", "update", "delete", "read"]
FaultKind = Literal["transient", "permanent", "hang", "crash"]
FaultWhen = Literal["before", "after"]

_DEFAULT_ERRORS: dict[str, tuple[str, str]] = {
    "transient": ("Throttling", "Rate exceeded"),
    "permanent": ("InvalidParameterValue", "refused by the local cloud's fault knobs"),
    "hang": ("RequestTimeout", "the local cloud's fault knobs made this call hang"),
    "crash": ("", ""),  # no answer: the plugin exits
}


MAX_LATENCY_S = 3600.0  # an hour per call: beyond it a rehearsal is a hang (use the hang fault)


class Fault(BaseModel):
    """One injected failure: what it looks like and which calls it hits."""

    model_config = ConfigDict(extra="forbid")

    kind: FaultKind = Field(
        description="transient (retryable), permanent, hang (never answer) or crash (the plugin "
        "exits mid-call)."
    )
    code: str | None = Field(None, description="AWS error code; default per kind (Throttling...).")
    message: str | None = Field(None, description="AWS error message; default per kind.")
    count: int | None = Field(
        None, ge=0, le=1_000_000, description="How many calls it hits; null: every call."
    )
    node: str | None = Field(None, description="networking, database or app; absent: any.")
    environment: str | None = Field(None, description="Environment name (dev); absent: any.")
    type: str | None = Field(None, description="Pulumi type token; absent: any.")
    operations: list[Operation] | None = Field(None, description="Operations hit; absent: any.")
    when: FaultWhen = Field(
        "before",
        description="before the AWS call (the cloud untouched) or after it (done, answer lost).",
    )

    def matches(self, call: KnobCall) -> bool:
        """Whether this fault applies to `call` (counts not considered)."""
        environment = self.environment.removeprefix("env:") if self.environment else None
        return (
            (self.node is None or self.node == call.node)
            and (environment is None or environment == call.environment)
            and (self.type is None or self.type == call.type)
            and (self.operations is None or call.operation in self.operations)
        )

    def answer(self) -> dict[str, str]:
        default_code, default_message = _DEFAULT_ERRORS[self.kind]
        answer = {
            "kind": self.kind,
            "code": self.code or default_code,
            "message": self.message or default_message,
        }
        return answer | ({"when": self.when} if self.when != "before" else {})


class KnobSpec(BaseModel):
    """Every knob at once; POSTing one replaces the whole spec."""

    model_config = ConfigDict(extra="forbid")

    latency_s: dict[str, Annotated[float, Field(ge=0, le=MAX_LATENCY_S)]] = Field(
        default_factory=dict,
        description=f"Seconds of latency per selector (*, node, env:X, type), 0 to {MAX_LATENCY_S:g}.",
    )
    faults: list[Fault] = Field(default_factory=list, description="Faults, first match wins.")

    @classmethod
    def parse(cls, raw: Any) -> KnobSpec:
        """A spec from decoded JSON.

        Raises:
            KnobsError: not a valid spec; names the field and what is accepted.
        """
        try:
            return cls.model_validate(raw if raw is not None else {})
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc']) or 'spec'}: {err['msg']}"
                for err in exc.errors()
            )
            raise KnobsError(
                f"invalid local cloud knob spec ({problems}); expected "
                '{"latency_s": {"<*|node|env:NAME|type token>": seconds}, "faults": '
                '[{"kind": "transient|permanent|hang|crash", "when": "before|after", '
                '"count": N|null, ...}]}'
            ) from None

    def dump(self) -> dict[str, Any]:
        data = self.model_dump(mode="json", exclude_none=True)
        for fault in data.get("faults", []):  # the default is not said: a spec reads as written
            if fault.get("when") == "before":
                del fault["when"]
        return data


@dataclass(frozen=True)
class KnobCall:
    """One resource operation of one plugin, as the knobs see it."""

    node: str
    environment: str
    type: str
    operation: str


def latency_for(spec: KnobSpec, call: KnobCall) -> float:
    """The largest latency whose selector matches `call` (0 when none does)."""
    selectors = {"*", call.node, f"env:{call.environment}", call.type}
    return max((s for key, s in spec.latency_s.items() if key in selectors), default=0.0)


def take_from(spec: KnobSpec, call: KnobCall) -> tuple[KnobSpec, dict[str, Any]]:
    """Apply the knobs to one call: its latency, and the first matching fault with counts left,
    whose count is consumed (pure: returns the new spec beside the answer).

    Returns:
        (spec after consumption,
         {"latency_s": float, "fault": None | {"kind", "code", "message", "when"}})
    """
    fault_answer: dict[str, str] | None = None
    faults = list(spec.faults)
    for index, fault in enumerate(faults):
        if fault.count == 0 or not fault.matches(call):
            continue
        fault_answer = fault.answer()
        if fault.count is not None:
            faults[index] = fault.model_copy(update={"count": fault.count - 1})
        break
    new_spec = spec.model_copy(update={"faults": faults})
    return new_spec, {"latency_s": float(latency_for(spec, call)), "fault": fault_answer}


class KnobStore:
    """The server's knobs: one lock, persisted to knobs.json after every change."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._spec = self._load()

    def _load(self) -> KnobSpec:
        try:
            raw = json.loads(self.path.read_text())
        except FileNotFoundError:
            return KnobSpec()
        except ValueError as exc:
            raise KnobsError(f"{self.path} is not valid JSON ({exc}); fix or delete it") from None
        try:
            return KnobSpec.parse(raw)
        except KnobsError as exc:
            raise KnobsError(f"{self.path}: {exc}") from None

    def _save(self) -> None:
        staging = self.path.with_name(f".{self.path.name}.{os.getpid()}")
        staging.write_text(json.dumps(self._spec.dump(), indent=1))
        os.replace(staging, self.path)  # readers never see half a file

    def get(self) -> KnobSpec:
        with self._lock:
            return self._spec

    def replace(self, spec: KnobSpec) -> KnobSpec:
        with self._lock:
            self._spec = spec
            self._save()
            return spec

    def clear(self) -> KnobSpec:
        return self.replace(KnobSpec())

    def take(self, call: KnobCall) -> dict[str, Any]:
        with self._lock:
            new_spec, answer = take_from(self._spec, call)
            if new_spec != self._spec:
                self._spec = new_spec
                self._save()
            return answer


def _control(url: str, route: str, payload: Any = None) -> Any:
    try:
        return ControlClient(url, timeout_s=30.0).call(route, payload)
    except ControlApiError as exc:
        raise KnobsError(str(exc)) from None


def get_knobs(url: str) -> KnobSpec:
    """The knobs the cloud server at `url` applies now."""
    return KnobSpec.parse(_control(url, "knobs"))


def set_knobs(url: str, spec: KnobSpec | dict[str, Any]) -> KnobSpec:
    """Replace the cloud server's knobs with `spec` (validated here first).

    Raises:
        KnobsError: the spec is invalid, or the server refused it or is not running.
    """
    parsed = spec if isinstance(spec, KnobSpec) else KnobSpec.parse(spec)
    return KnobSpec.parse(_control(url, "knobs", parsed.dump()))


def clear_knobs(url: str) -> None:
    """No latency, no faults."""
    _control(url, "knobs/clear", {})


def take(url: str, node: str, environment: str, type: str, operation: str) -> dict[str, Any]:
    """Ask the cloud server for one call's latency and fault (consuming one fault count).

    Returns:
        {"latency_s": float, "fault": None | {"kind", "code", "message", "when"}}
    """
    payload = {"node": node, "environment": environment, "type": type, "operation": operation}
    answer: dict[str, Any] = _control(url, "knobs/take", payload)
    return answer
