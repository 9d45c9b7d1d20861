"""Settings: every bad value fails before anything runs, naming its variable and what is accepted;
profiles give each environment kind its defaults; explicit settings win; `.env` is read."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from stackflow.errors import SettingsError
from stackflow.settings import EnvironmentKind, get_settings, kind_of, settings_table

pytestmark = pytest.mark.unit


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """No STACKFLOW_* variable from the caller, and a working folder without a `.env`."""
    for key in [k for k in os.environ if k.startswith("STACKFLOW_")]:
        monkeypatch.delenv(key)
    monkeypatch.chdir(tmp_path)
    yield


BAD_VALUES = [
    # (variable, value, words the message must contain)
    ("STACKFLOW_ENVIRONMENT", "Dev", ["STACKFLOW_ENVIRONMENT", "lowercase"]),
    ("STACKFLOW_ENVIRONMENT", "dev_1", ["STACKFLOW_ENVIRONMENT", "'dev_1'"]),
    ("STACKFLOW_ENVIRONMENT", "a" * 21, ["STACKFLOW_ENVIRONMENT", "1-20 characters"]),
    ("STACKFLOW_ENVIRONMENT", "dev-", ["STACKFLOW_ENVIRONMENT", "hyphen"]),
    ("STACKFLOW_NETWORK_VPC_CIDR", "10.0.0.0/33", ["STACKFLOW_NETWORK_VPC_CIDR", "CIDR"]),
    ("STACKFLOW_NETWORK_VPC_CIDR", "10.0.0.1/16", ["STACKFLOW_NETWORK_VPC_CIDR", "10.0.0.1/16"]),
    ("STACKFLOW_NETWORK_VPC_CIDR", "10.0.0.0/8", ["STACKFLOW_NETWORK_VPC_CIDR", "/16 and /24"]),
    ("STACKFLOW_NETWORK_AZ_COUNT", "1", ["STACKFLOW_NETWORK_AZ_COUNT", "2"]),
    ("STACKFLOW_NETWORK_AZ_COUNT", "-2", ["STACKFLOW_NETWORK_AZ_COUNT"]),
    ("STACKFLOW_NETWORK_MIGRATION_CIDRS", "10.0.0.0/8", ["STACKFLOW_NETWORK_MIGRATION_CIDRS"]),
    ("STACKFLOW_NETWORK_MIGRATION_CIDRS", '["nope"]', ["STACKFLOW_NETWORK_MIGRATION_CIDRS"]),
    ("STACKFLOW_AWS_REGION", "europe-1", ["STACKFLOW_AWS_REGION", "eu-west-1"]),
    ("STACKFLOW_AWS_REGION", "EU-WEST-1", ["STACKFLOW_AWS_REGION"]),
    ("STACKFLOW_APP_DESIRED_COUNT", "-1", ["STACKFLOW_APP_DESIRED_COUNT"]),
    ("STACKFLOW_APP_CPU", "300", ["STACKFLOW_APP_CPU", "256"]),
    ("STACKFLOW_APP_HEALTH_CHECK_PATH", "health", ["STACKFLOW_APP_HEALTH_CHECK_PATH"]),
    ("STACKFLOW_DATABASE_ALLOCATED_STORAGE_GB", "5", ["STACKFLOW_DATABASE_ALLOCATED_STORAGE_GB"]),
    (
        "STACKFLOW_DATABASE_BACKUP_RETENTION_DAYS",
        "-3",
        ["STACKFLOW_DATABASE_BACKUP_RETENTION_DAYS"],
    ),
    ("STACKFLOW_DATABASE_ENGINE_VERSION", "5.7", ["STACKFLOW_DATABASE_ENGINE_VERSION", "8.0"]),
    ("STACKFLOW_CLOUD", "azure", ["STACKFLOW_CLOUD", "local", "aws"]),
    ("STACKFLOW_BACKEND_URL", "ftp://state", ["STACKFLOW_BACKEND_URL", "s3://"]),
    ("STACKFLOW_SECRETS_PROVIDER", "vault://x", ["STACKFLOW_SECRETS_PROVIDER", "awskms://"]),
    ("STACKFLOW_ENGINE", "simulated", ["STACKFLOW_ENGINE", "retired", "STACKFLOW_CLOUD"]),
    ("STACKFLOW_SIM_LATENCY_S", '{"*": 1}', ["STACKFLOW_SIM_LATENCY_S", "retired", "local cloud"]),
    ("STACKFLOW_STACK_RETRIES", "-1", ["STACKFLOW_STACK_RETRIES"]),
]


@pytest.mark.parametrize(("variable", "value", "words"), BAD_VALUES, ids=lambda v: str(v)[:40])
def test_a_bad_value_is_refused_naming_its_variable(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, words: list[str]
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(SettingsError) as caught:
        get_settings()
    message = str(caught.value)
    for word in words:
        assert word in message, f"{word!r} missing from: {message}"


def test_every_bad_value_is_reported_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STACKFLOW_ENVIRONMENT", "Prod")
    monkeypatch.setenv("STACKFLOW_AWS_REGION", "mars-1")
    monkeypatch.setenv("STACKFLOW_NETWORK_VPC_CIDR", "300.0.0.0/16")
    with pytest.raises(SettingsError) as caught:
        get_settings()
    message = str(caught.value)
    for variable in ("STACKFLOW_AWS_REGION", "STACKFLOW_NETWORK_VPC_CIDR"):
        assert variable in message
    # sections are checked first; the top-level name is reported once they pass
    monkeypatch.delenv("STACKFLOW_AWS_REGION")
    monkeypatch.delenv("STACKFLOW_NETWORK_VPC_CIDR")
    with pytest.raises(SettingsError, match="STACKFLOW_ENVIRONMENT"):
        get_settings()


def test_the_local_cloud_needs_no_passphrase_from_the_user(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = get_settings()
    assert (settings.cloud, settings.state_passphrase) == ("local", None)
    assert settings.target_label == "local cloud"


def test_the_aws_cloud_needs_a_passphrase_or_a_secrets_provider(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("STACKFLOW_CLOUD", "aws")
    with pytest.raises(SettingsError, match="STACKFLOW_STATE_PASSPHRASE"):
        get_settings()
    monkeypatch.setenv("STACKFLOW_SECRETS_PROVIDER", "awskms://alias/stackflow")
    assert get_settings().secrets_provider == "awskms://alias/stackflow"
    monkeypatch.delenv("STACKFLOW_SECRETS_PROVIDER")
    monkeypatch.setenv("STACKFLOW_STATE_PASSPHRASE", "correct horse")
    assert get_settings().state_passphrase is not None


def test_pulumi_cloud_backend_needs_a_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STACKFLOW_BACKEND_URL", "https://api.pulumi.com")
    with pytest.raises(SettingsError, match="STACKFLOW_PULUMI_ACCESS_TOKEN"):
        get_settings()


def test_the_passphrase_never_shows_in_the_settings_repr(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STACKFLOW_STATE_PASSPHRASE", "canary-passphrase-123")
    settings = get_settings()
    assert "canary-passphrase-123" not in repr(settings)
    assert "canary-passphrase-123" in settings.secret_values()


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
def test_the_name_implies_the_kind(name: str, kind: EnvironmentKind) -> None:
    assert kind_of(name) is kind


def test_prod_is_hardened_and_dev_is_cheap() -> None:
    prod = get_settings(environment="prod")
    assert (prod.multi_az, prod.deletion_protection, prod.final_snapshot) == (True, True, True)
    assert prod.nat_gateway and prod.desired_count == 2 and prod.profile.protected
    dev = get_settings(environment="dev")
    assert (dev.multi_az, dev.deletion_protection, dev.final_snapshot) == (False, False, False)
    assert not dev.nat_gateway and dev.desired_count == 1 and not dev.profile.protected
    assert dev.backup_retention_days < prod.backup_retention_days


def test_ephemeral_environments_carry_a_ttl(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STACKFLOW_TTL_HOURS", "6")
    settings = get_settings(environment="pr-123")
    assert settings.environment_kind is EnvironmentKind.EPHEMERAL
    assert settings.ttl_hours == 6


def test_explicit_settings_win_over_the_profile(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STACKFLOW_DATABASE_MULTI_AZ", "false")
    monkeypatch.setenv("STACKFLOW_APP_DESIRED_COUNT", "5")
    settings = get_settings(environment="prod")
    assert settings.multi_az is False
    assert settings.desired_count == 5
    assert settings.deletion_protection is True  # still from the profile


def test_a_dotenv_file_in_the_working_folder_is_read(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("STACKFLOW_AWS_REGION=us-east-2\nSTACKFLOW_NETWORK_AZ_COUNT=3\n")
    settings = get_settings()
    assert settings.aws.region == "us-east-2"
    assert settings.network.az_count == 3


def test_a_variable_wins_over_the_dotenv_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / ".env").write_text("STACKFLOW_AWS_REGION=us-east-2\n")
    monkeypatch.setenv("STACKFLOW_AWS_REGION", "eu-central-1")
    assert get_settings().aws.region == "eu-central-1"


def test_the_default_backend_is_a_file_backend_in_the_state_folder(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("STACKFLOW_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("STACKFLOW_STATE_PASSPHRASE", "correct horse")
    state = tmp_path / "state"
    assert get_settings().resolved_backend_url == f"file://{state / 'pulumi-local'}"
    assert get_settings(cloud="aws").resolved_backend_url == f"file://{state / 'pulumi-aws'}"


def test_the_settings_table_lists_every_variable_with_a_description() -> None:
    rows = settings_table()
    names = [name for name, _default, _description in rows]
    assert len(names) == len(set(names))
    assert all(name.startswith("STACKFLOW_") for name in names)
    assert all(description for _name, _default, description in rows)
    for expected in ("STACKFLOW_ENVIRONMENT", "STACKFLOW_NETWORK_VPC_CIDR", "STACKFLOW_APP_PORT"):
        assert expected in names


def test_the_readme_table_is_the_generated_one() -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    for name, default, description in settings_table():
        row = f"| `{name}` | {f'`{default}`' if default else ''} | {description} |"
        assert row in readme, (
            f"README's settings table is stale at {name}: run scripts/settings_table.py --write"
        )


def test_a_retired_simulator_setting_in_dotenv_is_refused_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A `.env` left from the simulated engine must not turn an offline rehearsal into a deploy."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".env").write_text('STACKFLOW_SIM_DRIFT=["app"]\n')
    with pytest.raises(SettingsError, match="STACKFLOW_SIM_DRIFT: no longer a setting"):
        get_settings()
    (tmp_path / ".env").write_text("STACKFLOW_ENGINE=automation\n")
    assert get_settings().cloud == "local"  # the one value that still means what it did
