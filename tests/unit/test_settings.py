"""Settings: what an environment deploys comes from its file in the project, what the team shares
from stackflow.toml, what belongs to this machine from STACKFLOW_* variables; every bad value
fails before anything runs, naming the file and key (or the variable) and what is accepted;
kinds give their defaults; secrets are never repeated."""

from __future__ import annotations

from pathlib import Path

import pytest

from stackflow.config.tables import settings_rows
from stackflow.errors import SettingsError
from stackflow.settings import EnvironmentKind, UnknownEnvironment, get_settings, kind_of

pytestmark = pytest.mark.unit
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def in_tmp_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The working folder is the test's own, where the `.env` a test writes is read (the unit
    tier's `hermetic` fixture has taken the shell's variables away and made the fixture project,
    tests/fixtures/template/, the project)."""
    monkeypatch.chdir(tmp_path)


def project(tmp_path: Path, environments: dict[str, str], project_file: str = "") -> Path:
    """A project folder with these environment files (name -> TOML) and project file."""
    root = tmp_path / "project"
    (root / "environments" / "templates").mkdir(parents=True, exist_ok=True)
    for name, text in environments.items():
        (root / "environments" / f"{name}.toml").write_text(text)
    if project_file:
        (root / "stackflow.toml").write_text(project_file)
    return root


BAD_FILE_VALUES = [
    # (TOML of environments/demo.toml, words the message must contain)
    ('[network]\nvpc_cidr = "10.0.0.0/33"', ["environments/demo.toml: network.vpc_cidr", "CIDR"]),
    ('[network]\nvpc_cidr = "10.0.0.1/16"', ["network.vpc_cidr", "10.0.0.1/16"]),
    ('[network]\nvpc_cidr = "10.0.0.0/8"', ["network.vpc_cidr", "/16 and /24"]),
    ("[network]\naz_count = 1", ["network.az_count", "2"]),
    ('[network]\nmigration_cidrs = ["nope"]', ["network.migration_cidrs"]),
    ('[aws]\nregion = "europe-1"', ["aws.region", "eu-west-1"]),
    ("[app]\ndesired_count = -1", ["app.desired_count"]),
    ("[app]\ncpu = 300", ["app.cpu", "256"]),
    ('[app]\nhealth_check_path = "health"', ["app.health_check_path"]),
    ('[app]\nimage = "nginx\\n:latest"', ["app.image", "control character"]),
    ("[database]\nallocated_storage_gb = 5", ["database.allocated_storage_gb"]),
    ('[database]\nengine_version = "5.7"', ["database.engine_version", "8.0"]),
    ('cloud = "azure"', ["cloud", "local", "aws"]),
    ('kind = "production"', ["kind", "'dev', 'staging', 'prod' or 'ephemeral'"]),
    ("[app]\ndesired_cont = 2", ["app.desired_cont: not a setting", "desired_count"]),
    ("[cache]\nsize = 2", ["cache: not a setting"]),
    ('state_dir = "/tmp/x"', ["state_dir: not set here", "STACKFLOW_STATE_DIR"]),
    ('backend_url = "file:///x"', ["backend_url: not set here", "stackflow.toml"]),
    ("[app\ncpu = 256", ["not valid TOML", "line 1"]),
    ('[approval]\napprovers = ["al ice"]', ["approval.approvers", "not a principal"]),
    ('[approval]\napprovers = ["a", "a"]', ["approval.approvers", "more than once: a"]),
    (
        '[approval]\napprovers = ["a"]\napprovals_needed = 2',
        ["approval.approvals_needed", "1 approver"],
    ),
    ("[approval]\napprovals_needed = 0", ["approval.approvals_needed"]),
    (
        '[approval]\nallowed_signers = "/etc/x"',
        ["approval.allowed_signers: not set here", "STACKFLOW_APPROVAL_ALLOWED_SIGNERS"],
    ),
]


@pytest.mark.parametrize(("text", "words"), BAD_FILE_VALUES, ids=lambda v: str(v)[:40])
def test_a_bad_value_in_an_environment_file_is_refused_naming_the_file_and_key(
    tmp_path: Path, text: str, words: list[str]
) -> None:
    root = project(tmp_path, {"demo": text})
    with pytest.raises(SettingsError) as caught:
        get_settings("demo", project_dir=root)
    message = str(caught.value)
    for word in words:
        assert word in message, f"{word!r} missing from: {message}"


BAD_VARIABLES = [
    ("STACKFLOW_BACKEND_URL", "ftp://state", ["STACKFLOW_BACKEND_URL", "s3://"]),
    ("STACKFLOW_SECRETS_PROVIDER", "vault://x", ["STACKFLOW_SECRETS_PROVIDER", "awskms://"]),
    ("STACKFLOW_STACK_RETRIES", "-1", ["STACKFLOW_STACK_RETRIES"]),
    ("STACKFLOW_LOCALCLOUD_PORT", "80", ["STACKFLOW_LOCALCLOUD_PORT", "1024"]),
    ("STACKFLOW_STATE_DIR", "/tmp/a\nb", ["STACKFLOW_STATE_DIR", "control character"]),
    ("STACKFLOW_ENGINE", "simulated", ["STACKFLOW_ENGINE", "retired", "cloud"]),
    ("STACKFLOW_SIM_LATENCY_S", '{"*": 1}', ["STACKFLOW_SIM_LATENCY_S", "retired", "local cloud"]),
    ("STACKFLOW_APP_DESIRED_COUNT", "5", ["STACKFLOW_APP_DESIRED_COUNT", "desired_count", "[app]"]),
    ("STACKFLOW_CLOUD", "aws", ["STACKFLOW_CLOUD", "`cloud`", "environments/<name>.toml"]),
    ("STACKFLOW_ENVIRONMENT", "prod", ["STACKFLOW_ENVIRONMENT", "--env"]),
    ("STACKFLOW_PROJECT", "other", ["STACKFLOW_PROJECT", "stackflow.toml"]),
    (
        "STACKFLOW_APPROVAL_ALLOWED_SIGNERS",
        "signers",
        ["STACKFLOW_APPROVAL_ALLOWED_SIGNERS", "<ref>:<path>"],
    ),
    (
        "STACKFLOW_APPROVAL_ALLOWED_SIGNERS",
        "refs/heads/main:../x",
        ["STACKFLOW_APPROVAL_ALLOWED_SIGNERS", "absolute path"],
    ),
    ("STACKFLOW_APPROVAL_APPROVERS", '["me"]', ["STACKFLOW_APPROVAL_APPROVERS", "[approval]"]),
]


@pytest.mark.parametrize(("variable", "value", "words"), BAD_VARIABLES, ids=lambda v: str(v)[:40])
def test_a_bad_or_misplaced_variable_is_refused_naming_it(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, words: list[str]
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(SettingsError) as caught:
        get_settings("dev")
    message = str(caught.value)
    for word in words:
        assert word in message, f"{word!r} missing from: {message}"


def test_a_refused_url_never_repeats_its_password(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STACKFLOW_BACKEND_URL", "ftp://stackflow:canary-pw-42@db/state")
    with pytest.raises(SettingsError) as caught:
        get_settings("dev")
    assert "canary-pw-42" not in str(caught.value)
    assert "STACKFLOW_BACKEND_URL" in str(caught.value)


def test_every_bad_value_is_reported_at_once(tmp_path: Path) -> None:
    root = project(
        tmp_path, {"demo": '[aws]\nregion = "mars-1"\n[network]\nvpc_cidr = "300.0.0.0/16"'}
    )
    with pytest.raises(SettingsError) as caught:
        get_settings("demo", project_dir=root)
    message = str(caught.value)
    for key in ("aws.region", "network.vpc_cidr"):
        assert f"environments/demo.toml: {key}" in message


def test_an_undeclared_environment_is_refused_naming_the_file_to_add(tmp_path: Path) -> None:
    root = project(tmp_path, {"dev": ""})
    with pytest.raises(UnknownEnvironment) as caught:
        get_settings("demo", project_dir=root)
    message = str(caught.value)
    assert "environments/demo.toml" in message and "Declared: dev" in message
    with pytest.raises(SettingsError, match="lowercase"):
        get_settings("Demo", project_dir=root)


def test_ephemeral_names_take_their_kinds_template(tmp_path: Path) -> None:
    root = project(tmp_path, {"dev": ""})
    (root / "environments" / "templates" / "ephemeral.toml").write_text(
        'kind = "ephemeral"\nttl_hours = 6\n[app]\ndesired_count = 0\n'
    )
    settings = get_settings("pr-123", project_dir=root)
    assert settings.environment_kind is EnvironmentKind.EPHEMERAL
    assert (settings.ttl_hours, settings.desired_count) == (6, 0)
    assert settings.source.template is True
    assert settings.source.environment_file == "environments/templates/ephemeral.toml"


def test_the_templates_environments_declare_dev_staging_and_prod() -> None:
    """The fixture project (the template as it ships); the team's own files: test_committed."""
    for name, kind in (("dev", "dev"), ("staging", "staging"), ("prod", "prod")):
        settings = get_settings(name)
        assert settings.environment_kind.value == kind
        assert settings.source.environment_file == f"environments/{name}.toml"
    assert get_settings("pr-7").environment_kind is EnvironmentKind.EPHEMERAL


def test_variables_of_this_machine_override_and_are_recorded_masked(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("STACKFLOW_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("STACKFLOW_STATE_PASSPHRASE", "canary-passphrase-123")
    monkeypatch.setenv("STACKFLOW_BACKEND_URL", "s3://bucket/x?region=eu-west-1")
    settings = get_settings("dev")
    assert settings.state_dir == tmp_path / "state"
    overrides = settings.source.overrides
    assert overrides["state_dir"].startswith(str(tmp_path / "state"))
    assert "canary-passphrase-123" not in repr(overrides)
    assert "STACKFLOW_STATE_PASSPHRASE" in overrides["state_passphrase"]
    assert "canary-passphrase-123" not in repr(settings)
    assert "canary-passphrase-123" in settings.secret_values()


def test_a_flow_run_ignores_environment_settings_in_variables_and_says_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("STACKFLOW_APP_DESIRED_COUNT", "7")
    settings = get_settings("dev", strict=False)
    assert settings.desired_count == 1  # the file (dev's kind) decides, not the variable
    assert any("STACKFLOW_APP_DESIRED_COUNT" in line for line in settings.source.ignored)


def test_the_project_file_sets_team_settings_and_refuses_environment_ones(tmp_path: Path) -> None:
    root = project(tmp_path, {"dev": ""}, 'project = "acme"\nstack_retries = 5\n')
    settings = get_settings("dev", project_dir=root)
    assert (settings.project, settings.stack_retries) == ("acme", 5)
    (root / "stackflow.toml").write_text("[app]\ncpu = 512\n")
    with pytest.raises(SettingsError, match=r"stackflow.toml: app.cpu: not set here"):
        get_settings("dev", project_dir=root)


def test_cloud_argument_wins_over_the_file_and_is_recorded(tmp_path: Path) -> None:
    root = project(tmp_path, {"demo": 'cloud = "aws"'})
    settings = get_settings("demo", "local", project_dir=root)
    assert settings.cloud == "local"
    assert "cloud" in settings.source.overrides


def test_the_local_cloud_needs_no_passphrase_from_the_user() -> None:
    settings = get_settings("dev")
    assert (settings.cloud, settings.state_passphrase) == ("local", None)
    assert settings.target_label == "local cloud"


def test_the_aws_cloud_needs_a_passphrase_or_a_secrets_provider(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(SettingsError, match="STACKFLOW_STATE_PASSPHRASE"):
        get_settings("dev", "aws")
    monkeypatch.setenv("STACKFLOW_SECRETS_PROVIDER", "awskms://alias/stackflow")
    assert get_settings("dev", "aws").secrets_provider == "awskms://alias/stackflow"
    monkeypatch.delenv("STACKFLOW_SECRETS_PROVIDER")
    monkeypatch.setenv("STACKFLOW_STATE_PASSPHRASE", "correct horse")
    assert get_settings("dev", "aws").state_passphrase is not None


def test_pulumi_cloud_backend_needs_a_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STACKFLOW_BACKEND_URL", "https://api.pulumi.com")
    with pytest.raises(SettingsError, match="STACKFLOW_PULUMI_ACCESS_TOKEN"):
        get_settings("dev")


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("dev", EnvironmentKind.DEV),
        ("alice", EnvironmentKind.DEV),
        ("prod", EnvironmentKind.PROD),
        ("prod-eu", EnvironmentKind.PROD),
        ("staging", EnvironmentKind.STAGING),
        ("pr-123", EnvironmentKind.EPHEMERAL),
        ("preview-x", EnvironmentKind.EPHEMERAL),
    ],
)
def test_the_name_implies_the_kind_when_the_file_says_none(
    name: str, kind: EnvironmentKind
) -> None:
    assert kind_of(name) is kind


def test_the_kind_in_the_file_decides_protection_whatever_the_name(tmp_path: Path) -> None:
    root = project(tmp_path, {"live": 'kind = "prod"', "prod-x": 'kind = "dev"'})
    assert get_settings("live", project_dir=root).protected
    assert not get_settings("prod-x", project_dir=root).protected


def test_prod_is_hardened_and_dev_is_cheap() -> None:
    prod = get_settings("prod")
    assert (prod.multi_az, prod.deletion_protection, prod.final_snapshot) == (True, True, True)
    assert prod.nat_gateway and prod.desired_count == 2 and prod.protected
    dev = get_settings("dev")
    assert (dev.multi_az, dev.deletion_protection, dev.final_snapshot) == (False, False, False)
    assert not dev.nat_gateway and dev.desired_count == 1 and not dev.protected
    assert dev.backup_retention_days < prod.backup_retention_days


def test_what_the_file_says_wins_over_the_kind(tmp_path: Path) -> None:
    root = project(tmp_path, {"prod": "[database]\nmulti_az = false\n[app]\ndesired_count = 5\n"})
    settings = get_settings("prod", project_dir=root)
    assert settings.multi_az is False
    assert settings.desired_count == 5
    assert settings.deletion_protection is True  # still from the kind


def test_a_dotenv_file_sets_machine_settings_and_a_variable_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / ".env").write_text("STACKFLOW_LOCAL_PREFECT_PORT=4300\nSTACKFLOW_STACK_RETRIES=1\n")
    settings = get_settings("dev")
    assert (settings.local_prefect_port, settings.stack_retries) == (4300, 1)
    assert ".env line 1" in settings.source.overrides["local_prefect_port"]
    monkeypatch.setenv("STACKFLOW_STACK_RETRIES", "2")
    assert get_settings("dev").stack_retries == 2


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (
            b'STACKFLOW_STATE_DIR="/tmp/unterminated\nSTACKFLOW_STACK_RETRIES=1\n',
            ["line 1", "unterminated"],
        ),
        (b"STACKFLOW_STATE_DIR=/tmp/\xff\xfe\n", ["line 1", "not UTF-8"]),
        (b"STACKFLOW_STACK_RETRIES=1\nSTACKFLOW_STATE_DIR=/tmp/\xff\n", ["line 2", "not UTF-8"]),
    ],
)
def test_a_malformed_dotenv_is_refused_naming_the_file_and_line(
    tmp_path: Path, content: bytes, words: list[str]
) -> None:
    (tmp_path / ".env").write_bytes(content)
    with pytest.raises(SettingsError) as caught:
        get_settings("dev")
    message = str(caught.value)
    assert ".env" in message
    for word in words:
        assert word in message


def test_the_default_backend_is_a_file_backend_in_the_state_folder(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("STACKFLOW_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("STACKFLOW_STATE_PASSPHRASE", "correct horse")
    state = tmp_path / "state"
    assert get_settings("dev").resolved_backend_url == f"file://{state / 'pulumi-local'}"
    assert get_settings("dev", "aws").resolved_backend_url == f"file://{state / 'pulumi-aws'}"


def test_migrations_folder_is_relative_to_the_project(tmp_path: Path) -> None:
    root = project(tmp_path, {"dev": '[migrations]\ndir = "db/migrations"'})
    assert get_settings("dev", project_dir=root).migrations.dir == root / "db" / "migrations"


@pytest.mark.parametrize("home", ["environment", "project", "machine"])
def test_the_settings_tables_list_every_setting_with_a_description(home: str) -> None:
    rows = settings_rows(home)
    names = [name for name, _default, _description in rows]
    assert rows and len(names) == len(set(names))
    assert all(description for _name, _default, description in rows)
    if home == "machine":
        assert all(name.startswith("STACKFLOW_") for name in names)
        assert "STACKFLOW_STATE_DIR" in names and "STACKFLOW_APP_CPU" not in names
    else:
        assert not any(name.startswith("STACKFLOW_") for name in names)


def test_the_settings_reference_tables_are_the_generated_ones() -> None:
    readme = (ROOT / "docs" / "reference" / "settings.md").read_text()
    for home in ("environment", "project", "machine"):
        for name, default, description in settings_rows(home):
            row = f"| `{name}` | {f'`{default}`' if default else ''} | {description.replace('|', '/')} |"
            assert row in readme, (
                f"docs/reference/settings.md is stale at {name}: run scripts/settings_table.py --write"
            )


def test_a_retired_simulator_setting_in_dotenv_is_refused_too(tmp_path: Path) -> None:
    """A `.env` left from the simulated engine must not turn an offline rehearsal into a deploy."""
    (tmp_path / ".env").write_text('STACKFLOW_SIM_DRIFT=["app"]\n')
    with pytest.raises(SettingsError, match="STACKFLOW_SIM_DRIFT: no longer a setting"):
        get_settings("dev")
    (tmp_path / ".env").write_text("STACKFLOW_ENGINE=automation\n")
    assert get_settings("dev").cloud == "local"  # the one value that still means what it did
