"""Rehearse published pulumi/examples Python programs on the local cloud and print a table.

    python bench/published.py EXAMPLES_CHECKOUT aws-py-appsync aws-py-resources ...

Each program folder is copied to a temporary folder (the checkout is never written to) and run
unchanged through `python flows/run.py rehearse`: up, a second up that must change nothing, and a
destroy that must leave zero resources. What a program's README asks of whoever runs it is done
the same way here (SETUPS): config they would set with `pulumi config set`, written as the
stack's Pulumi.dev.yaml in the copy; a Route 53 zone for a domain they own, made in the local
cloud before and removed after; a folder of two projects run one after the other, an output of
the first set as config of the second. A program that cannot run here is counted as refused with
the first `error:` line it got (the reason). Nothing of the examples is kept.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Setup:
    """What a program's README asks before `pulumi up`.

    Attributes:
        config: project config (keys without the project's name) per project folder ("." for
            the program's own folder).
        zone: a hosted zone the program looks up as a domain the user owns.
        projects: the project folders in the order to deploy them (destroyed in reverse).
        carry: (output of one project, config key of the next).
    """

    config: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    zone: str | None = None
    projects: tuple[str, ...] = (".",)
    carry: tuple[tuple[str, str], ...] = ()


SETUPS = {
    "aws-py-static-website": Setup(
        config={
            ".": {"targetDomain": "www.stackflow-rehearsal.test", "pathToWebsiteContents": "./www"}
        },
        zone="stackflow-rehearsal.test",
    ),
    "aws-py-stackreference": Setup(
        config={
            "company": {"companyName": "ACME Widget Company"},
            "department": {"departmentName": "E-Commerce"},
            "team": {
                "companyStack": "organization/aws-py-stackreference-company/dev",
                "departmentStack": "organization/aws-py-stackreference-department/dev",
                "teamName": "Frontend Dev",
            },
        },
        projects=("company", "department", "team"),
    ),
    "aws-py-assume-role": Setup(
        config={"create-role": {"unprivilegedUsername": "rehearsal-user"}},
        projects=("create-role", "assume-role"),
        carry=(("roleArn", "roleToAssumeARN"),),
    ),
}


def _run(*args: str) -> tuple[int, dict[str, Any], str]:
    command = [sys.executable, str(ROOT / "flows" / "run.py"), *args, "--json"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=900, cwd=ROOT)
    summary = json.loads(done.stdout) if done.stdout.strip().startswith("{") else {}
    return done.returncode, summary, done.stderr


def _why(stderr: str) -> str:
    return next((line for line in stderr.splitlines() if line.startswith("error:")), "")[:200]


def _stack(summary: dict[str, Any]) -> dict[str, Any]:
    stacks = summary.get("stacks") or [{}]
    return dict(stacks[0])


def _project_name(folder: Path) -> str:
    for line in (folder / "Pulumi.yaml").read_text().splitlines():
        if line.startswith("name:"):
            return line.split(":", 1)[1].strip()
    raise ValueError(f"{folder / 'Pulumi.yaml'}: no name")


def _write_config(folder: Path, config: Mapping[str, str]) -> None:
    if not config:
        return  # nothing to set (and a folder without Pulumi.yaml is rehearse's to refuse)
    name = _project_name(folder)
    lines = [f"  {name}:{key}: {json.dumps(value)}" for key, value in config.items()]
    if lines:
        (folder / "Pulumi.dev.yaml").write_text("config:\n" + "\n".join(lines) + "\n")


@contextmanager
def _owned_zone(name: str | None) -> Iterator[None]:
    """A hosted zone in the local cloud for the time of the run (a domain the user owns)."""
    if name is None:
        yield
        return
    import boto3

    _run("cloud", "start")
    status = _run("cloud", "status")[1]
    route53 = boto3.client(
        "route53",
        endpoint_url=status["url"],
        region_name=status["region"],
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    zone = route53.create_hosted_zone(Name=name, CallerReference=f"bench-{time.time()}")
    try:
        yield
    finally:
        route53.delete_hosted_zone(Id=zone["HostedZone"]["Id"])


def run_one(source: Path) -> tuple[str, str]:
    """(verdict, detail) for one program folder."""
    setup = SETUPS.get(source.name, Setup())
    verdict, detail = "ran", "up, no-change up, destroy"
    with tempfile.TemporaryDirectory() as tmp, _owned_zone(setup.zone):
        root = Path(tmp) / source.name
        shutil.copytree(source, root)
        deployed: list[Path] = []
        try:
            carried: dict[str, str] = {}
            for project in setup.projects:
                folder = root / project
                _write_config(folder, {**setup.config.get(project, {}), **carried})
                code, first, why = _rehearse_twice(folder, deployed)
                if code:  # refused: stopped before anything was created, naming why
                    refused = not first or "does not serve" in why
                    verdict, detail = ("refused" if refused else "failed"), why
                    break
                outputs = _stack(first).get("outputs") or {}
                carried = {key: str(outputs[out]) for out, key in setup.carry if out in outputs}
        finally:
            for folder in reversed(deployed):  # what was deployed goes, whatever happened
                code, gone, err = _run("rehearse", str(folder), "--destroy")
                if (code or _stack(gone).get("status") != "destroyed") and verdict == "ran":
                    verdict, detail = "failed", f"destroy of {folder.name}: " + _why(err)
    return verdict, detail


def _rehearse_twice(folder: Path, deployed: list[Path]) -> tuple[int, dict[str, Any], str]:
    """Up, then an up that must change nothing; (exit code, the first summary, why not)."""
    code, first, err = _run("rehearse", str(folder))
    if first:
        deployed.append(folder)
    if code != 0:
        return code, first, _why(err)
    code, second, err = _run("rehearse", str(folder))
    if code != 0 or _stack(second).get("status") != "unchanged":
        return 1, first, f"second up of {folder.name} changed something: " + _why(err)
    return 0, first, ""


def main(argv: list[str]) -> int:
    checkout, names = Path(argv[0]), argv[1:]
    ran = 0
    print("| program | verdict | detail | seconds |\n|---|---|---|---|")
    for name in names:
        started = time.monotonic()
        verdict, detail = run_one(checkout / name)
        ran += verdict == "ran"
        print(f"| {name} | {verdict} | {detail} | {time.monotonic() - started:.0f} |", flush=True)
    print(f"\n{ran} of {len(names)} ran unchanged")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
