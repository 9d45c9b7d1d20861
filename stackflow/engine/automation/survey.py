"""The survey preview: one preview that names every resource type and function the local cloud
does not serve, instead of stopping at the first.

The local cloud's plugins refuse an unserved type in Check, and the engine then abandons the
whole preview; so while a survey runs, the plugins write each unserved token down and answer with
what the program gave (an unserved function: an empty result), and the preview goes on to its
end. Nothing is created: a preview creates nothing, and an update never runs in survey mode.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from stackflow.engine.base import Listener, OperationResult, StackSpec
from stackflow.errors import OperationCancelled, StackError, UnservedTypes, stopped_at

if TYPE_CHECKING:
    from stackflow.engine.automation.workspace import Workspaces


@contextlib.contextmanager
def surveying(ws: Workspaces, spec: StackSpec) -> Iterator[Path]:
    """Inside, the stack's `pulumi` commands run with the local cloud's plugins in survey mode
    (see `stackflow.localcloud.plugin.survey`), writing to the file yielded; it is removed on the
    way out."""
    from stackflow.localcloud.paths import surveys_dir

    folder = surveys_dir(ws.settings.localcloud_root)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{uuid.uuid4().hex}.tsv"
    ws.survey_into(spec, path)
    try:
        yield path
    finally:
        ws.survey_into(spec, None)
        path.unlink(missing_ok=True)


def survey_preview(
    ws: Workspaces, spec: StackSpec, listener: Listener, preview: Callable[[], OperationResult]
) -> OperationResult:
    """`preview()` of `spec`; on the local cloud, run as a survey (on AWS a plain preview: the real
    provider serves every type).

    Raises:
        UnservedTypes: naming every unserved type and function the preview met; when the preview
            failed after meeting some (a program that trips on an unserved function's empty
            answer), also where it stopped: the program's own error.
        As the preview otherwise.
    """
    if not ws.local:
        return preview()
    from stackflow.localcloud.plugin.survey import FUNCTION, RESOURCE, read_survey

    failure: StackError | None = None
    result: OperationResult | None = None
    with surveying(ws, spec) as survey:
        try:
            result = preview()
        except OperationCancelled:
            raise
        except StackError as exc:
            failure = exc
        found = read_survey(survey)
    if found:
        resources = [token for kind, token in found if kind == RESOURCE]
        functions = [token for kind, token in found if kind == FUNCTION]
        stopped = None
        if failure is not None:
            listener.line(f"the survey preview then failed: {failure.reason}")
            stopped = stopped_at(failure)
        raise UnservedTypes(spec.label, resources, functions, stopped)
    if failure is not None:
        raise failure
    assert result is not None
    return result
