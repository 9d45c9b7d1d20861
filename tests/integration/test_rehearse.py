"""`python flows/run.py rehearse PATH`: a Pulumi Python project of the test's own (written here
into a temporary folder, as a team would bring one) run by the real Pulumi engine (CLI v3.259.0,
Automation API, inline) on the session's **local cloud** (moto on loopback, not AWS).

It deploys with its own stack file's config (a secure value decrypted with the project's
passphrase, never shown), a second run changes nothing, and a destroy removes it; a project using
types the local cloud does not serve fails before anything is created, naming every one (and a
program that raises during that survey is named where it stopped, with its own error); a project
pinned to another pulumi-aws major, and a folder without Pulumi.yaml, are refused by name.
"""

from __future__ import annotations

import json
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest

from tests.integration.project_support import rehearse_env, write_project
from tests.realenv import cli

pytestmark = pytest.mark.integration

# Written by the real `pulumi` v3.259.0 with the passphrase "project-pass" (see
# tests/unit/test_rehearse_project.py): `config set --secret dbPassword hunter2-very-secret`.
SALT = "v1:0nkze4sQbvY=:v1:o/R0EdMdzz6SdycF:fCrtLkZdVqRDv1RgKcx9Tj8Koj47qQ=="
SECURE = "v1:5w3sHsAKTcN8tXnm:Ue5Sb31Vsn8yeg5mjP7/7VxCHi35kuDmPzkoj5Pp7VkAwLs="
SECRET = "hunter2-very-secret"

SITE = '''"""A bucket with the files of a folder; the folder and a tag come from the stack's config."""
import os

import pulumi
import pulumi_aws as aws

import naming  # a module of the project's own, beside this file

config = pulumi.Config()
folder = config.require("folder")  # relative: the program runs from its own folder
bucket = aws.s3.Bucket(
    "site", tags={"team": config.require("team"), "greeting": config.require("greeting")}
)
for name in sorted(os.listdir(folder)):
    aws.s3.BucketObject(
        naming.resource_name(name),
        bucket=bucket.id,
        key=name,
        source=pulumi.FileAsset(os.path.join(folder, name)),  # a relative path
    )
pulumi.export("bucket", bucket.id)
pulumi.export("password_as_plain_text", config.require("dbPassword"))
'''

UNSERVED = """import pulumi
import pulumi_aws as aws

aws.s3.Bucket("kept-out")
aws.glue.CatalogDatabase("orders")
aws.sfn.Activity("jobs")
pulumi.export("orders", aws.ssm.get_parameter(name="orders").arn)
"""

# The parameter lookup is unserved: a survey answers it with nothing, and `.upper()` of its
# missing value raises, so the survey stops before the activity (getPartition is served).
CUT_SHORT = """import pulumi
import pulumi_aws as aws

aws.glue.CatalogDatabase("orders", name=aws.get_partition().partition + "-orders")
name = aws.ssm.get_parameter(name="orders").value.upper()
aws.sfn.Activity("jobs", name=name)
"""


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """The command's environment: a state folder of the test's own, no Prefect server."""
    return rehearse_env(tmp_path)


@pytest.fixture
def cloud_env(env: dict[str, str], local_cloud: Any) -> dict[str, str]:
    """`env` on the session's local cloud."""
    return {
        **env,
        "STACKFLOW_LOCALCLOUD_DIR": str(local_cloud.root),
        "STACKFLOW_LOCALCLOUD_PORT": str(local_cloud.port),
    }


def rehearse(env: dict[str, str], *args: str) -> tuple[int, dict[str, Any], str]:
    """Run `rehearse ... --json`: exit code, the summary, stderr."""
    result = cli(env, "rehearse", *args, "--json", timeout=300)
    summary = json.loads(result.stdout) if result.stdout.strip() else {}
    return result.returncode, summary, result.stderr


def test_a_project_of_your_own_deploys_on_the_local_cloud_then_changes_nothing_then_goes(
    cloud_env: dict[str, str], local_cloud: Any, tmp_path: Path
) -> None:
    """Local cloud: the project's own stack file gives the folder, a tag and a secure value (its
    passphrase from PULUMI_CONFIG_PASSPHRASE); its files land in the bucket from a relative
    path; a second run changes nothing; --destroy removes the resources and the stack. The secret
    never shows, and the project's folder is left as it was."""
    folder = write_project(
        tmp_path / "site",
        "rehearsed-site",
        SITE,
        {
            "Pulumi.dev.yaml": f"encryptionsalt: {SALT}\nconfig:\n  rehearsed-site:folder: www\n"
            f"  rehearsed-site:team: web\n  rehearsed-site:dbPassword:\n    secure: {SECURE}\n",
            "naming.py": "def resource_name(file):\n    return 'object-' + file.replace('.', '-')\n",
            "requirements.txt": "pulumi>=3.0.0,<4.0.0\npulumi-aws>=7.0.0,<8.0.0\n",
            "www/index.html": "<h1>rehearsed</h1>",
            "www/site.css": "h1 { color: teal }",
        },
    )
    before = snapshot(folder)
    env = {**cloud_env, "PULUMI_CONFIG_PASSPHRASE": "project-pass"}
    said: list[str] = []

    code, first, err = rehearse(env, str(folder))
    said += [json.dumps(first), err]
    assert code == 0, err
    (stack,) = first["stacks"]
    assert (first["operation"], first["environment"], first["target"]) == (
        "rehearse",
        "rehearsed-site/dev",
        "local cloud",
    )
    assert stack["status"] == "updated" and stack["changes"]["create"] == 4, stack
    assert first["engine_calls"] == ["preview:rehearsed-site", "up:rehearsed-site"]
    bucket = stack["outputs"]["bucket"]
    assert stack["outputs"]["password_as_plain_text"] == "[secret]"
    s3 = local_cloud.client("s3")
    body = s3.get_object(Bucket=bucket, Key="index.html")["Body"].read()
    tags = {t["Key"]: t["Value"] for t in s3.get_bucket_tagging(Bucket=bucket)["TagSet"]}
    assert body == b"<h1>rehearsed</h1>"
    assert tags == {"team": "web", "greeting": "hello"}  # greeting: Pulumi.yaml's default

    code, second, err = rehearse(env, str(folder))
    said += [json.dumps(second), err]
    assert code == 0, err
    assert second["stacks"][0]["status"] == "unchanged", second
    assert second["stacks"][0]["changes"] == {
        "create": 0,
        "update": 0,
        "replace": 0,
        "delete": 0,
        "same": 4,
    }

    code, gone, err = rehearse(env, str(folder), "--destroy")
    said += [json.dumps(gone), err]
    assert code == 0, err
    assert (
        gone["stacks"][0]["status"] == "destroyed" and gone["stacks"][0]["changes"]["delete"] == 4
    )
    assert bucket not in [b["Name"] for b in s3.list_buckets()["Buckets"]]
    backend = tmp_path / "state" / "pulumi-local" / ".pulumi" / "stacks" / "rehearsed-site"
    assert not (backend / "dev.json").exists()

    logs = [p.read_text() for p in (tmp_path / "state" / "logs").glob("rehearse-*.log")]
    assert len(logs) == 3 and any("rehearsed-site" in text for text in logs)
    assert all(SECRET not in text for text in said + logs)
    assert snapshot(folder) == before


def test_unserved_types_fail_before_anything_is_created_on_the_local_cloud_naming_each(
    cloud_env: dict[str, str], local_cloud: Any, tmp_path: Path
) -> None:
    """Local cloud: a Glue database, a Step Functions activity and a parameter lookup are not
    served; one preview names all three, no bucket of the program's is created and no stack is
    left in the backend."""
    folder = write_project(tmp_path / "orders", "unserved-orders", UNSERVED, {})
    s3 = local_cloud.client("s3")
    buckets = {b["Name"] for b in s3.list_buckets()["Buckets"]}

    result = cli(cloud_env, "rehearse", str(folder), timeout=300)

    assert result.returncode == 1, result.stdout + result.stderr
    error = next(line for line in result.stderr.splitlines() if line.startswith("error:"))
    for token in (
        "aws:glue/catalogDatabase:CatalogDatabase",
        "aws:sfn/activity:Activity",
        "aws:ssm/getParameter:getParameter",
    ):
        assert token in error, error
    assert "before anything was created" in error and "Traceback" not in result.stderr
    assert "unserved-orders failed" in result.stdout
    assert {b["Name"] for b in s3.list_buckets()["Buckets"]} == buckets
    stacks = tmp_path / "state" / "pulumi-local" / ".pulumi" / "stacks" / "unserved-orders"
    assert not (stacks / "dev.json").exists()


def test_a_project_pinned_to_another_pulumi_aws_major_is_refused_by_name(
    env: dict[str, str], tmp_path: Path
) -> None:
    """Refused before the local cloud or the engine is asked anything: the pin, where it is
    written and the installed version are named; exit 2, nothing changed."""
    folder = write_project(
        tmp_path / "old",
        "pinned-old",
        "import pulumi\n",
        {"requirements.txt": "pulumi>=3.0.0,<4.0.0\npulumi-aws>=6,<7\n"},
    )
    result = cli(env, "rehearse", str(folder))
    assert result.returncode == 2, result.stdout + result.stderr
    assert (
        f"requirements.txt line 2 pins pulumi-aws>=6,<7, and pulumi-aws {version('pulumi-aws')} "
        "is installed" in result.stderr
    ), result.stderr
    assert "Traceback" not in result.stderr and "Nothing was changed" in result.stderr
    assert not (tmp_path / "state" / "pulumi-local").exists()


def test_a_folder_without_pulumi_yaml_is_refused_naming_the_file(
    env: dict[str, str], tmp_path: Path
) -> None:
    folder = tmp_path / "not-a-project"
    folder.mkdir()
    (folder / "__main__.py").write_text("import pulumi\n")
    result = cli(env, "rehearse", str(folder))
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"error: {folder / 'Pulumi.yaml'}: no such file" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""


def test_a_rehearsal_leaves_the_projects_folder_as_it_was_with_no_bytecode(
    cloud_env: dict[str, str], tmp_path: Path
) -> None:
    """Local cloud: a preview of a project whose program imports a module of its own, run as a
    user's shell runs it (Python writes bytecode beside what it imports unless told not to): the
    folder is byte for byte as it was, with no __pycache__ in it."""
    folder = write_project(
        tmp_path / "tidy",
        "tidy-project",
        "import pulumi\n\nimport naming\n\npulumi.export('name', naming.NAME)\n",
        {"naming.py": "NAME = 'tidy'\n"},
    )
    before = snapshot(folder)
    env = {k: v for k, v in cloud_env.items() if k != "PYTHONDONTWRITEBYTECODE"}
    code, summary, err = rehearse(env, str(folder), "--preview")
    assert code == 0, err
    assert summary["stacks"][0]["status"] == "previewed", summary
    assert snapshot(folder) == before
    assert not list(folder.rglob("__pycache__"))


def test_a_survey_the_program_cuts_short_says_where_it_stopped_and_what_it_found_so_far(
    cloud_env: dict[str, str], tmp_path: Path
) -> None:
    """Local cloud: the program trips on an unserved function's empty answer; the error says the
    survey stopped there with the program's own error, names what it found before (the Glue
    database, the parameter lookup), not what comes after (the activity), and nothing is left."""
    folder = write_project(tmp_path / "cut", "cut-short", CUT_SHORT, {})

    result = cli(cloud_env, "rehearse", str(folder), timeout=300)

    assert result.returncode == 1, result.stdout + result.stderr
    error = next(line for line in result.stderr.splitlines() if line.startswith("error:"))
    assert (
        "the survey preview stopped where the program raised AttributeError: 'NoneType' object "
        "has no attribute 'upper'; up to there it found that the local cloud does not serve the "
        "resource type aws:glue/catalogDatabase:CatalogDatabase and the function "
        "aws:ssm/getParameter:getParameter" in error
    ), error
    assert "aws:sfn/activity:Activity" not in error and "nothing was created" in error
    assert "the program's traceback is in" in result.stderr and "Traceback" not in result.stderr
    stacks = tmp_path / "state" / "pulumi-local" / ".pulumi" / "stacks" / "cut-short"
    assert not (stacks / "dev.json").exists()


def test_a_resource_of_your_own_program_that_exists_already_is_reported_never_adopted(
    cloud_env: dict[str, str], local_cloud: Any, tmp_path: Path
) -> None:
    """Local cloud: the log group a project of your own names exists already (made beforehand,
    tagged as yours would be): AWS refuses the create, and the rehearsal fails naming it and
    what to do; stackflow adopts nothing of a program of your own, and the state holds no log
    group."""
    import uuid

    group = f"/rehearsed/{uuid.uuid4().hex[:8]}"
    program = f'import pulumi_aws as aws\n\naws.cloudwatch.LogGroup("audit", name="{group}")\n'
    folder = write_project(tmp_path / "audit", "rehearsed-audit", program, {})
    local_cloud.client("logs").create_log_group(logGroupName=group)

    result = cli(cloud_env, "rehearse", str(folder), timeout=300)

    assert result.returncode == 1, result.stdout + result.stderr
    error = next(line for line in result.stderr.splitlines() if line.startswith("error:"))
    assert (
        "AWS refused to create what exists already: the local cloud holds "
        "aws:cloudwatch/logGroup:LogGroup audit (ResourceAlreadyExistsException); stackflow "
        "never adopts a resource of your own program: delete it, or `pulumi import` it"
    ) in error, error
    checkpoint = tmp_path / "state" / "pulumi-local" / ".pulumi" / "stacks" / "rehearsed-audit"
    state = json.loads((checkpoint / "dev.json").read_text())["checkpoint"]["latest"]
    assert not [r for r in state.get("resources") or [] if "logGroup" in r["type"]], state
