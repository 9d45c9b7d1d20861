"""Reading a Pulumi Python project for `rehearse`, without an engine: Pulumi.yaml, the stack to
use, its config (secure values decrypted as Pulumi's passphrase provider encrypts them), the
project's pins and imports against stackflow's environment, and the program's asset paths. Every
refusal names the file and the key or line (the real engine runs projects in
tests/integration/test_rehearse.py)."""

from __future__ import annotations

from importlib.metadata import version
from pathlib import Path

import pulumi
import pytest

from stackflow.engine.automation.host.child import absolute_paths
from stackflow.rehearse.config import project_config
from stackflow.rehearse.dependencies import DependencyError, check_dependencies
from stackflow.rehearse.project import ProjectError, load_project
from stackflow.rehearse.rehearsal import unserved_types
from stackflow.rehearse.secrets import SecureValueError

pytestmark = pytest.mark.unit

# Written by the real `pulumi` v3.259.0 (`stack init --secrets-provider passphrase`, then
# `config set --secret dbPassword hunter2-very-secret`) with the passphrase "project-pass".
SALT = "v1:0nkze4sQbvY=:v1:o/R0EdMdzz6SdycF:fCrtLkZdVqRDv1RgKcx9Tj8Koj47qQ=="
SECURE = "v1:5w3sHsAKTcN8tXnm:Ue5Sb31Vsn8yeg5mjP7/7VxCHi35kuDmPzkoj5Pp7VkAwLs="
PASSPHRASE = {"PULUMI_CONFIG_PASSPHRASE": "project-pass"}


def project(folder: Path, pulumi_yaml: str = "name: shop\nruntime: python\n", **files: str) -> Path:
    """A project folder: Pulumi.yaml, an __main__.py, and `files` by path (`files={...}`)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "Pulumi.yaml").write_text(pulumi_yaml)
    (folder / "__main__.py").write_text("import pulumi\n")
    for name, text in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return folder


def test_a_folder_that_is_not_a_pulumi_python_project_is_refused_naming_the_file(
    tmp_path: Path,
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ProjectError, match=r"empty/Pulumi.yaml: no such file"):
        load_project(empty)
    with pytest.raises(ProjectError, match=r"nowhere: no such folder"):
        load_project(tmp_path / "nowhere")
    node = project(tmp_path / "node", "name: web\nruntime: nodejs\n")
    with pytest.raises(ProjectError, match=r"Pulumi.yaml: runtime 'nodejs'; accepted: python"):
        load_project(node)
    (node / "Pulumi.yaml").write_text("name: web\nruntime: [python\n")
    with pytest.raises(ProjectError, match=r"Pulumi.yaml, line \d+: not valid YAML"):
        load_project(node)
    bare = project(tmp_path / "bare")
    (bare / "__main__.py").unlink()
    with pytest.raises(ProjectError, match=r"bare/__main__.py: no such file"):
        load_project(bare)


def test_main_and_stack_config_dir_are_read_as_pulumi_reads_them(tmp_path: Path) -> None:
    folder = project(
        tmp_path / "p",
        "name: shop\nruntime:\n  name: python\n  options: {virtualenv: venv}\nmain: src/\n"
        "stackConfigDir: stacks\n",
        **{"src/__main__.py": "import pulumi\n", "stacks/Pulumi.prod.yaml": "config: {}\n"},
    )
    found = load_project(folder / "Pulumi.yaml")
    assert found.program_dir == folder / "src" and found.entry == folder / "src" / "__main__.py"
    assert found.stacks() == ["prod"] and found.choose_stack(None) == "prod"
    (folder / "stacks" / "Pulumi.dev.yaml").write_text("config: {}\n")
    with pytest.raises(ProjectError, match=r"stacks dev, prod: name the one to rehearse"):
        found.choose_stack(None)
    with pytest.raises(ProjectError, match=r"--stack 'a/b': not a Pulumi stack name"):
        found.choose_stack("a/b")


def test_config_is_the_projects_defaults_then_the_stack_files_values(tmp_path: Path) -> None:
    folder = project(
        tmp_path / "p",
        "name: shop\nruntime: python\nconfig:\n  greeting:\n    type: string\n    default: hi\n"
        "  aws:region: us-east-1\n  size:\n    type: integer\n    default: 2\n",
        **{
            "Pulumi.dev.yaml": "config:\n  shop:greeting: hello\n  shop:enabled: true\n"
            "  shop:tags: {team: web}\n"
        },
    )
    config = project_config(load_project(folder), "dev", {})
    assert {k: v.value for k, v in config.items()} == {
        "shop:greeting": "hello",
        "aws:region": "us-east-1",
        "shop:size": "2",
        "shop:enabled": "true",
        "shop:tags": '{"team": "web"}',
    }
    assert not any(v.secret for v in config.values())
    (folder / "Pulumi.dev.yaml").write_text("config:\n  greeting: hello\n")
    with pytest.raises(ProjectError, match=r"Pulumi.dev.yaml: config key 'greeting' has no"):
        project_config(load_project(folder), "dev", {})
    (folder / "Pulumi.dev.yaml").write_text("environment: [shop-dev]\n")
    with pytest.raises(ProjectError, match=r"Pulumi.dev.yaml: environment: .* Pulumi ESC"):
        project_config(load_project(folder), "dev", {})


def test_secure_values_are_decrypted_with_the_projects_passphrase_and_stay_secret(
    tmp_path: Path,
) -> None:
    stack_file = f"encryptionsalt: {SALT}\nconfig:\n  shop:dbPassword:\n    secure: {SECURE}\n"
    folder = project(tmp_path / "p", **{"Pulumi.dev.yaml": stack_file})
    found = load_project(folder)
    secret = project_config(found, "dev", PASSPHRASE)["shop:dbPassword"]
    assert secret.value == "hunter2-very-secret" and secret.secret
    assert "hunter2" not in repr(secret)

    with pytest.raises(SecureValueError, match=r"need the project's passphrase") as missing:
        project_config(found, "dev", {})
    assert "shop:dbPassword" in str(missing.value)
    with pytest.raises(SecureValueError, match=r"from PULUMI_CONFIG_PASSPHRASE is not the one"):
        project_config(found, "dev", {"PULUMI_CONFIG_PASSPHRASE": "wrong"})
    (tmp_path / "passphrase").write_text("project-pass\n")
    via_file = {"PULUMI_CONFIG_PASSPHRASE_FILE": str(tmp_path / "passphrase")}
    assert project_config(found, "dev", via_file)["shop:dbPassword"].secret

    kms = "secretsprovider: awskms://alias/shop\nencryptedkey: abc\nconfig:\n  shop:x:\n"
    (folder / "Pulumi.dev.yaml").write_text(f"{kms}    secure: {SECURE}\n")
    with pytest.raises(SecureValueError, match=r"secrets provider awskms://alias/shop"):
        project_config(found, "dev", PASSPHRASE)


def test_a_project_pinned_to_another_pulumi_aws_major_is_refused_by_name(tmp_path: Path) -> None:
    installed = version("pulumi-aws")
    pins = "pulumi>=3.0.0,<4.0.0\npulumi-aws>=6,<7  # old\n"
    folder = project(tmp_path / "p", **{"requirements.txt": pins})
    with pytest.raises(DependencyError) as refused:
        check_dependencies(load_project(folder))
    text = str(refused.value)
    assert f"requirements.txt line 2 pins pulumi-aws>=6,<7, and pulumi-aws {installed}" in text
    assert "requirements.txt line 1" not in text  # pulumi 3 is satisfied

    (folder / "requirements.txt").write_text(f"pulumi-aws=={installed}\n")
    (folder / "pyproject.toml").write_text(
        '[tool.poetry.dependencies]\npython = "^3.11"\npulumi-aws = "^6.0.0"\npulumi-random = "*"\n'
    )
    with pytest.raises(DependencyError, match=r"pulumi-aws = '\^6.0.0'"):
        check_dependencies(load_project(folder))
    (folder / "pyproject.toml").write_text(
        f'[project]\nname = "shop"\ndependencies = ["pulumi-aws~={installed}", "no-such-pkg-x>=1"]\n'
    )
    assert check_dependencies(load_project(folder)) == []  # a package it never imports
    (folder / "__main__.py").write_text(
        "try:\n    import no_such_pkg_x\nexcept ImportError:\n    no_such_pkg_x = None\n"
    )
    with pytest.raises(DependencyError, match=r"no-such-pkg-x>=1 is not installed"):
        check_dependencies(load_project(folder))


def test_a_pin_of_the_installed_major_runs_with_the_installed_version_and_says_so(
    tmp_path: Path,
) -> None:
    """As aws-py-fargate pins them: exact versions of pulumi and pulumi-aws of the installed
    majors, and a type checker the program never imports."""
    pulumi, aws = version("pulumi"), version("pulumi-aws")
    older_aws = f"{aws.split('.')[0]}.0.0"
    pins = f"pulumi==3.0.0\npulumi-aws=={older_aws}\npyright==1.1.999\n"
    folder = project(tmp_path / "p", **{"requirements.txt": pins})
    notes = check_dependencies(load_project(folder))
    assert notes == [
        "requirements.txt line 1 pins pulumi==3.0.0; it runs with the installed pulumi "
        f"{pulumi} (the same major version)",
        f"requirements.txt line 2 pins pulumi-aws=={older_aws}; it runs with the installed "
        f"pulumi-aws {aws} (the same major version)",
    ]


def test_modules_the_program_imports_must_be_importable_here(tmp_path: Path) -> None:
    folder = project(tmp_path / "p", **{"helpers.py": "import pulumi_aws\n"})
    (folder / "__main__.py").write_text(
        "import os\nimport helpers\nimport pulumi_nosuchprovider\n"
        "try:\n    import optional_extra\nexcept ImportError:\n    optional_extra = None\n"
    )
    with pytest.raises(DependencyError) as refused:
        check_dependencies(load_project(folder))
    text = str(refused.value)
    assert "__main__.py line 3 imports pulumi_nosuchprovider, which is not installed" in text
    assert "optional_extra" not in text and "helpers" not in text and " os" not in text
    (folder / "__main__.py").write_text("import pulumi\n")
    (folder / "cli.py").write_text("")  # stackflow's own command line is loaded as `cli`
    import cli  # noqa: F401

    with pytest.raises(DependencyError, match=r"its module cli has the name of one"):
        check_dependencies(load_project(folder))


def test_relative_asset_paths_become_the_program_folders(tmp_path: Path) -> None:
    asset, archive = pulumi.FileAsset("www/index.html"), pulumi.FileArchive("./app")
    absolute = pulumi.FileAsset("/srv/x")
    props = {"source": asset, "code": pulumi.AssetArchive({"a": archive}), "l": [absolute]}
    absolute_paths(props, tmp_path)
    assert asset.path == str(tmp_path / "www/index.html")
    assert archive.path == str(tmp_path / "app") and absolute.path == "/srv/x"


def test_types_of_packages_the_local_cloud_has_no_plugin_for_are_unserved() -> None:
    assert unserved_types(
        [
            "aws:s3/bucket:Bucket",
            "aws:glue/job:Job",
            "tls:index/privateKey:PrivateKey",
            "pulumi:providers:aws",
            "pulumi:providers:tls",
            "pulumi:pulumi:StackReference",
        ]
    ) == ["aws:glue/job:Job", "pulumi:providers:tls", "tls:index/privateKey:PrivateKey"]


def test_on_the_local_cloud_a_provider_package_it_has_no_plugin_for_is_named_first(
    tmp_path: Path,
) -> None:
    """As aws-py-voting-app needs pulumi-docker: installing it would not make it run on the
    local cloud, so that is what the error says, with what else is missing; on AWS the missing
    package is named as any other."""
    pins = "pulumi>=3.0.0,<4.0.0\npulumi-docker>=4.11.0,<4.12.0\nno-such-pkg-x>=1\n"
    folder = project(tmp_path / "p", **{"requirements.txt": pins})
    (folder / "__main__.py").write_text("import pulumi_docker\nimport no_such_pkg_x\n")
    with pytest.raises(DependencyError) as refused:
        check_dependencies(load_project(folder), local=True)
    text = str(refused.value)
    assert (
        "it uses provider packages the local cloud does not serve: pulumi-docker "
        "(requirements.txt line 2) (the local cloud serves pulumi-aws and pulumi-random only)"
        in text
    ), text
    assert "--cloud aws" in text and "no-such-pkg-x>=1 is not installed" in text
    assert "pulumi_docker, which is not installed" not in text  # named once, as a provider
    with pytest.raises(DependencyError) as on_aws:
        check_dependencies(load_project(folder))
    assert "the local cloud" not in str(on_aws.value)
    assert "pulumi-docker>=4.11.0,<4.12.0 is not installed" in str(on_aws.value)
