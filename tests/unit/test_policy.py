"""Policy packs without servers: the [policy] settings and their refusals, the config and digest
a pack set gives Pulumi and the fingerprint, a violation as Pulumi reports it and as the plan
shows it, the virtualenv's key, and the analyzer plugin's handling of its arguments."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from pydantic import BaseModel

from stackflow import fingerprint
from stackflow.engine.base import StackSpec
from stackflow.errors import SettingsError
from stackflow.policy.analyzer import SCRIPT
from stackflow.policy.packs import PolicyPackError, PolicySet, read_pack
from stackflow.policy.report import policy_lines, policy_markdown
from stackflow.policy.venv import venv_key
from stackflow.policy.violation import Violation, refusal
from stackflow.settings import get_settings

pytestmark = pytest.mark.unit
URN = "urn:pulumi:prod::stackflow-database::aws:rds/instance:Instance::mysql"
MAIN = "from pulumi_policy import PolicyPack\n"


@pytest.fixture(autouse=True)
def no_machine_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No STACKFLOW_* variable from the caller, and a working folder without a `.env`."""
    for key in [k for k in os.environ if k.startswith("STACKFLOW_")]:
        monkeypatch.delenv(key)
    monkeypatch.chdir(tmp_path)


def project(tmp_path: Path, environments: dict[str, str]) -> Path:
    """A project folder with these environment files (name -> TOML)."""
    root = tmp_path / "project"
    (root / "environments").mkdir(parents=True)
    for name, text in environments.items():
        (root / "environments" / f"{name}.toml").write_text(text)
    return root


def a_pack(folder: Path, runtime: str = "python", main: str | None = MAIN) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "PulumiPolicy.yaml").write_text(f"runtime:\n  name: {runtime}\n")
    if main is not None:
        (folder / "__main__.py").write_text(main)
    (folder / "requirements.txt").write_text("pulumi-policy>=1.21.0,<2.0.0\n")
    return folder


BAD_POLICY = [
    (
        '[policy]\nenforcement = "strict"',
        ["policy.enforcement", "'mandatory', 'advisory' or 'pack'"],
    ),
    (
        '[policy]\nlevels = { rds-not-public = "off" }',
        ["policy.levels", "'mandatory' or 'advisory'"],
    ),
    ('[policy]\ndisabled = { rds-not-public = " " }', ["policy.disabled", "with the reason why"]),
    ('[policy]\ndisabled = { all = "x" }', ["policy.disabled", "'all' is Pulumi's own word"]),
    (
        '[policy]\nlevels = { a = "advisory" }\ndisabled = { a = "why" }',
        ["policy", "a: both in `levels` and `disabled`"],
    ),
    (
        '[policy.config.required-tags]\nenforcementLevel = "advisory"',
        ["policy.config", "set a rule's level in `levels`"],
    ),
    ('[policy]\npack = ["x"]', ["policy.pack: not a setting", "packs"]),
]


@pytest.mark.parametrize(("text", "words"), BAD_POLICY, ids=lambda v: str(v)[:40])
def test_a_bad_policy_setting_is_refused_naming_the_file_and_key(
    tmp_path: Path, text: str, words: list[str]
) -> None:
    root = project(tmp_path, {"demo": text})
    with pytest.raises(SettingsError) as caught:
        get_settings("demo", project_dir=root)
    for word in words:
        assert word in str(caught.value), str(caught.value)


def test_packs_resolve_against_the_project_and_the_kind_sets_the_level(tmp_path: Path) -> None:
    """prod's rules are mandatory and dev's advisory unless the file says; a relative pack is
    the project's; an environment without packs runs none."""
    root = project(tmp_path, {"prod": '[policy]\npacks = ["policies/ours"]\n', "dev": ""})
    a_pack(root / "policies" / "ours")
    prod = get_settings("prod", project_dir=root).policies
    assert prod is not None and prod.enforcement == "mandatory"
    assert [p.folder for p in prod.packs] == [root / "policies" / "ours"]
    assert get_settings("dev", project_dir=root).policies is None
    dev = get_settings("dev", project_dir=root, policy={"packs": ["policies/ours"]}).policies
    assert dev is not None and dev.enforcement == "advisory"


def test_a_pack_that_cannot_run_is_refused_naming_the_folder(tmp_path: Path) -> None:
    root = project(tmp_path, {"dev": '[policy]\npacks = ["nowhere"]\n'})
    refused = r"\[policy\] packs in environments/dev.toml: .*nowhere is not a policy pack"
    with pytest.raises(PolicyPackError, match=refused):
        get_settings("dev", project_dir=root).policies  # noqa: B018
    with pytest.raises(PolicyPackError, match="a nodejs policy pack; stackflow runs Python packs"):
        read_pack(a_pack(tmp_path / "node", runtime="nodejs"))
    with pytest.raises(PolicyPackError, match=r"has no __main__\.py"):
        read_pack(a_pack(tmp_path / "bare", main=None))


def test_the_config_says_the_level_here_each_rules_own_and_what_is_off(tmp_path: Path) -> None:
    pack = read_pack(a_pack(tmp_path / "ours"))
    policies = PolicySet(
        (pack,),
        "mandatory",
        {"required-tags": "advisory"},
        {"rds-final-snapshot": "rebuilt nightly"},
        {"required-tags": {"tags": ["cost-center"]}, "db-port": {"ports": [3306]}},
    )
    assert policies.pack_config() == {
        "all": "mandatory",
        "db-port": {"ports": [3306]},
        "required-tags": {"tags": ["cost-center"], "enforcementLevel": "advisory"},
        "rds-final-snapshot": "disabled",
    }
    assert "all" not in PolicySet((pack,), "pack").pack_config()  # each rule as its pack says


def test_the_digest_follows_the_packs_files_and_settings_not_their_virtualenvs(
    tmp_path: Path,
) -> None:
    """What a stack's fingerprint takes: a changed rule or a rule turned off re-checks it; a
    virtualenv or a cache inside the pack's folder does not."""
    folder = a_pack(tmp_path / "ours")

    def digest(**disabled: str) -> str:
        return PolicySet((read_pack(folder),), "mandatory", disabled=disabled).digest

    before = digest()
    (folder / "venv" / "bin").mkdir(parents=True)
    (folder / "venv" / "bin" / "python").write_text("#")
    (folder / "__pycache__").mkdir()
    (folder / "__pycache__" / "x.pyc").write_bytes(b"\0")
    assert digest() == before
    assert digest(rule="why") != before
    (folder / "__main__.py").write_text(MAIN + "# a new rule\n")
    assert digest() != before


class Args(BaseModel):
    n: int = 1


def test_a_stacks_fingerprint_takes_its_policies(tmp_path: Path) -> None:
    folder = a_pack(tmp_path / "ours")

    def stamp(policies: PolicySet | None) -> str:
        spec = StackSpec("p", "dev", "networking", program=dict, policies=policies)
        return fingerprint.compute(spec, Args(), [], "automation", {})

    plain = stamp(None)
    checked = stamp(PolicySet((read_pack(folder),), "pack"))
    assert checked != plain
    assert stamp(PolicySet((read_pack(folder),), "mandatory")) not in (plain, checked)


def test_a_violation_reads_as_pulumi_reports_it_and_names_resource_and_rule() -> None:
    found = Violation.reported(
        "rds-not-public",
        "stackflow",
        "mandatory",
        URN,
        "A database has no public address.\npubliclyAccessible is true: reachable\n",
    )
    assert found.message == "publiclyAccessible is true: reachable"
    assert found.description == "A database has no public address."
    assert found.resource == 'aws:rds/instance:Instance "mysql"'
    assert found.line() == (
        'aws:rds/instance:Instance "mysql": publiclyAccessible is true: reachable '
        "(policy rds-not-public of pack stackflow, mandatory)"
    )
    child = Violation("r", "p", "advisory", "urn:pulumi:s::p::my:x:Comp$aws:ec2/vpc:Vpc::v", "m")
    assert child.resource == 'aws:ec2/vpc:Vpc "v"'
    assert Violation("r", "p", "advisory", "", "m").resource == "the stack"
    assert refusal("prod/database", [found, child]) == (
        "1 mandatory policy violation in prod/database: " + found.line()
    )


def test_the_plan_shows_the_packs_the_rules_off_and_why_and_each_violation() -> None:
    policies = {
        "packs": ["stackflow"],
        "enforcement": "mandatory",
        "levels": {"required-tags": "advisory"},
        "disabled": {"rds-final-snapshot": "rebuilt | nightly"},
    }
    advisory = Violation("required-tags", "stackflow", "advisory", URN, "tags lacks owner")
    lines = policy_lines("prod", policies, [("database", [advisory.as_dict()]), ("app", [])])
    assert lines == [
        "policies: stackflow (mandatory here; required-tags advisory)",
        "  turned off here: rds-final-snapshot: rebuilt | nightly",
        '  ! advisory prod/database: aws:rds/instance:Instance "mysql": tags lacks owner '
        "(policy required-tags of pack stackflow)",
    ]
    markdown = policy_markdown(policies, [("database", [advisory.as_dict()])])
    assert "- `rds-final-snapshot` turned off: rebuilt \\| nightly" in markdown
    assert "| database | advisory | `required-tags` |" in markdown
    assert policy_lines("dev", {**policies, "disabled": {}}, [])[-1] == "  no violations"
    assert policy_lines("dev", None, []) == [] and policy_markdown(None, []) == ""


def test_a_virtualenv_is_shared_by_packs_that_ask_for_the_same() -> None:
    same = venv_key(b"pulumi>=3.0.0,<4.0.0\n# the template's\npulumi-policy>=1.21.0,<2.0.0\n")
    assert same == venv_key(b"pulumi-policy>=1.21.0,<2.0.0\npulumi>=3.0.0,<4.0.0\n\n")
    assert same != venv_key(b"pulumi-policy>=1.21.0,<2.0.0\nrequests\n")


def test_the_analyzer_runs_the_pack_in_the_virtualenv_its_option_names(tmp_path: Path) -> None:
    """As the CLI starts it: the engine's address, `.`, and `-virtualenv=...` (relative to the
    pack's folder, where it starts); that option is not passed on, nor the engine's passphrase.
    A missing virtualenv is an error line, not a traceback."""
    plugin = tmp_path / "pulumi-analyzer-policy-python"
    plugin.write_text(SCRIPT)
    plugin.chmod(0o755)
    pack = tmp_path / "pack"
    python = pack / "venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text('#!/bin/sh\necho "$@" "${PULUMI_CONFIG_PASSPHRASE:-no-passphrase}"\n')
    python.chmod(0o755)
    env = {"PATH": os.environ["PATH"], "PULUMI_CONFIG_PASSPHRASE": "s3cret"}
    ran = subprocess.run(
        [str(plugin), "127.0.0.1:1234", ".", "-virtualenv=venv"],
        cwd=pack,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert ran.stdout.split() == [
        *("-u", "-m", "pulumi.policy", "127.0.0.1:1234", "."),
        "no-passphrase",  # the engine's secret is not the pack's
    ]
    missing = subprocess.run(
        [str(plugin), "127.0.0.1:1234", ".", "-virtualenv=/nowhere"],
        cwd=pack,
        env=env,
        capture_output=True,
        text=True,
    )
    assert missing.returncode == 1
    assert missing.stderr.startswith("error: pulumi-analyzer-policy-python: /nowhere is not a ")
