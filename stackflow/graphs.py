"""Which graph a project runs: the module its stackflow.toml names (`graph`, by default
`graph.nodes`), whose `GRAPH` every flow, task and command walks.

The module is a dotted path resolved against the project's folder first (so a project of its
own, or a test's fixture project, declares its graph beside its stackflow.toml), then on Python's
path (the committed `graph/nodes.py` of this checkout). Loaded once per process and folder: the
nodes' tasks are the same objects wherever the graph is read.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.util
import os
import sys
import tomllib
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from stackflow import PROJECT_ROOT
from stackflow.errors import SettingsError, echo

if TYPE_CHECKING:
    from stackflow.dag import StackGraph
    from stackflow.settings import Settings

DEFAULT_GRAPH = "graph.nodes"
PROJECT_FILE = "stackflow.toml"


def graph_of(settings: Settings) -> StackGraph:
    """The graph these settings' project runs.

    Raises:
        SettingsError: the module cannot be found or loaded, or declares no GRAPH.
    """
    return load_graph(settings.project_dir, settings.graph)


def project_graph(project_dir: Path | None = None) -> StackGraph:
    """The graph of a project read without its other settings (for commands that need none):
    the folder STACKFLOW_PROJECT_DIR names, else this checkout.

    Raises:
        SettingsError: as `graph_of`, or a stackflow.toml that is not TOML.
    """
    root = Path(project_dir or os.environ.get("STACKFLOW_PROJECT_DIR") or PROJECT_ROOT)
    return load_graph(root, graph_setting(root))


def graph_setting(project_dir: Path) -> str:
    """The `graph` key of the project's stackflow.toml (the default when it has none).

    Raises:
        SettingsError: a file that is not TOML, or a value that is not a dotted module path.
    """
    path = project_dir / PROJECT_FILE
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return DEFAULT_GRAPH
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise SettingsError(f"{path}: cannot be read as TOML ({exc})") from None
    value = data.get("graph", DEFAULT_GRAPH)
    if not isinstance(value, str) or not all(p.isidentifier() for p in value.split(".")):
        raise SettingsError(
            f"{path}: graph = {echo(str(value))}; accepted: a dotted module path such as "
            f"{DEFAULT_GRAPH!r}, resolved against the project's folder"
        )
    return value


def load_graph(project_dir: Path, module: str) -> StackGraph:
    """The `GRAPH` of `module`, resolved against `project_dir` first (see the module).

    Raises:
        SettingsError: naming the setting, the module and what is accepted.
    """
    return _load(project_dir.resolve(), module)


@functools.lru_cache(maxsize=16)
def _load(project_dir: Path, module: str) -> StackGraph:
    from stackflow.dag import StackGraph

    loaded = _module(project_dir, module)
    graph = getattr(loaded, "GRAPH", None)
    if not isinstance(graph, StackGraph):
        raise SettingsError(
            f"graph = {module!r} ({loaded.__file__}): the module declares no GRAPH; accepted: a "
            "module whose GRAPH is a stackflow.dag.StackGraph (see graph/nodes.py)"
        )
    return graph


def _module(project_dir: Path, module: str) -> ModuleType:
    path = project_dir.joinpath(*module.split(".")).with_suffix(".py")
    try:
        found = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        found = None
    if path.is_file() and not (found and found.origin and Path(found.origin).resolve() == path):
        # the project's own module, beside its stackflow.toml: loaded under a name of its own
        name = f"_stackflow_graph_{hashlib.sha256(str(path).encode()).hexdigest()[:12]}"
        if name in sys.modules:
            return sys.modules[name]
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        loaded = importlib.util.module_from_spec(spec)
        sys.modules[name] = loaded
        try:
            spec.loader.exec_module(loaded)
        except BaseException:
            del sys.modules[name]
            raise
        return loaded
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name and not module.startswith(exc.name):
            raise  # the graph's module was found; something it imports is missing
        raise SettingsError(
            f"graph = {module!r}: no such module in {project_dir} or on Python's path; accepted: "
            f"a dotted module path such as {DEFAULT_GRAPH!r} (graph/nodes.py in the project's "
            "folder)"
        ) from None
