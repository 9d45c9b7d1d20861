"""Team operations' decisions, without servers: which passphrase opens a stack (as the Pulumi CLI
decides it), what a move does per stack, the stamp sealed again, the new passphrase's rules, a
workspace's cached salt dropped, and the command line's refusals."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cli.commands.server import ServerUsage
from cli.main import main
from stackflow import __version__, exits
from stackflow.engine.automation.stackfile import forget_cached_salt
from stackflow.engine.base import INTERNAL_OUTPUT, StackState
from stackflow.engine.checkpoints import Checkpoint, CheckpointReader
from stackflow.engine.pulumisecrets import passphrase_opens, passphrase_salt
from stackflow.fingerprint import judge
from stackflow.secretbox import StampSeal
from stackflow.teamops import TeamOpsRefused
from stackflow.teamops.moving import (
    NO_STAMP,
    RESEALED,
    UNOPENED,
    count_secrets,
    decide,
    reseal_stamp,
)
from stackflow.teamops.rotation import check_new_passphrase

pytestmark = pytest.mark.unit

# Written by the real Pulumi CLI v3.259.0 (`pulumi stack init --secrets-provider passphrase` with
# PULUMI_CONFIG_PASSPHRASE="correct horse battery staple"): a test vector, not a secret.
VECTOR = "v1:zSYyNsmunpw=:v1:L3/vHp6l/VoB/Zw2:hBHcovz8xXAV2TpK8s1q1nldF7Zklg=="
SIG = "4dabf18193072939515e22adb298388d"


def test_the_passphrase_a_cli_salt_was_made_with_opens_it_and_no_other() -> None:
    assert passphrase_opens(VECTOR, "correct horse battery staple")
    assert not passphrase_opens(VECTOR, "correct horse battery stapler")
    with pytest.raises(ValueError, match="not a Pulumi passphrase state"):
        passphrase_opens("v1:zSYyNsmunpw=", "x")
    provider = {"type": "passphrase", "state": {"salt": VECTOR}}
    assert passphrase_salt(provider) == VECTOR
    assert passphrase_salt({"type": "cloud", "state": {"url": "awskms://k"}}) is None
    assert passphrase_salt(None) is None


def checkpoint(time: str | None, resources: int) -> Checkpoint:
    return Checkpoint("p", "dev", "k", time, "3.259.0", {}, resources, (), None)


def test_a_move_decides_per_stack_by_name_and_by_what_it_moved_before() -> None:
    src = checkpoint("2025-01-02T03:04:05Z", 12)
    origin = "/one/pulumi-local"
    moved = {"from": origin, "manifest_time": src.manifest_time, "moved_at": "t"}
    assert decide(src, None, None, origin)[0] == "move"
    assert decide(src, checkpoint(None, 0), None, origin)[0] == "fill"
    # moved before, and the team updated it since: left alone, not refused
    assert decide(src, checkpoint("2025-02-01T00:00:00Z", 14), moved, origin)[0] == "moved-before"
    # the same update, its record lost: nothing to do either
    assert decide(src, checkpoint(src.manifest_time, 12), None, origin)[0] == "moved-before"
    # another stack of that name, or the folder's copy deployed to after the move: refused
    action, note = decide(src, checkpoint("2025-02-01T00:00:00Z", 3), None, origin)
    assert action == "conflict" and "another stack of that name" in note
    later = checkpoint("2025-03-01T00:00:00Z", 12)
    action, note = decide(later, checkpoint("2025-02-01T00:00:00Z", 14), moved, origin)
    assert action == "conflict" and "deployed to again" in note


def stamped_deployment(passphrase: str, values: dict[str, Any]) -> dict[str, Any]:
    fingerprint = "f" * 64
    seal = StampSeal(passphrase, fingerprint)
    outputs = {
        "password": {SIG: "1b47061264138c4ac30d75fd1eb44270", "plaintext": '"pw-123456"'},
        INTERNAL_OUTPUT: {
            "fingerprint": fingerprint,
            "stackflow": __version__,
            "salt": seal.salt,
            "sealed": seal.seal(values),
        },
    }
    return {"resources": [{"type": "pulumi:pulumi:Stack", "urn": "u", "outputs": outputs}]}


def test_the_stamp_is_sealed_again_for_the_new_passphrase_and_the_skip_path_opens_it() -> None:
    values = {"password": "pw-123456"}
    deployment = stamped_deployment("old passphrase", values)
    assert count_secrets(deployment) == 1
    assert reseal_stamp(deployment, "old passphrase", "new passphrase") == RESEALED
    stamp = deployment["resources"][0]["outputs"][INTERNAL_OUTPUT]
    assert StampSeal("new passphrase", stamp["fingerprint"]).open(stamp["sealed"]) == values
    # what the skip path reads from the team's checkpoint (the secret as ciphertext there)
    outputs = {"password": {SIG: "1b47061264138c4ac30d75fd1eb44270", "ciphertext": "v1:x"}}
    state = StackState("t", {**outputs, INTERNAL_OUTPUT: stamp}, 2, 0, False)
    opened = judge(state, stamp["fingerprint"], "new passphrase").outputs
    assert opened is not None and opened["password"].value == "pw-123456"
    assert judge(state, stamp["fingerprint"], "old passphrase").outputs is None
    # a seal the given passphrase does not open is left as it is (that stack runs once)
    before = dict(stamp)
    assert reseal_stamp(deployment, "another passphrase", "third passphrase") == UNOPENED
    assert deployment["resources"][0]["outputs"][INTERNAL_OUTPUT] == before
    del deployment["resources"][0]["outputs"][INTERNAL_OUTPUT]  # another tool's stack
    assert reseal_stamp(deployment, "new passphrase", "third passphrase") == NO_STAMP


@pytest.mark.parametrize(
    ("new", "why"),
    [
        ("", "is empty"),
        (" padded passphrase ", "spaces around it"),
        ("two\nlines passphrase", "control character"),
        ("tiny-8ch", "shorter than 12"),
        ("the current one!", "is the current passphrase"),
    ],
)
def test_a_new_passphrase_is_refused_naming_where_it_came_from_never_its_value(
    new: str, why: str
) -> None:
    with pytest.raises(TeamOpsRefused) as refused:
        check_new_passphrase(new, "the current one!", "STACKFLOW_NEW_STATE_PASSPHRASE")
    message = str(refused.value)
    assert why in message and "STACKFLOW_NEW_STATE_PASSPHRASE" in message
    assert "Nothing was changed" in message
    assert not new.strip() or new.strip() not in message
    assert check_new_passphrase("a long enough one", "x", "stdin") == "a long enough one"


def test_a_workspace_drops_its_cached_salt_and_keeps_its_config(tmp_path: Path) -> None:
    yaml = tmp_path / "Pulumi.dev.yaml"
    yaml.write_text(f"encryptionsalt: {VECTOR}\nconfig:\n  aws:region: eu-west-1\n")
    assert forget_cached_salt(tmp_path, "org/project/dev")
    assert yaml.read_text() == "config:\n  aws:region: eu-west-1\n"
    assert not forget_cached_salt(tmp_path, "dev")  # nothing left to drop
    assert not forget_cached_salt(tmp_path, "other")  # no file


def test_every_stack_of_a_file_backend_is_listed(tmp_path: Path) -> None:
    stacks = tmp_path / ".pulumi" / "stacks"
    for name in ("a/dev.json", "a/dev.json.bak", "a/prod.json.gz", "b/dev.json"):
        (stacks / name).parent.mkdir(parents=True, exist_ok=True)
        (stacks / name).write_text("{}")
    with CheckpointReader(f"file://{tmp_path}") as reader:
        assert reader.all_stacks() == [("a", "dev"), ("a", "prod"), ("b", "dev")]


def test_the_command_line_refuses_what_means_nothing_before_anything_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("STACKFLOW_STATE_DIR", str(tmp_path / "state"))
    assert main(["server", "backup"]) == exits.USAGE
    assert "server backup takes a FILE" in capsys.readouterr().err
    assert main(["server", "status", str(tmp_path / "f")]) == exits.USAGE
    assert "takes no FILE" in capsys.readouterr().err
    assert main(["team", "import"]) == exits.USAGE
    assert "--from-state DIR" in capsys.readouterr().err
    assert main(["team", "import", "--from-state", str(tmp_path)]) == exits.USAGE
    assert "no file backend of the local cloud" in capsys.readouterr().err
    assert main(["server", "restore", str(tmp_path / "missing.tar")]) == exits.USAGE
    assert "no such file" in capsys.readouterr().err
    assert issubclass(ServerUsage, ValueError)
