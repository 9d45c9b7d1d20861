"""Rehearse a Pulumi Python project of your own with stackflow's engine (`flows/run.py rehearse`).

project       Pulumi.yaml, the stack files, the program's folder and entry file
config        the stack's config: Pulumi.yaml defaults, then Pulumi.<stack>.yaml's values
secrets       secure values, decrypted with the project's passphrase
dependencies  the project's pins and imports, against stackflow's environment
program       the entry file, run as Pulumi's Python host runs it, in a process of its own
rehearsal     prepare, then run: a survey preview, then the update (or a destroy)
"""

from __future__ import annotations

from stackflow.rehearse.project import ProjectError, PulumiProject, load_project
from stackflow.rehearse.rehearsal import Action, Outcome, Rehearsal, listener_for, prepare, run

__all__ = [
    "Action",
    "Outcome",
    "ProjectError",
    "PulumiProject",
    "Rehearsal",
    "listener_for",
    "load_project",
    "prepare",
    "run",
]
