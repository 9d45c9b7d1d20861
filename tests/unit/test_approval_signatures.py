"""Signed approvals: the canonical payload, signing and checking with real `ssh-keygen` keys made
here, each refusal naming why, and the rules that say whose approval counts."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from stackflow.approvals.payload import Request, plan_digest
from stackflow.approvals.rules import Requester, Tally
from stackflow.approvals.signatures import SignatureError, sign, verify
from stackflow.approvals.signers import read_signers
from stackflow.errors import SettingsError
from stackflow.plan import DeployPlan, PlanStatus, StackPlan

pytestmark = pytest.mark.unit
REQUEST = Request("prod", "7b1c0d5e-0000-4000-8000-000000000001", "sha256:ab12", "c0ffee")


def key(tmp_path: Path, name: str) -> Path:
    """A new ed25519 key without a passphrase."""
    path = tmp_path / name
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(path)], check=True
    )
    return path


def allowed(*entries: tuple[str, Path]) -> bytes:
    """An allowed signers file: one `principal namespaces="..." key` line each."""
    lines = [
        f'{who} namespaces="stackflow-approval" {Path(str(k) + ".pub").read_text().strip()}'
        for who, k in entries
    ]
    return ("\n".join(lines) + "\n").encode()


def test_the_payload_is_one_fixed_text_of_namespace_environment_run_plan_and_commit() -> None:
    assert REQUEST.payload() == (
        b"stackflow-approval v1\n"
        b"environment: prod\n"
        b"flow-run: 7b1c0d5e-0000-4000-8000-000000000001\n"
        b"plan: sha256:ab12\n"
        b"commit: c0ffee\n"
    )
    assert Request.from_dict(REQUEST.as_dict()) == REQUEST
    with pytest.raises(ValueError, match="line break"):
        Request("prod\ncommit: x", "r", "d", None).payload()


def test_the_plan_digest_changes_with_what_the_plan_shows_or_binds() -> None:
    plan = DeployPlan("prod", "AWS", (StackPlan("app", PlanStatus.CHANGES, fingerprint="f1"),))
    same = DeployPlan("prod", "AWS", (StackPlan("app", PlanStatus.CHANGES, fingerprint="f1"),))
    moved = DeployPlan("prod", "AWS", (StackPlan("app", PlanStatus.CHANGES, fingerprint="f2"),))
    other = DeployPlan("prod", "AWS", same.stacks, commit="abc")
    assert plan_digest(plan) == plan_digest(same)
    assert plan_digest(plan).startswith("sha256:") and len(plan_digest(plan)) == 71
    assert len({plan_digest(plan), plan_digest(moved), plan_digest(other)}) == 3


def test_a_signature_round_trips_to_its_principal(tmp_path: Path) -> None:
    alice = key(tmp_path, "alice")
    signature = sign(REQUEST.payload(), alice)
    assert "BEGIN SSH SIGNATURE" in signature and "PRIVATE" not in signature
    assert verify(REQUEST.payload(), signature, allowed(("alice", alice))) == "alice"


def test_a_signature_over_another_plan_or_run_is_refused_naming_why(tmp_path: Path) -> None:
    alice = key(tmp_path, "alice")
    signers = allowed(("alice", alice))
    for other in (
        Request("prod", REQUEST.flow_run_id, "sha256:other", "c0ffee"),
        Request("prod", "another-run", "sha256:ab12", "c0ffee"),
    ):
        signature = sign(other.payload(), alice)
        with pytest.raises(SignatureError, match="by alice does not cover this approval request"):
            verify(REQUEST.payload(), signature, signers)


def test_a_key_not_in_the_file_is_refused_naming_why(tmp_path: Path) -> None:
    alice, mallory = key(tmp_path, "alice"), key(tmp_path, "mallory")
    signature = sign(REQUEST.payload(), mallory)
    with pytest.raises(SignatureError, match="not in the allowed signers file"):
        verify(REQUEST.payload(), signature, allowed(("alice", alice)))


def test_text_that_is_no_signature_is_refused_before_ssh_keygen_sees_it(tmp_path: Path) -> None:
    signers = allowed(("alice", key(tmp_path, "alice")))
    for text, words in (("", "no signature"), ("hello", "not an SSH signature")):
        with pytest.raises(SignatureError, match=words):
            verify(REQUEST.payload(), text, signers)


def test_whose_approval_counts_under_the_rules() -> None:
    tally = Tally(("alice", "bob", "carol"), 2, Requester("carol", "command line"), False)
    assert tally.refusal("mallory") == (
        "mallory signed it but is not one of this environment's approvers (alice, bob, carol)"
    )
    assert "started this run (command line)" in (tally.refusal("carol") or "")
    assert tally.refusal("alice") is None
    tally.count("alice")
    assert "alice already approved this plan" in (tally.refusal("alice") or "")
    assert tally.missing == 1 and tally.still().startswith("1 more signed approval needed of 2")
    unknown = Tally(("alice", "bob", "carol"), 2, Requester("", "the Prefect UI or API"), False)
    assert unknown.required == 3 and "who started this run is unknown" in unknown.still()
    assert Tally(("a",), 1, Requester("", "ui"), True).required == 1
    author = Requester("Ana <ana@example.com>", "sync of commit 1234")
    assert author.is_("ana@example.com") and not author.is_("ana")


def test_the_signers_file_is_read_from_a_machine_path_or_a_git_ref_only(tmp_path: Path) -> None:
    shown = "STACKFLOW_APPROVAL_ALLOWED_SIGNERS"
    path = tmp_path / "allowed_signers"
    path.write_text("alice ssh-ed25519 AAAA\n")
    assert read_signers(str(path), tmp_path, shown) == b"alice ssh-ed25519 AAAA\n"
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
    (repo / "signers").write_text("bob ssh-ed25519 BBBB\n")
    subprocess.run([*git, "add", "signers"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "signers"], check=True)
    (repo / "signers").write_text("mallory ssh-ed25519 MMMM\n")  # the working tree never counts
    assert read_signers("refs/heads/main:signers", repo, shown) == b"bob ssh-ed25519 BBBB\n"
    for value, words in (
        ("signers", "is not accepted: use an absolute path"),
        ("refs/heads/main:gone", "cannot be read from the repository"),
        (str(tmp_path / "missing"), "cannot be read"),
    ):
        with pytest.raises(SettingsError, match=words) as caught:
            read_signers(value, repo, shown)
        assert str(caught.value).startswith(shown)
