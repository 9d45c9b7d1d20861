"""Raw Pulumi CLI text -> typed, redacted stack errors, in one place.

What the Pulumi CLI, its SDK and pulumi-aws print when something fails is read here and nowhere
else. Every kind of failure the engine meets is kept as a real text, captured from the real CLI
against the local cloud (`tests/fixtures/cli_texts/`, made by `tests/fixtures/capture_cli_texts.py`),
and `tests/unit/test_cli_error_texts.py` fails when one of them no longer classifies as documented.

AWS's refusals are classified on AWS's error code inside the shape pulumi-aws prints them in (the
AWS SDK for Go v2's, through the provider):

    <verb> <what>: operation error <Service>: <Operation>, https response error StatusCode: <n>,
    RequestID: <id>, api error <Code>: <message>

by `stackflow.engine.diagnosis`, which holds the codes; the CLI's and the SDK's own words are read
here.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass

import pulumi.automation as auto

from stackflow.engine.diagnosis import CREDENTIALS_SETTING, Diagnosis, aws_refusal
from stackflow.errors import (
    PermanentStackError,
    PlanChanged,
    ProgramFailed,
    StackError,
    TransientStackError,
)
from stackflow.infrastructure import in_cli_text
from stackflow.redact import Redactor

_MAX_DETAIL_LINES = 20
_MAX_DETAIL_CHARS = 4000


# --- the CLI's and the SDK's words ---------------------------------------------------------------


@dataclass(frozen=True)
class _Rule:
    """A failure recognised by the SDK's exception type or by the CLI's words (lower-cased)."""

    category: str
    transient: bool
    reason: str
    markers: tuple[str, ...] = ()
    types: tuple[type[BaseException], ...] = ()

    def __call__(self, exc: BaseException, text: str) -> Diagnosis | None:
        lowered = text.lower()
        if isinstance(exc, self.types) or any(m.lower() in lowered for m in self.markers):
            return Diagnosis(self.category, self.transient, self.reason)
        return None


_LOCK = _Rule(
    "lock",
    True,
    "another update holds the stack's lock",
    # A self-managed backend's words, then Pulumi Cloud's; the SDK types both (errors.py).
    markers=("the stack is currently locked by", "Another update is currently in progress"),
    types=(auto.ConcurrentUpdateError,),
)
_PASSPHRASE = _Rule(
    "passphrase",
    False,
    "the Pulumi state passphrase is missing or wrong (STACKFLOW_STATE_PASSPHRASE; on the local "
    "cloud, the passphrase file in its folder)",
    markers=("passphrase must be set", "incorrect passphrase"),
)
_PLUGIN_MISSING = re.compile(
    r"no resource plugin '(?P<plugin>[^']+)' found in the workspace(?: at version (?P<version>\S+))?"
)
_PLUGIN_CRASHED = re.compile(r"Detected that (?P<path>\S+) exited prematurely")


def _plugin_missing(exc: BaseException, text: str) -> Diagnosis | None:
    match = _PLUGIN_MISSING.search(text)
    if match is None:
        return None
    plugin = " ".join(filter(None, (match["plugin"], match["version"])))
    return Diagnosis(
        "plugin-missing",
        False,
        f"the provider plugin {plugin} is not installed where the CLI looks (PULUMI_HOME's "
        "plugins, then PATH; stackflow installs its plugins before the first operation)",
    )


def _plugin_crashed(exc: BaseException, text: str) -> Diagnosis | None:
    match = _PLUGIN_CRASHED.search(text)
    if match is None:
        return None
    return Diagnosis(
        "plugin-crash",
        False,
        f"the provider plugin {os.path.basename(match['path'])} crashed mid-operation (the CLI "
        "calls that a bug in the provider)",
    )


# pulumi-aws's own words when it finds no credentials at all (it makes no AWS call, so there is no
# code): pulumi/pulumi-aws#3310. The local cloud never says this: its plugin uses fixed ones.
_AWS_NO_CREDENTIALS = _Rule(
    "aws-credentials",
    False,
    f"AWS credentials are missing or not valid; check {CREDENTIALS_SETTING}",
    markers=("No valid credential sources found", "Invalid credentials configured"),
)
_CONFIG = _Rule(
    "config",
    False,
    "a required config value is missing",
    markers=("Missing required configuration",),
)
PROGRAM = "program"
_PROGRAM = _Rule(
    PROGRAM,
    False,
    "the Pulumi program failed",
    types=(auto.CompilationError, auto.InlineSourceRuntimeError, auto.RuntimeError),
)
_NETWORK = _Rule(
    "network",
    True,
    "a network call failed",
    markers=(
        "connection reset",
        "i/o timeout",
        "no such host",
        "TLS handshake timeout",
        "503 Service Unavailable",
        "dial tcp",
    ),
    types=(ConnectionError, TimeoutError),
)
# Several `pulumi` processes opening a new PostgreSQL backend at once race on creating its table:
# all but one fail on the unique key (SQLSTATE 23505); the table exists by then, so a retry works.
_BACKEND_SETUP = _Rule(
    "backend-setup",
    True,
    "another process was creating the PostgreSQL backend's table at the same moment",
    markers=("failed to create table pulumi_state",),
)
# An `up` under a saved update plan met something the plan does not allow; Pulumi's three
# phrasings (pkg/resource/deploy: a resource's inputs, dependencies or options; a step of another
# kind; a planned step that never came). Resources before it in the update were applied.
PLAN_CHANGED = "plan-changed"
_PLAN_VIOLATION = _Rule(
    PLAN_CHANGED,
    False,
    "the stack would do something its approved update plan does not allow (it or what it reads "
    "changed since the preview); resources before it in the update were applied",
    markers=("violates plan:", "is not allowed by the plan:", "but none were seen"),
)
# Pulumi prints both values of every property that differs from the plan, secrets included:
# only the property names are kept (`~~desiredCount[{2}!={3}]` -> `desiredCount`).
_PLAN_PROPERTIES = re.compile(r"(properties changed: )([^\n]*)")
_PLAN_KEY = re.compile(r"(?:^|, )[~=+\-]{2}([A-Za-z_$][\w$]*)")


def scrub_plan_violation(text: str) -> str:
    """`text` with the values of a plan violation's changed properties left out (names kept)."""
    if "properties changed: " not in text:
        return text
    return _PLAN_PROPERTIES.sub(
        lambda m: m[1] + ", ".join(dict.fromkeys(_PLAN_KEY.findall(m[2]))) + " (values not shown)",
        text,
    )


# The SDK's words before an inline program's error message (pulumi/automation/errors.py).
_INLINE_RAISED = re.compile(r"python inline source runtime error: (?P<message>[^\n]*)")


def program_raised(text: str) -> str | None:
    """What a program raised, as Python printed it (`AttributeError: 'NoneType' object has no
    attribute 'upper'`), from the engine's text of a failed inline program; the message alone
    when no line names its type; None when the text quotes no program error."""
    match = _INLINE_RAISED.search(text)
    if match is None or not match["message"].strip():
        return None
    message = match["message"].strip()
    named = re.search(rf"^\s*([A-Za-z_][\w.]*): {re.escape(message)}\s*$", text, re.MULTILINE)
    return f"{named[1]}: {message}" if named else message


def _infrastructure(exc: BaseException, text: str) -> Diagnosis | None:
    """A write of the CLI's own that the machine refused: a full disk, a read-only backend."""
    fault = in_cli_text(text, "a write of the Pulumi CLI's")
    if fault is None:
        return None
    return Diagnosis("infrastructure", False, f"{fault}; what to do: {fault.what_to_do}")


UNKNOWN = Diagnosis("unknown", False, "the Pulumi CLI failed")

# First match wins. The lock comes first (nothing else runs while it is held); then what stops the
# CLI before any resource is touched; then AWS's codes, before the program rule, because an AWS
# refusal inside a program's data-source call makes the SDK type the whole text a program error.
_CHECKS: tuple[Callable[[BaseException, str], Diagnosis | None], ...] = (
    _LOCK,
    _PASSPHRASE,
    _infrastructure,
    _plugin_missing,
    _plugin_crashed,
    _PLAN_VIOLATION,
    aws_refusal,
    _AWS_NO_CREDENTIALS,
    _CONFIG,
    _PROGRAM,
    _BACKEND_SETUP,
    _NETWORK,
)


def diagnose(exc: BaseException) -> Diagnosis:
    """What `exc` (an Automation API error, or anything raised beside it) is; unknown: permanent.

    Args:
        exc: the error; its text is what the CLI printed (exit code, stdout, stderr).
    """
    text = str(exc)
    for check in _CHECKS:
        found = check(exc, text)
        if found is not None:
            return found
    return UNKNOWN


def error_detail(exc: BaseException) -> str:
    """The useful part of an error: stderr and stdout's error lines, not the whole update log."""
    text = str(exc)
    if isinstance(exc, auto.CommandError):
        head, _, stderr = text.partition("\n stderr: ")
        stdout = head.partition("\n stdout: ")[2]
        lines = [line.strip() for line in stderr.splitlines() if line.strip()]
        lines += [line.strip() for line in stdout.splitlines() if "error" in line.lower()]
        text = "\n".join(list(dict.fromkeys(lines))[-_MAX_DETAIL_LINES:]) or text.strip()
    elif not text:
        text = type(exc).__name__
    return text[-_MAX_DETAIL_CHARS:]


def is_lock_conflict(exc: BaseException) -> bool:
    """Whether `exc` says another update holds the stack's lock."""
    return _LOCK(exc, str(exc)) is not None


def is_transient_error(exc: BaseException) -> bool:
    """Whether a retry may fix `exc` (a lock held, throttling, AWS unavailable, the network).

    Args:
        exc: an error from the Automation API, or one of ours.
    """
    if isinstance(exc, StackError):
        return isinstance(exc, TransientStackError)
    return diagnose(exc).transient


def classify(exc: BaseException, stack_label: str, redactor: Redactor) -> StackError:
    """Turn an Automation API error into a transient or permanent stack error.

    The message is redacted before it is put in the exception, so the exception never carries a
    secret. Unknown errors are permanent: retrying what nobody understood hides it for longer.

    Args:
        exc: the error the Automation API (or the CLI under it) raised.
        stack_label: the stack, as people name it (environment/node).
        redactor: knows the secrets to mask.
    """
    if isinstance(exc, StackError):
        return exc
    diagnosis = diagnose(exc)
    message = redactor(scrub_plan_violation(f"{diagnosis.reason}: {error_detail(exc)}"))
    if diagnosis.category == PLAN_CHANGED:
        return PlanChanged(stack_label, message)
    if diagnosis.category == PROGRAM:
        return ProgramFailed(stack_label, message, program_raised(message))
    kind = TransientStackError if diagnosis.transient else PermanentStackError
    return kind(stack_label, message)
