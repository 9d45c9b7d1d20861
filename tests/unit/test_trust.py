"""What a repository may do to a worker, without servers: real git repositories made here, records
in a folder. A commit's tree is checked before it is exported (links out, submodules, size, the
files a run needs); settings files that are links out of the project and names that are folders
above their own are refused; protection follows the stronger of the record and the file; a
checkout with edits is named; a run's summary is checked before it counts as a deploy; review runs
and protected environments never share a backend."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from stackflow.backends import open_records
from stackflow.config.protection import Protection, ProtectionLowered
from stackflow.config.sources import LinkRefused
from stackflow.environment_records import (
    SharedBackend,
    check_protected_backend,
    check_review_backend,
    guard_environment,
    read,
    record_attempt,
    record_outcome,
)
from stackflow.errors import ConfirmationRequired, DeletionProtected
from stackflow.gitops.git import (
    Git,
    UncommittedChanges,
    changed_files,
    check_exact_commit,
    export_commit,
)
from stackflow.gitops.tree import CommitRefused
from stackflow.names import NameRefused, validate_project_name
from stackflow.settings import get_settings
from tests.realenv import ROOT, declare, git
from tests.realenv import test_project as make_project

pytestmark = pytest.mark.unit


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository whose first commit holds what a worker needs to run it."""
    work = tmp_path / "work"
    (work / "flows").mkdir(parents=True)
    git(work, "init", "-q", "-b", "main")
    (work / "constraints.txt").write_text("six==1.16.0\n")
    (work / "flows" / "run.py").write_text("print('hi')\n")
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "one")
    return work


def commit(work: Path, message: str) -> str:
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", message)
    return git(work, "rev-parse", "HEAD")


def export(work: Path, sha: str, **limits: int) -> Path:
    dest = work.parent / "checkouts" / sha
    return export_commit(
        Git(str(work)),
        work.parent / "mirrors",
        sha,
        dest,
        required=("constraints.txt", "flows/run.py"),
        **limits,
    )


def refused(work: Path, sha: str, **limits: int) -> str:
    """The refusal of exporting `sha`, once nothing of it was left behind."""
    with pytest.raises(CommitRefused) as caught:
        export(work, sha, **limits)
    left = (
        list((work.parent / "checkouts").glob("*")) if (work.parent / "checkouts").exists() else []
    )
    assert left == [], left  # no export, no partial folder, no archive
    return str(caught.value)


def test_a_commit_with_links_out_of_it_is_refused_by_name(repo: Path) -> None:
    (repo / "environments").mkdir()
    (repo / "environments" / "staging.toml").symlink_to("/nonexistent/stackflow/staging.toml")
    absolute = commit(repo, "an absolute link")
    text = refused(repo, absolute)
    assert f"commit {absolute[:12]} is refused" in text
    assert "absolute paths ('environments/staging.toml')" in text

    (repo / "environments" / "staging.toml").unlink()
    (repo / "environments" / "staging.toml").symlink_to("../../outside.toml")
    assert "lead out of the commit ('environments/staging.toml')" in refused(
        repo, commit(repo, "a relative link out")
    )

    # each link alone stays inside; followed on disk, the first leaves (unpacked before the
    # link it goes through exists, so only the check after unpacking can see it)
    (repo / "environments" / "staging.toml").unlink()
    (repo / "z-here").symlink_to(".")
    (repo / "a-up").symlink_to("z-here/..")
    assert "through other links ('a-up')" in refused(repo, commit(repo, "a chain of links"))


def test_a_submodule_a_missing_file_and_a_tree_too_large_are_refused_by_name(repo: Path) -> None:
    head = git(repo, "rev-parse", "HEAD")
    git(repo, "update-index", "--add", "--cacheinfo", f"160000,{head},vendor/lib")
    git(repo, "commit", "-q", "-m", "a submodule")
    assert "submodule links ('vendor/lib')" in refused(repo, git(repo, "rev-parse", "HEAD"))
    git(repo, "rm", "-q", "--cached", "vendor/lib")

    (repo / "constraints.txt").unlink()
    assert "it has no 'constraints.txt'" in refused(repo, commit(repo, "no lock"))

    (repo / "constraints.txt").write_text("six==1.16.0\n")
    (repo / "big.bin").write_bytes(b"x" * (2 * 2**20))
    large = commit(repo, "two MiB")
    text = refused(repo, large, max_bytes=2**20)
    assert "2.0 MiB" in text and "max_export_mb" in text
    assert (export(repo, large) / "big.bin").stat().st_size == 2 * 2**20  # within the default


def test_settings_files_that_are_links_out_of_the_project_are_refused(tmp_path: Path) -> None:
    project = make_project(tmp_path / "project")
    outside = tmp_path / "elsewhere.toml"
    outside.write_text('kind = "dev"\n')
    link = project / "environments" / "dev-a.toml"
    link.symlink_to(outside)
    with pytest.raises(LinkRefused, match=r"environments/dev-a\.toml is a link to an absolute"):
        get_settings("dev-a", project_dir=project, environ={})
    link.unlink()
    link.symlink_to("../../elsewhere.toml")
    with pytest.raises(LinkRefused, match=r"environments/dev-a\.toml leads outside the project"):
        get_settings("dev-a", project_dir=project, environ={})
    link.unlink()
    (project / "environments" / "shared.toml").write_text('kind = "dev"\ncloud = "local"\n')
    link.symlink_to("shared.toml")  # a link inside the project is the project's own
    assert get_settings("dev-a", project_dir=project, environ={}).environment == "dev-a"


def test_names_that_are_folders_above_their_own_never_become_paths(tmp_path: Path) -> None:
    from stackflow.rehearse.project import ProjectError, load_project
    from stackflow.state import StateLayout

    for name in ("..", ".", "a/b", "x" * 101, ""):
        with pytest.raises(NameRefused):
            validate_project_name(name)
    assert validate_project_name("shop.api_v2-1") == "shop.api_v2-1"
    with pytest.raises(NameRefused, match="not a Pulumi stack name"):
        StateLayout(tmp_path).workspace("local", "stackflow-app", "..")
    (tmp_path / "Pulumi.yaml").write_text("name: ..\nruntime: python\n")
    (tmp_path / "__main__.py").write_text("")
    with pytest.raises(ProjectError, match=r"name '\.\.': not a Pulumi project name"):
        load_project(tmp_path)


def _prod(tmp_path: Path, **sections: Any) -> Any:
    project = make_project(tmp_path / "project")
    declare({"STACKFLOW_PROJECT_DIR": str(project)}, "prod-a", **sections)
    return get_settings("prod-a", project_dir=project, state_dir=tmp_path / "state", environ={})


def test_protection_follows_the_stronger_of_the_record_and_the_file(tmp_path: Path) -> None:
    records = open_records(str(tmp_path / "records"))
    deployed = _prod(tmp_path)
    record_attempt(records, deployed)
    record_outcome(records, deployed, succeeded=True)
    assert read(records, "prod-a").extra["protection"] == {  # type: ignore[union-attr]
        "kind": "prod",
        "approval": True,
        "deletion_protection": True,
        "confirm_destroy": True,
        "enforced_packs": [],
    }
    # one line turns the kind to dev: refused, naming the file and what to set
    with pytest.raises(ProtectionLowered) as caught:
        guard_environment(_prod(tmp_path, kind="dev"), records)
    assert "environments/prod-a.toml lowers the protection of 'prod-a' (kind prod -> dev" in str(
        caught.value
    )
    assert "unprotect" in str(caught.value)
    # with a reason, the file is read, and the gate still follows what was recorded
    why = {"unprotect": "moved to the dev account"}
    lowered = guard_environment(_prod(tmp_path, kind="dev", approval=why), records)
    assert lowered.approval_required and lowered.protected
    assert lowered.lowered_protection()[0] == "kind prod -> dev"
    with pytest.raises(ConfirmationRequired):
        lowered.confirm_destroy(False)
    with pytest.raises(DeletionProtected):
        lowered.confirm_database_deletable()
    # once an approved up applied it, the record is the file's, with the reason
    record_outcome(records, lowered, succeeded=True)
    kept = read(records, "prod-a").extra  # type: ignore[union-attr]
    assert kept["protection"]["approval"] is False and kept["protection"]["kind"] == "dev"
    assert kept["unprotected"]["reason"] == "moved to the dev account"
    assert not guard_environment(_prod(tmp_path, kind="dev", approval=why), records).protected
    # what the worker hands on (flows.handoff): each guard on when either side has it on
    weak, strong = (
        Protection("dev", False, False, False),
        Protection("prod", True, True, True, ("a",)),
    )
    assert weak.stronger(strong) == strong.stronger(weak) == strong
    for guard in ("approval", "deletion_protection", "confirm_destroy"):
        one = dataclasses.replace(weak, **{guard: True})
        assert getattr(weak.stronger(one), guard) and getattr(one.stronger(weak), guard), guard


def test_a_prod_environment_drops_or_relaxes_its_policy_packs_only_with_a_reason(
    tmp_path: Path,
) -> None:
    import shutil

    records = open_records(str(tmp_path / "records"))
    project = make_project(tmp_path / "project")
    shutil.copytree(ROOT / "tests" / "fixtures" / "policy_packs" / "acme", project / "acme")
    deployed = _prod(tmp_path, policy={"packs": ["acme"]})
    assert deployed.file_protection.enforced_packs == ("acme",)  # prod's kind: mandatory
    record_attempt(records, deployed)
    record_outcome(records, deployed, succeeded=True)
    for relaxed in ({"packs": []}, {"packs": ["acme"], "enforcement": "advisory"}):
        with pytest.raises(ProtectionLowered, match="policy pack acme enforced: on -> off"):
            guard_environment(_prod(tmp_path, policy=relaxed), records)
        why = {"unprotect": "the pack moved to the org's own repository"}
        allowed = guard_environment(_prod(tmp_path, policy=relaxed, approval=why), records)
        assert allowed.lowered_protection() == ["policy pack acme enforced: on -> off"]
    # a pack enforced as each rule says is still enforced: nothing lowered
    kept = _prod(tmp_path, policy={"packs": ["acme"], "enforcement": "pack"})
    assert guard_environment(kept, records).lowered_protection() == []


def test_a_checkout_with_edits_is_named_and_a_clean_one_runs(repo: Path) -> None:
    check_exact_commit(repo, "prod", "protected")  # clean: nothing to say
    (repo / "flows" / "run.py").write_text("print('edited')\n")
    (repo / "new.sql").write_text("DROP TABLE x;\n")
    assert changed_files(repo) == ["flows/run.py", "new.sql"]
    with pytest.raises(UncommittedChanges, match=r"uncommitted changes: flows/run\.py, new\.sql"):
        check_exact_commit(repo, "prod", "protected")
    assert changed_files(repo.parent) is None  # outside git: no commit to compare


def test_a_run_s_summary_counts_only_when_it_is_the_whole_deploy(tmp_path: Path) -> None:
    from flows.handoff import Handoff, verify_summary
    from stackflow.config.protection import kind_protection
    from stackflow.settings import EnvironmentKind

    settings = _prod(tmp_path)
    handoff = Handoff(settings, open_records(str(tmp_path / "r")), tmp_path, "a" * 40)
    handoff.protection = kind_protection(EnvironmentKind.PROD)
    whole = {
        "environment": "prod-a",
        "operation": "up",
        "commit": "a" * 40,
        "stacks": [{"stack": "app", "status": "updated"}],
        "engine_calls": ["up:app"],
        "approvals": [{"decision": "approved"}],
    }
    assert verify_summary(handoff, 0, whole) is None
    assert "printed no summary" in str(verify_summary(handoff, 0, {}))
    assert "commit 'bbb" in str(verify_summary(handoff, 0, {**whole, "commit": "b" * 40}))
    assert "lists no stack" in str(verify_summary(handoff, 0, {**whole, "stacks": []}))
    assert "no approval" in str(verify_summary(handoff, 0, {**whole, "approvals": []}))


def test_a_run_s_summary_counts_only_with_the_signers_this_worker_asks_for(tmp_path: Path) -> None:
    """A synced commit's code runs its own gate: the worker, reading its own [approval] rules,
    does not record a change as deployed unless the summary's approval names enough approvers."""
    from flows.handoff import Handoff, verify_summary
    from stackflow.config.protection import kind_protection
    from stackflow.settings import EnvironmentKind

    settings = _prod(tmp_path, approval={"approvers": ["alice", "bob"], "approvals_needed": 2})
    handoff = Handoff(settings, open_records(str(tmp_path / "r")), tmp_path, "a" * 40)
    handoff.protection = kind_protection(EnvironmentKind.PROD)
    whole = {
        "environment": "prod-a",
        "operation": "up",
        "commit": "a" * 40,
        "stacks": [{"stack": "app", "status": "updated"}],
        "engine_calls": ["up:app"],
        "approvals": [{"decision": "approved", "signers": ["alice", "bob"]}],
    }
    assert verify_summary(handoff, 0, whole) is None
    for signers in (["alice"], ["alice", "mallory"], []):
        short = {**whole, "approvals": [{"decision": "approved", "signers": signers}]}
        assert "needs 2 signed approval(s) by its approvers" in str(
            verify_summary(handoff, 0, short)
        ), signers
    unchanged = {**whole, "engine_calls": [], "approvals": []}
    assert verify_summary(handoff, 0, unchanged) is None  # nothing changed: nothing to approve


def test_protection_is_checked_on_the_commit_before_its_code_runs(tmp_path: Path) -> None:
    """The worker's own checks (`CHECKS`, as a sync runs them) refuse a commit whose file lowers
    prod's kind, and pass the same commit keeping it."""
    from flows.handoff import Handoff, check_handoff

    records = open_records(str(tmp_path / "records"))
    deployed = _prod(tmp_path)
    record_attempt(records, deployed)
    record_outcome(records, deployed, succeeded=True)
    checkout = make_project(tmp_path / "commit")
    for root in (deployed.project_dir, checkout):  # the same locked dependencies
        (root / "constraints.txt").write_text("six==1.16.0\n")
    declare({"STACKFLOW_PROJECT_DIR": str(checkout)}, "prod-a")
    kept = Handoff(deployed, records, checkout, "c" * 40)
    check_handoff(kept)
    assert kept.protection is not None and kept.protection.kind == "prod"
    declare({"STACKFLOW_PROJECT_DIR": str(checkout)}, "prod-a", kind="dev")
    with pytest.raises(ProtectionLowered, match="kind prod -> dev"):
        check_handoff(Handoff(deployed, records, checkout, "c" * 40))


def test_a_commit_that_changes_who_approves_is_refused_by_name(tmp_path: Path) -> None:
    from flows.handoff import Handoff, approval_rules, check_handoff, environment_file

    rules = {"approvers": ["alice", "bob"], "approvals_needed": 2}
    deployed = _prod(tmp_path, approval=rules)
    records = open_records(str(tmp_path / "records"))
    checkout = make_project(tmp_path / "commit")
    variables = {"STACKFLOW_PROJECT_DIR": str(checkout)}
    declare(variables, "prod-a", approval=rules)
    check_handoff(
        Handoff(deployed, records, checkout, "c" * 40), [environment_file, approval_rules]
    )
    declare(variables, "prod-a", approval={"approvers": ["mallory"], "requester_may_approve": True})
    handoff = Handoff(deployed, records, checkout, "c" * 40)
    with pytest.raises(CommitRefused) as caught:
        check_handoff(handoff, [environment_file, approval_rules])
    message = str(caught.value)
    assert "commit cccccccccccc changes who approves prod-a" in message
    assert "approvers, approvals_needed, requester_may_approve under [approval]" in message


def test_review_runs_and_protected_environments_never_share_a_backend(tmp_path: Path) -> None:
    from stackflow.gitops import sync

    records = open_records(str(tmp_path / "records"))
    check_review_backend(records)  # empty: review runs may use it
    deployed = _prod(tmp_path)
    record_attempt(records, deployed)
    with pytest.raises(SharedBackend, match=r"holds protected environment\(s\) prod-a"):
        check_review_backend(records)
    sync.note_seen(records, "pr-7", "a" * 40, {"branch": "pr/7", "review": True})
    with pytest.raises(SharedBackend, match=r"review environment\(s\) pr-7"):
        check_protected_backend(records, "prod-a")
    with pytest.raises(SharedBackend):
        guard_environment(deployed, records)
