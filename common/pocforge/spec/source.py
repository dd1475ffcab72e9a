"""Read a spec's YAML into plain data, remembering where every value came from.

PyYAML composes the node graph (keeping marks); we build the Python values ourselves so
that every field path maps to ``(file, line)``, aliases are counted as often as they are
expanded (a YAML bomb hits the budget instead of the memory), and duplicate keys are
reported instead of silently dropped.  ``include:`` inheritance is a deep merge in which
mappings merge and everything else, lists included, is replaced.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from pocforge.spec.errors import Problem, SpecError, display_path

MAX_BYTES = 1_000_000  # a POC spec is a page; anything this large is a mistake
MAX_NODES = 100_000  # expanded nodes, aliases included
MAX_DEPTH = 64
INCLUDE_KEY = "include"

FieldPath = tuple[str | int, ...]
Origin = tuple[Path, int]

_SafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_REFERENCE = re.compile(rf"^{_ENV.pattern}$")  # a whole value that is one reference


@dataclass
class Source:
    """Plain data of one (merged) spec and the origin of each field path."""

    data: Any
    origins: dict[FieldPath, Origin] = field(default_factory=dict)
    files: list[Path] = field(default_factory=list)  # every file read, the spec first

    def origin(self, path: FieldPath) -> Origin | None:
        """Where ``path`` was written, or its nearest written parent."""
        for cut in range(len(path), -1, -1):
            if path[:cut] in self.origins:
                return self.origins[path[:cut]]
        return None


class _Builder:
    """Turns a composed node graph into Python values with a budget."""

    def __init__(self, file: Path):
        self.file = file
        self.nodes = 0
        self.origins: dict[FieldPath, Origin] = {}
        self.problems: list[Problem] = []
        self._scalars = yaml.SafeLoader("")  # only its scalar constructors are used

    def build(self, node: yaml.Node, path: FieldPath = (), depth: int = 0) -> Any:
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise _Abort(f"more than {MAX_NODES} values once aliases are expanded (a YAML bomb?)")
        if depth > MAX_DEPTH:
            raise _Abort(f"nested more than {MAX_DEPTH} levels deep")
        if isinstance(node, yaml.MappingNode):
            return self._mapping(node, path, depth)
        if isinstance(node, yaml.SequenceNode):
            items = []
            for index, child in enumerate(node.value):
                self.origins[(*path, index)] = (self.file, child.start_mark.line + 1)
                items.append(self.build(child, (*path, index), depth + 1))
            return items
        try:
            return self._scalars.construct_object(node, deep=True)
        except Exception as exc:  # noqa: BLE001 - PyYAML's constructors raise assorted errors on bad tagged values
            self._problem(node, path, f"cannot read value: {getattr(exc, 'problem', None) or exc}")
            return None

    def _mapping(self, node: yaml.MappingNode, path: FieldPath, depth: int) -> dict:
        result: dict[str, Any] = {}
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                self._problem(
                    key_node, path, "YAML merge keys (<<) are not supported; use 'include:'"
                )
                continue
            if not isinstance(key_node, yaml.ScalarNode):
                self._problem(key_node, path, "keys must be plain strings")
                continue
            key = str(self._scalars.construct_object(key_node))
            if key in result:
                line = self.origins[(*path, key)][1]
                self._problem(key_node, (*path, key), f"duplicate key (first set on line {line})")
                continue
            self.origins[(*path, key)] = (self.file, key_node.start_mark.line + 1)
            result[key] = self.build(value_node, (*path, key), depth + 1)
        return result

    def _problem(self, node: yaml.Node, path: FieldPath, message: str) -> None:
        self.problems.append(Problem(self.file, node.start_mark.line + 1, dotted(path), message))


class _Abort(Exception):
    pass


def dotted(path: FieldPath) -> str:
    return ".".join(str(part) for part in path)


def read_yaml(file: Path) -> Source:
    """One YAML file as a mapping with origins; raises ``SpecError`` for anything unreadable."""
    try:
        if file.stat().st_size > MAX_BYTES:
            raise SpecError([Problem(file, None, "", f"file is larger than {MAX_BYTES} bytes")])
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError([Problem(file, None, "", "file not found")]) from None
    except IsADirectoryError:
        raise SpecError([Problem(file, None, "", "is a folder, not a YAML file")]) from None
    except UnicodeDecodeError:
        raise SpecError([Problem(file, None, "", "not UTF-8 text")]) from None
    except OSError as exc:
        raise SpecError([Problem(file, None, "", f"cannot read: {exc.strerror}")]) from None

    try:
        documents = list(yaml.compose_all(text, Loader=_SafeLoader))
    except yaml.MarkedYAMLError as exc:
        line = exc.problem_mark.line + 1 if exc.problem_mark else None
        raise SpecError(
            [Problem(file, line, "", f"not valid YAML: {exc.problem or exc}")]
        ) from None
    except (yaml.YAMLError, RecursionError) as exc:
        raise SpecError([Problem(file, None, "", f"not valid YAML: {exc}")]) from None

    documents = [doc for doc in documents if doc is not None]
    if not documents:
        raise SpecError(
            [Problem(file, None, "", "file is empty; start from pocs/_template/poc.yaml")]
        )
    if len(documents) > 1:
        raise SpecError(
            [
                Problem(
                    file,
                    documents[1].start_mark.line + 1,
                    "",
                    "holds several YAML documents; a spec is one",
                )
            ]
        )
    root = documents[0]
    if not isinstance(root, yaml.MappingNode):
        raise SpecError(
            [
                Problem(
                    file,
                    root.start_mark.line + 1,
                    "",
                    "the top level must be a mapping of sections (poc:, model:, cluster:, …)",
                )
            ]
        )

    builder = _Builder(file)
    try:
        data = builder.build(root)
    except _Abort as exc:
        raise SpecError([Problem(file, None, "", str(exc))]) from None
    except RecursionError:
        raise SpecError([Problem(file, None, "", "nested too deeply")]) from None
    if builder.problems:
        raise SpecError(builder.problems)
    return Source(data, builder.origins, [file])


def load_source(file: Path, _stack: tuple[Path, ...] = ()) -> Source:
    """A spec file with its ``include:`` chain merged in (bases first, this file last)."""
    file = file.resolve()
    if file in _stack:
        chain = " -> ".join(display_path(p) for p in (*_stack, file))
        raise SpecError([Problem(_stack[-1], None, INCLUDE_KEY, f"include cycle: {chain}")])
    source = read_yaml(file)
    includes = source.data.pop(INCLUDE_KEY, None)
    if includes is None:
        return source
    if isinstance(includes, str):
        includes = [includes]
    line = source.origins.get((INCLUDE_KEY,), (file, None))[1]
    if not isinstance(includes, list) or not all(isinstance(i, str) and i for i in includes):
        raise SpecError(
            [
                Problem(
                    file,
                    line,
                    INCLUDE_KEY,
                    "must be a path or a list of paths to other poc.yaml files",
                )
            ]
        )

    merged = Source({}, {}, [])
    for include in includes:
        target = (file.parent / include).resolve()
        if target.is_dir():
            target = target / "poc.yaml"
        if not target.is_file():
            raise SpecError(
                [
                    Problem(
                        file,
                        line,
                        INCLUDE_KEY,
                        f"included file {include!r} does not exist (looked for {target})",
                    )
                ]
            )
        base = load_source(target, (*_stack, file))
        _merge_into(merged, base)
    _merge_into(merged, source)
    merged.files = [file, *(f for f in merged.files if f != file)]
    return merged


def _merge_into(target: Source, overlay: Source) -> None:
    """Deep-merge ``overlay`` into ``target``: mappings merge, anything else replaces."""

    def merge(base: Any, over: Any, path: FieldPath) -> Any:
        if isinstance(base, dict) and isinstance(over, dict):
            out = dict(base)
            for key, value in over.items():
                out[key] = merge(base[key], value, (*path, key)) if key in base else value
                if key not in base or not (isinstance(base[key], dict) and isinstance(value, dict)):
                    _drop_origins(target.origins, (*path, key))
            return out
        return over

    target.data = merge(target.data, overlay.data, ())
    target.origins.update(overlay.origins)
    target.files.extend(f for f in overlay.files if f not in target.files)


def _drop_origins(origins: dict[FieldPath, Origin], prefix: FieldPath) -> None:
    for path in [p for p in origins if p[: len(prefix)] == prefix]:
        del origins[path]


def interpolate_env(
    source: Source, allowed: set[FieldPath], references: set[FieldPath] = frozenset()
) -> tuple[list[Problem], list[Problem]]:
    """Replace ``${VAR}`` in secret-capable fields; keep it as written where a value may
    be a reference (``references``: a mapping's path ending in ``*``), if it is the whole
    value; anywhere else it is an error.

    ``allowed`` holds field paths with ``"*"`` standing for any list index.  Returns the
    problems and, separately, the secrets whose variable is not set: those stay as written
    (``validate`` on a laptop needs no token; whatever uses the secret must ask for it).
    """
    problems: list[Problem] = []
    unset: list[Problem] = []

    def visit(value: Any, path: FieldPath) -> Any:
        if isinstance(value, dict):
            return {k: visit(v, (*path, k)) for k, v in value.items()}
        if isinstance(value, list):
            return [visit(v, (*path, i)) for i, v in enumerate(value)]
        if not isinstance(value, str) or "${" not in value:
            return value
        file, line = source.origin(path) or (None, None)
        pattern = tuple("*" if isinstance(p, int) else p for p in path)
        if (*pattern[:-1], "*") in references:
            if not _REFERENCE.match(value):
                problems.append(
                    Problem(
                        file,
                        line,
                        dotted(path),
                        "a secret here is a reference and nothing else: write `${NAME}` alone",
                    )
                )
            return value  # the nodes take it by reference (pocforge.runtimes.secrets)
        if pattern not in allowed:
            problems.append(
                Problem(
                    file,
                    line,
                    dotted(path),
                    "${…} interpolation is only allowed in secret fields (tokens, passwords); write the value here",
                )
            )
            return value
        missing = [name for name in _ENV.findall(value) if name not in os.environ]
        if missing:
            unset.append(
                Problem(
                    file,
                    line,
                    dotted(path),
                    f"environment variable {missing[0]} is not set; export it first",
                )
            )
            return value
        return _ENV.sub(lambda m: os.environ[m.group(1)], value)

    source.data = visit(source.data, ())
    return problems, unset
