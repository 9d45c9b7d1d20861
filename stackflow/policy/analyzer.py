"""`pulumi-analyzer-policy-python`: the plugin through which the CLI starts a Python policy pack.

When the CLI finds no Python language host (the one built here has none), it starts a pack the
way it always has for packs: the analyzer plugin named `policy-python`, given the engine's
address, `.` (the pack's folder is its working directory) and the pack's runtime options as
`-name=value` (see pkg/resource/plugin/analyzer_plugin.go in pulumi/pulumi v3.259.0). Pulumi no
longer ships that plugin; ours does what it did: run `python -u -m pulumi.policy` in the virtualenv
the `-virtualenv` option names, which the staged pack points at the pack's own (`staged`).

It is installed into the Pulumi home's plugin folder, where the CLI finds it without a warning
(one found on PATH makes the CLI warn on every run).
"""

from __future__ import annotations

import re
from pathlib import Path

from stackflow.policy.packs import CONSTRAINTS
from stackflow.pulumi_cli.plugins import install_plugin, plugin_folder

NAME = "pulumi-analyzer-policy-python"
_MARKER = "# stackflow policy analyzer"

SCRIPT = f"""#!/bin/sh
{_MARKER}: runs a Python policy pack with pulumi-policy in the pack's virtualenv
virtualenv=""
for arg do
  shift
  case $arg in
    -virtualenv=*) virtualenv="${{arg#*=}}" ;;
    *) set -- "$@" "$arg" ;;
  esac
done
case $virtualenv in
  /*) : ;;
  "") echo "error: {NAME}: no -virtualenv option (the pack's PulumiPolicy.yaml names none)" >&2
      exit 1 ;;
  *) virtualenv=$PWD/$virtualenv ;;
esac
if [ ! -x "$virtualenv/bin/python" ]; then
  echo "error: {NAME}: $virtualenv is not a virtualenv (no bin/python); run stackflow again to make it" >&2
  exit 1
fi
# a pack never needs the engine's secrets (the CLI hands its plugins its whole environment)
unset PYTHONHOME PYTHONPATH PULUMI_CONFIG_PASSPHRASE PULUMI_CONFIG_PASSPHRASE_FILE PULUMI_ACCESS_TOKEN
exec "$virtualenv/bin/python" -u -m pulumi.policy "$@"
"""


def policy_version() -> str:
    """The pulumi-policy version the packs' virtualenvs pin."""
    found = re.search(r"^pulumi-policy==(\S+)$", CONSTRAINTS.read_text(), re.MULTILINE)
    assert found is not None, f"{CONSTRAINTS} pins no pulumi-policy"
    return found.group(1)


def install_analyzer(pulumi_home: Path) -> Path:
    """Write the plugin into `pulumi_home`'s plugin folder (see `install_plugin`); its path."""
    folder = plugin_folder(pulumi_home, "analyzer", "policy-python", policy_version())
    return install_plugin(folder, NAME, SCRIPT)
