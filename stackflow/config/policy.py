"""The `[policy]` section: which Pulumi policy packs check an environment's previews and updates,
how strictly, and which rules it turns off, each with the reason recorded."""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from stackflow.config.section import Section

Level = Literal["mandatory", "advisory"]
# Pulumi's own rule for a policy name (pulumi-policy refuses others when the pack starts)
_RULE_RE = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9._-]{0,99}$")
REASON_MAX = 300


def _rule(name: str) -> str:
    if not _RULE_RE.match(name) or name == "all":
        raise ValueError(
            f"{name!r} is not a policy name (letters, digits, '.', '_' and '-', up to 100; "
            "'all' is Pulumi's own word)"
        )
    return name


class PolicySettings(Section):
    """Policy packs run on every preview, approval plan and `up` of the environment."""

    packs: list[Path] = Field(
        default_factory=list,
        description="Pulumi policy packs (folders holding a PulumiPolicy.yaml, Python runtime; "
        "relative: to the project), e.g. policies/stackflow. Empty: no policies.",
    )
    enforcement: Literal["mandatory", "advisory", "pack"] | None = Field(
        None,
        description="How every rule is enforced: mandatory (a violation stops the run before "
        "any change), advisory (shown), or pack (as each pack says). Default from the kind "
        "(prod: mandatory, others: advisory).",
    )
    levels: dict[str, Level] = Field(
        default_factory=dict,
        description='A rule\'s own level over `enforcement`, e.g. { required-tags = "advisory" }.',
    )
    disabled: dict[str, str] = Field(
        default_factory=dict,
        description="Rules turned off here, each with the reason recorded in the run's summary, "
        'plan and records, e.g. { rds-final-snapshot = "rebuilt nightly from a dump" }.',
    )
    config: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description="A rule's settings, as its pack's config schema says, e.g. "
        '[policy.config.required-tags] tags = ["project", "cost-center"].',
    )

    @field_validator("levels", "config")
    @classmethod
    def _rules(cls, value: dict[str, Any]) -> dict[str, Any]:
        for name in value:
            _rule(name)
        return value

    @field_validator("config")
    @classmethod
    def _no_level_in_config(cls, value: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        for name, properties in value.items():
            if "enforcementLevel" in properties:
                raise ValueError(
                    f"[policy.config.{name}] enforcementLevel: set a rule's level in `levels` "
                    f'(levels = {{ {name} = "advisory" }})'
                )
        return value

    @field_validator("disabled")
    @classmethod
    def _reasons(cls, value: dict[str, str]) -> dict[str, str]:
        for name, reason in value.items():
            _rule(name)
            if not reason.strip():
                raise ValueError(
                    f"{name}: a rule is turned off with the reason why (it is recorded with "
                    f'every run), e.g. {name} = "rebuilt nightly from a dump"'
                )
            if len(reason) > REASON_MAX or any(unicodedata.category(c) == "Cc" for c in reason):
                raise ValueError(
                    f"{name}: the reason is one line of at most {REASON_MAX} characters"
                )
        return value

    @model_validator(mode="after")
    def _one_say_per_rule(self) -> PolicySettings:
        both = sorted(set(self.levels) & set(self.disabled))
        if both:
            raise ValueError(
                f"{', '.join(both)}: both in `levels` and `disabled`; a rule is either enforced "
                "at a level or turned off"
            )
        return self
