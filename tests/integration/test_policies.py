"""Policy packs on the real Pulumi engine and the session's **local cloud** (moto on loopback, not
AWS), through the command line as a user runs it: the repository's pack beside a team's own (written
for pulumi-policy, run unchanged) on a protected prod-* environment deployed once for the module,
then the repository's pack on a dev-* environment whose `up` is checked on a full preview first.

The packs run in their own virtualenv (pulumi-policy from the package index, made once per
machine by `scripts/setup.sh`, or by the first run that needs it).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from stackflow import exits
from tests.realenv import ROOT, cli, process_env, real_variables, unique, update_history

pytestmark = pytest.mark.integration
PROD = unique("prod")
DEV = unique("dev")
SHIPPED = ROOT / "policies" / "stackflow"
TEAM_PACK = ROOT / "tests" / "fixtures" / "policy_packs" / "acme"
HTTP_RULE = """

def no_http_from_anywhere(args: ResourceValidationArgs, report_violation: ReportViolation):
    if (
        args.resource_type == "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
        and args.props.get("cidrIpv4") == "0.0.0.0/0"
        and args.props.get("fromPort") == 80
    ):
        report_violation("fromPort 80 is open to 0.0.0.0/0: serve HTTPS only.")


no_http = ResourceValidationPolicy(
    name="no-http-from-anywhere",
    description="Nothing takes plain HTTP from the internet.",
    validate=no_http_from_anywhere,
    enforcement_level=EnforcementLevel.MANDATORY,
)
"""


# Each of the repository's rules on resources as the programs declare them: (rule, type,
# properties, the rule's config, the message it reports or None when it passes).
RDS = "aws:rds/instance:Instance"
SAFE_DB = {"publiclyAccessible": False, "deletionProtection": True, "storageEncrypted": True}
SAFE_DB |= {"skipFinalSnapshot": False}
INGRESS = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
TAGS = {"project": "p", "environment": "prod", "managed-by": "stackflow"}
RULE_CASES: list[tuple[str, str, dict[str, Any], dict[str, Any], str | None]] = [
    ("rds-not-public", RDS, SAFE_DB, {}, None),
    ("rds-not-public", RDS, SAFE_DB | {"publiclyAccessible": True}, {}, "publiclyAccessible is"),
    ("rds-deletion-protection", RDS, SAFE_DB | {"deletionProtection": False}, {}, "deletionPro"),
    ("rds-storage-encrypted", RDS, {**SAFE_DB, "storageEncrypted": None}, {}, "storageEncrypted"),
    ("rds-final-snapshot", RDS, SAFE_DB | {"skipFinalSnapshot": True}, {}, "skipFinalSnapshot"),
    ("rds-final-snapshot", RDS, SAFE_DB, {}, None),
    (
        "db-port-not-open-to-world",
        INGRESS,
        {"cidrIpv4": "0.0.0.0/0", "ipProtocol": "tcp", "fromPort": 3306.0, "toPort": 3306.0},
        {},
        "cidrIpv4 opens port 3306",
    ),
    (
        "db-port-not-open-to-world",
        INGRESS,
        {"cidrIpv4": "0.0.0.0/0", "ipProtocol": "tcp", "fromPort": 443.0, "toPort": 443.0},
        {},
        None,
    ),
    (
        "db-port-not-open-to-world",
        INGRESS,
        {"cidrIpv4": "10.0.0.0/16", "ipProtocol": "tcp", "fromPort": 3306.0, "toPort": 3306.0},
        {},
        None,
    ),
    (
        "db-port-not-open-to-world",
        "aws:ec2/securityGroup:SecurityGroup",
        {"ingress": [{"protocol": "-1", "fromPort": 0, "toPort": 0, "cidrBlocks": ["0.0.0.0/0"]}]},
        {"ports": [4000]},
        "ingress[0].cidrBlocks opens port 4000",
    ),
    ("required-tags", "aws:ec2/vpc:Vpc", {"tags": TAGS}, {}, None),
    ("required-tags", "aws:ec2/vpc:Vpc", {"tags": TAGS}, {"tags": ["owner"]}, "tags lacks owner"),
    ("required-tags", "aws:ec2/route:Route", {}, {}, None),  # not a taggable type
]
HARNESS = """
import json, runpy, sys, types
import pulumi_policy
found = {}
class Recorder:
    def __init__(self, name, policies, **_):
        found.update({p.name: p for p in policies})
pulumi_policy.PolicyPack = Recorder
runpy.run_path(sys.argv[1] + "/__main__.py")
said = []
for rule, kind, props, config in json.loads(sys.stdin.read()):
    args = types.SimpleNamespace(resource_type=kind, props=props, get_config=lambda c=config: c)
    messages = []
    found[rule].validate(args, messages.append)
    said.append(messages)
print(json.dumps(said))
"""


def test_the_repositorys_rules_refuse_what_a_reviewer_would(tmp_path: Path) -> None:
    """The pack's own code, in its virtualenv, on resources shaped as Pulumi hands them over:
    each rule reports what it exists for, naming the property, and passes what is sound."""
    from stackflow.policy.packs import read_pack
    from stackflow.policy.venv import ensure_venv

    venv = ensure_venv(read_pack(SHIPPED).requirements, "stackflow", print)
    (tmp_path / "harness.py").write_text(HARNESS)
    cases = [[rule, kind, props, config] for rule, kind, props, config, _ in RULE_CASES]
    done = subprocess.run(
        [str(venv / "bin" / "python"), str(tmp_path / "harness.py"), str(SHIPPED)],
        input=json.dumps(cases),
        capture_output=True,
        text=True,
        check=True,
    )
    for (rule, _, _, _, expected), said in zip(RULE_CASES, json.loads(done.stdout), strict=True):
        if expected is None:
            assert said == [], (rule, said)
        else:
            [message] = said
            assert message.startswith(expected), (rule, message)


def test_a_rule_name_no_pack_has_is_refused_before_anything_starts(tmp_path: Path) -> None:
    """A typo in `disabled` would leave the rule on unnoticed: refused (exit 2) naming the
    setting and the rules the packs have, with no server started and nothing changed."""
    variables = {
        "STACKFLOW_PROJECT_DIR": str(tmp_path / "project"),
        "STACKFLOW_STATE_DIR": str(tmp_path / "state"),
    }
    folder = tmp_path / "project" / "environments"
    folder.mkdir(parents=True)
    (folder / "dev.toml").write_text(
        f'kind = "dev"\ncloud = "local"\n[policy]\npacks = ["{SHIPPED}"]\n'
        'disabled = { rds-not-publik = "a typo" }\n'
    )
    done = cli(process_env(variables, PREFECT_API_URL="http://127.0.0.1:9/api"), "up")
    assert done.returncode == exits.USAGE, done.stdout + done.stderr
    assert done.stderr.startswith(
        "error: [policy] disabled: rds-not-publik is not a rule of the pack(s) stackflow; their "
        "rules: db-port-not-open-to-world, rds-deletion-protection,"
    ), done.stderr
    assert not (tmp_path / "state" / "logs").exists()  # no run was started


@dataclass
class Project:
    variables: dict[str, str]
    env: dict[str, str]

    def environment(self, name: str, text: str) -> None:
        """Write environments/<name>.toml of the test's project."""
        folder = Path(self.variables["STACKFLOW_PROJECT_DIR"]) / "environments"
        (folder / f"{name}.toml").write_text(
            f'kind = "{name.split("-")[0]}"\ncloud = "local"\n' + text
        )

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return cli(self.env, *args, "--json")

    @property
    def state_dir(self) -> Path:
        return Path(self.variables["STACKFLOW_STATE_DIR"])


def _error(done: subprocess.CompletedProcess[str]) -> str:
    """The reason a command gave (its `error:` line; --json printed the summary)."""
    [line] = [x for x in done.stderr.splitlines() if x.startswith("error: ")]
    return line.removeprefix("error: ")


@pytest.fixture(scope="module")
def project(
    tmp_path_factory: pytest.TempPathFactory, local_cloud: Any, prefect_server: Any
) -> Project:
    base = tmp_path_factory.mktemp("policies")
    variables = real_variables(base / "state", local_cloud, prefect_server)
    return Project(variables, process_env(variables))


def prod_policy(team_pack: Path) -> str:
    """prod-*'s [policy]: the repository's pack and a team's own, every rule mandatory (the prod
    kind) but the tag rules only advisory, asking for a cost-center tag the programs do not set."""
    return f"""
[policy]
packs = ["{SHIPPED}", "{team_pack}"]
levels = {{ required-tags = "advisory", vpc-owner-tag = "advisory" }}

[policy.config.required-tags]
tags = ["project", "cost-center"]
"""


@dataclass
class Prod:
    project: Project
    team_pack: Path
    first: subprocess.CompletedProcess[str]

    def declare(self, text: str = "") -> None:
        self.project.environment(PROD, text + prod_policy(self.team_pack))


@pytest.fixture(scope="module")
def prod(project: Project, tmp_path_factory: pytest.TempPathFactory) -> Prod:
    """prod-*'s networking deployed (approved with --yes) with both packs; the team's pack is a
    copy the tests may change."""
    team_pack = tmp_path_factory.mktemp("packs") / "acme"
    shutil.copytree(TEAM_PACK, team_pack)
    project.environment(PROD, prod_policy(team_pack))
    first = project.run("up", "--env", PROD, "--stacks", "networking", "--yes")
    assert first.returncode == 0, first.stdout + first.stderr
    return Prod(project, team_pack, first)


def test_advisory_rules_show_in_the_approval_plan_and_a_team_pack_runs_unchanged(
    prod: Prod,
) -> None:
    """Local cloud: the plan names the packs, the level here, and each advisory violation by
    stack, resource and rule, the team's pack (a template's files, run as written) among them;
    approved, the stack is applied, and the summary carries the violations."""
    err, summary = prod.first.stderr, json.loads(prod.first.stdout)
    assert (
        "policies: stackflow, acme (mandatory here; required-tags advisory, vpc-owner-tag advisory)"
    ) in err, err
    assert (
        f'! advisory {PROD}/networking: aws:ec2/vpc:Vpc "vpc": tags lacks cost-center '
        "(policy required-tags of pack stackflow)"
    ) in err, err
    assert (
        f'! advisory {PROD}/networking: aws:ec2/vpc:Vpc "vpc": The VPC has no owner tag. '
        "(policy vpc-owner-tag of pack acme-network)"
    ) in err, err
    [networking] = summary["stacks"]
    assert networking["status"] == "updated"
    assert {v["policy"] for v in networking["violations"]} == {"required-tags", "vpc-owner-tag"}
    assert all(v["level"] == "advisory" for v in networking["violations"])
    assert summary["policies"]["packs"] == ["stackflow", "acme"]


def test_a_mandatory_rule_stops_a_public_prod_database_before_any_change(
    prod: Prod, local_cloud: Any
) -> None:
    """Local cloud: a prod database asked to be public is refused by `rds-not-public` while the
    plan is built (networking, unchanged, is not previewed again): exit 2, the message naming
    the stack, the resource, the property and the rule; the database stack was never updated
    and the cloud holds no instance of it."""
    prod.declare("[database]\npublicly_accessible = true\n")
    done = prod.project.run("up", "--env", PROD, "--stacks", "networking,database", "--yes")
    assert done.returncode == exits.USAGE, done.stdout + done.stderr
    assert json.loads(done.stdout)["engine_calls"] == ["preview:database"]
    error = _error(done)
    assert (
        f'1 mandatory policy violation in {PROD}/database: aws:rds/instance:Instance "mysql": '
        "publiclyAccessible is true"
    ) in error, error
    assert "(policy rds-not-public of pack stackflow, mandatory)" in error
    assert error.endswith("Nothing was applied.")
    assert update_history(prod.project.state_dir, PROD, "database") == []
    instances = local_cloud.client("rds").describe_db_instances()["DBInstances"]
    assert not [i for i in instances if PROD in i["DBInstanceIdentifier"]]


def test_a_changed_pack_rechecks_a_stack_that_was_unchanged(prod: Prod) -> None:
    """Local cloud: the team's pack gains a mandatory rule; networking, skipped while nothing
    changed, is previewed again with it, refused (exit 2) and not updated."""
    prod.declare()
    main = (prod.team_pack / "__main__.py").read_text()
    main = main.replace("\nPolicyPack(", HTTP_RULE + "\nPolicyPack(").replace(
        "        vpc_owner_tag,\n", "        vpc_owner_tag,\n        no_http,\n"
    )
    (prod.team_pack / "__main__.py").write_text(main)
    history = len(update_history(prod.project.state_dir, PROD, "networking"))
    refused = prod.project.run("up", "--env", PROD, "--stacks", "networking", "--yes")
    assert refused.returncode == exits.USAGE, refused.stdout + refused.stderr
    assert json.loads(refused.stdout)["engine_calls"] == ["preview:networking"]
    error = _error(refused)
    assert "(policy no-http-from-anywhere of pack acme-network, mandatory)" in error, error
    assert 'aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule "alb-in-http"' in error
    assert len(update_history(prod.project.state_dir, PROD, "networking")) == history


def test_an_up_without_approval_is_checked_on_a_full_preview_before_anything_is_applied(
    project: Project, local_cloud: Any
) -> None:
    """Local cloud: a dev environment whose migration allowlist opens MySQL to the world, with
    the repository's pack made mandatory there: `up` previews first and stops at the rule;
    `up` alone would have created the VPC and the rest declared before that rule: nothing was."""
    project.environment(
        DEV,
        f'[network]\nmigration_cidrs = ["0.0.0.0/0"]\n\n[policy]\npacks = ["{SHIPPED}"]\n'
        'enforcement = "mandatory"\n',
    )
    done = project.run("up", "--env", DEV, "--stacks", "networking")
    assert done.returncode == exits.USAGE, done.stdout + done.stderr
    assert json.loads(done.stdout)["engine_calls"] == ["preview:networking"]
    error = _error(done)
    assert (
        'aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule "db-in-migration-0.0.0.0-0": '
        "cidrIpv4 opens port 3306 (a database's) to the whole internet "
        "(policy db-port-not-open-to-world of pack stackflow, mandatory)"
    ) in error, error
    assert update_history(project.state_dir, DEV, "networking") == []
    vpcs = local_cloud.client("ec2").describe_vpcs(
        Filters=[{"Name": "tag:environment", "Values": [DEV]}]
    )["Vpcs"]
    assert vpcs == []
