"""What the engine knows without asking the Pulumi CLI, checked against the real CLI v3.259 on the
**local cloud** (moto on loopback, not AWS): a stack's existence and outputs from its checkpoint
(secret outputs from the seal of stackflow's stamp), an operation's change counts from its event
stream, its config from the workspace's settings file. The outputs downstream stacks get must be
exactly what `pulumi stack output --json --show-secrets` says, secrets included; the secrets reach
the redactor; and each operation starts only the `pulumi` processes it needs."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pulumi.automation as auto
import pytest

from stackflow import fingerprint
from stackflow.engine import ConfigValue, Listener, Operation, StackSpec
from stackflow.engine.automation import AutomationEngine
from stackflow.engine.automation.command import PulumiCLI
from stackflow.redact import MASK
from tests.fixtures.localcloud import LocalCloud
from tests.realenv import unique

pytestmark = pytest.mark.integration

PROJECT = "known"
NODE = "probe"
REGION = {"aws:region": ConfigValue("eu-west-1")}


def probe_program(environment: str, count: int = 3) -> Callable[[], dict[str, Any]]:
    """Outputs of each JSON kind, a generated password and a secret of its own, one VPC."""

    def program() -> dict[str, Any]:
        import pulumi
        import pulumi_aws as aws
        import pulumi_random as random

        word = random.RandomPassword("word", length=16, special=False)
        vpc = aws.ec2.Vpc("probe", cidr_block="10.43.0.0/16", tags={"Name": environment})
        return {
            "greeting": "hello",
            "count": count,
            "ratio": 0.5,
            "enabled": True,
            "nested": {"a": [1, 2], "b": None, "c": {"d": "e"}},
            "vpc_id": vpc.id,
            "password": word.result,
            "token": pulumi.Output.secret(f"s3cr3t-{environment}"),
            "secret_list": pulumi.Output.secret(["x-" + environment, "y"]),
        }

    return program


@pytest.fixture
def engine(tmp_path: Path, local_cloud: LocalCloud) -> Callable[[], AutomationEngine]:
    """A new engine per call (a new run: nothing cached), all on one state folder."""
    settings = local_cloud.settings(tmp_path / "state")
    return lambda: AutomationEngine(settings)


@pytest.fixture
def commands(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every `pulumi` command the engine runs, as `stack init`, `config set-all`, `up`..."""
    seen: list[str] = []
    run = PulumiCLI.run

    def recording(self: PulumiCLI, args: list[str], *rest: Any, **kw: Any) -> Any:
        words = [a for a in args if not a.startswith("-")]
        seen.append(" ".join(words[:2] if words[0] in ("stack", "config") else words[:1]))
        return run(self, args, *rest, **kw)

    monkeypatch.setattr(PulumiCLI, "run", recording)
    yield seen


def cli_outputs(engine: AutomationEngine, spec: StackSpec) -> dict[str, tuple[Any, bool]]:
    """`pulumi stack output --json` and `--show-secrets`, as the SDK reads them (two processes)."""
    stack = engine.ws.stack(spec, create=False)
    assert stack is not None
    shown = auto.Stack.outputs(stack)  # the SDK's own method: the CLI answers
    return {k: (v.value, v.secret) for k, v in shown.items()}


def stamped(spec: StackSpec) -> dict[str, Any]:
    return fingerprint.stamp(f"{spec.environment}-{spec.node}-fingerprint")


def test_outputs_after_up_and_refresh_are_the_clis_secrets_included_with_no_output_process(
    engine: Callable[[], AutomationEngine], commands: list[str]
) -> None:
    environment = unique("dev")
    spec = StackSpec(PROJECT, environment, NODE, probe_program(environment), REGION)
    first = engine()
    listener = Listener()

    up = first.run(Operation.UP, spec, listener, stamp=stamped(spec))

    assert commands == ["stack init", "config set-all", "up"]
    assert up.changes.create >= 3
    cli = cli_outputs(first, spec)
    ours = {k: (v.value, v.secret) for k, v in up.outputs.items()}
    assert ours == {k: v for k, v in cli.items() if k != "_stackflow"}
    assert {k for k, (_, secret) in ours.items() if secret} == {"password", "token", "secret_list"}
    for secret in (ours["password"][0], ours["token"][0], f"x-{environment}"):
        assert first.ws.redactor(f"say {secret}") == f"say {MASK}"
        assert listener.redactor(secret) == MASK

    commands.clear()
    again = engine()  # a new run: the stack is opened from its checkpoint, config already set
    changed = StackSpec(PROJECT, environment, NODE, probe_program(environment, count=4), REGION)
    second = again.run(Operation.UP, changed, Listener(), stamp=stamped(changed))
    assert commands == ["up"]
    assert second.outputs["count"].value == 4
    assert {k: (v.value, v.secret) for k, v in second.outputs.items()} == {
        k: v for k, v in cli_outputs(again, changed).items() if k != "_stackflow"
    }

    commands.clear()
    refreshed = engine().run(Operation.REFRESH, changed, Listener())
    drift = engine().run(Operation.DRIFT, changed, Listener())
    assert commands == ["refresh", "refresh"]  # `refresh --preview-only` for drift
    assert refreshed.changes.changed == 0 and drift.changes.changed == 0
    assert refreshed.outputs == drift.outputs == second.outputs

    commands.clear()
    destroyed = engine().run(Operation.DESTROY, changed, Listener())
    assert commands == ["destroy"]
    assert destroyed.changes.delete >= 3


def test_a_secret_config_value_is_set_on_every_operation_and_a_changed_plain_one_too(
    engine: Callable[[], AutomationEngine], commands: list[str]
) -> None:
    environment = unique("dev")
    secret = {**REGION, "known-probe:api_key": ConfigValue("k3y-" + environment, secret=True)}
    spec = StackSpec(PROJECT, environment, NODE, probe_program(environment), secret)
    engine().run(Operation.UP, spec, Listener(), stamp=stamped(spec))
    commands.clear()
    engine().run(Operation.REFRESH, spec, Listener())
    assert commands == ["config set-all", "refresh"]

    moved = StackSpec(
        PROJECT, environment, NODE, probe_program(environment), {"aws:region": ConfigValue("x")}
    )
    commands.clear()
    stack = engine().ws.stack(moved, create=False)
    assert stack is not None
    engine().ws.set_config(stack, moved)
    # the changed plain value is set, and the key the spec no longer has is taken out
    assert commands == ["config set-all", "config rm-all"]
    assert stack.get_config("aws:region").value == "x"
    assert "known-probe:api_key" not in stack.get_all_config()
    engine().run(Operation.DESTROY, spec, Listener())


def test_an_update_without_stackflows_stamp_reads_its_secret_outputs_from_the_cli(
    engine: Callable[[], AutomationEngine], commands: list[str]
) -> None:
    """No seal to open (an update recorded no stamp): the CLI answers, and answers the same."""
    environment = unique("dev")
    spec = StackSpec(PROJECT, environment, NODE, probe_program(environment), REGION)
    first = engine()
    up = first.run(Operation.UP, spec, Listener())
    assert commands == ["stack init", "config set-all", "up", "stack output", "stack output"]
    assert {k: (v.value, v.secret) for k, v in up.outputs.items()} == cli_outputs(first, spec)
    first.run(Operation.DESTROY, spec, Listener())


def test_a_stamp_without_a_passphrase_vouches_for_the_outputs_by_a_digest(
    engine: Callable[[], AutomationEngine], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A KMS secrets provider leaves no passphrase to key a seal (the program is given none here;
    the local cloud's CLI still encrypts with its own): the stamp records a digest of the plain
    outputs and the secret ones' names, never a secret's value. The skip's judgement accepts the
    checkpoint as written (its secrets then the engine's to read), and an output edited in the
    checkpoint afterwards, under the intact stamp, is named and never "unchanged"."""
    import json

    from stackflow.engine.automation import engine as engine_module

    real = engine_module.operation_program
    monkeypatch.setattr(
        engine_module,
        "operation_program",
        lambda p, r, d, s, _passphrase: real(p, r, d, s, None),
    )
    environment = unique("dev")
    spec = StackSpec(PROJECT, environment, NODE, probe_program(environment), REGION)
    stamp = stamped(spec)
    ran = engine()
    ran.run(Operation.UP, spec, Listener(), stamp=stamp)
    state = ran.state(spec)
    assert state is not None and state.stamp is not None
    assert "sealed" not in state.stamp and str(state.stamp["digest"]).startswith("sha256:")
    assert f"s3cr3t-{environment}" not in json.dumps(state.outputs)
    judged = fingerprint.judge(state, stamp["fingerprint"], ran.ws.passphrase)
    assert judged == fingerprint.Judged("", None)  # unchanged; its secrets are the CLI's to read

    path = tmp_path / "state" / "pulumi-local" / ".pulumi" / "stacks" / "known-probe"
    checkpoint = path / f"{environment}.json"
    saved = json.loads(checkpoint.read_text())
    (root,) = [
        r for r in saved["checkpoint"]["latest"]["resources"] if r["type"] == "pulumi:pulumi:Stack"
    ]
    root["outputs"]["nested"]["c"]["d"] = "edited"
    checkpoint.write_text(json.dumps(saved))
    edited = fingerprint.judge(ran.state(spec), stamp["fingerprint"], ran.ws.passphrase)
    assert edited.outputs is None and "differ from those its last up recorded" in edited.why
    ran.run(Operation.DESTROY, spec, Listener())
