"""The launch flags a framework release defines, read from its released source (the package
index's sdist or wheel, :mod:`~pocforge.frameworks.patching.releases`), so a launch for a
node's vLLM 0.11.2 is judged by 0.11.2's flags, not by the CPU build installed here.

The source is read, not imported. A release's parser modules import its whole engine with a
dependency set of its own: vLLM 0.11.2's argument module pulls in ``diskcache``, 0.23.0's
``gguf``, neither in the kit's environment, and stand-in modules for what is missing broke
torch's own optional imports. So each framework's ways of defining its flags are read from the
syntax tree, layout by layout, and a release whose layout is not one of them is said to be
unreadable (``FlagsUnreadable``), never passed. Each reader is tested against the framework's
own parser on the release installed here (tests/frameworks/test_release_flags.py).

Names only: a value is judged on the node by the release's own parser (bring-up's launch
check), where its modules import.
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from pocforge.frameworks.patching.releases import source

FLAG = re.compile(r"--[A-Za-z0-9][A-Za-z0-9_-]*\Z")


class FlagsUnreadable(Exception):
    """The release's source does not define its flags in a layout the kit reads."""


@dataclass(frozen=True)
class ReleaseFlags:
    framework: str
    version: str
    layout: str  # how the release defines them, in words
    flags: frozenset[str]

    def unknown(self, argv: Iterable[str]) -> list[str]:
        """The long flags of ``argv`` the release does not define, as written."""
        out = []
        for arg in argv:
            if not arg.startswith("--") or arg == "--":
                continue
            written = name = arg.split("=", 1)[0]
            if self.framework == "vllm":
                # vLLM's FlexibleArgumentParser takes --a_b as --a-b, and --json-flag.key
                # as one key of --json-flag
                name = name.split(".", 1)[0].replace("_", "-")
            if name not in self.flags:
                out.append(written)
        return out


def release_flags(framework: str, version: str, cache: Path) -> ReleaseFlags:
    """``framework`` ``version``'s server flags (the release fetched into ``cache`` once);
    raises ReleaseError when the index has no such release, FlagsUnreadable when its layout
    is not one the kit reads."""
    if framework not in READERS:
        raise FlagsUnreadable(f"no reader of {framework}'s flag definitions")
    root = source(framework, version, cache)
    layout, flags = READERS[framework](root / framework)
    return ReleaseFlags(framework, version, layout, frozenset(flags))


# ---------------------------------------------------------------- the syntax tree


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _name(node: ast.AST) -> str:
    """The last name of a call's function or an expression: ``a.b.add_argument`` -> add_argument."""
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return ""


def _calls(tree: ast.AST, name: str) -> Iterator[ast.Call]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _name(node) == name:
            yield node


def _flag_strings(nodes: Iterable[ast.AST]) -> list[str]:
    return [
        n.value
        for n in nodes
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and FLAG.match(n.value)
    ]


def _negated(flags: Iterable[str]) -> set[str]:
    """argparse's BooleanOptionalAction adds --no-X beside each --X."""
    return {"--no-" + f[2:] for f in flags}


def _keyword(call: ast.Call, name: str) -> ast.AST | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def _boolean_optional(call: ast.Call) -> bool:
    """The call names ``action=argparse.BooleanOptionalAction``."""
    action = _keyword(call, "action")
    return action is not None and _name(action) == "BooleanOptionalAction"


def _classes(tree: ast.Module) -> dict[str, ast.ClassDef]:
    return {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}


def _annotated_fields(cls: ast.ClassDef) -> dict[str, ast.expr]:
    """A class body's annotated names (a dataclass's fields), ClassVars left out."""
    return {
        n.target.id: n.annotation
        for n in cls.body
        if isinstance(n, ast.AnnAssign)
        and isinstance(n.target, ast.Name)
        and "ClassVar" not in ast.unparse(n.annotation)
    }


def _is_bool(annotation: ast.expr) -> bool:
    return re.search(r"\bbool\b", ast.unparse(annotation)) is not None


def _parts(annotation: ast.expr) -> set[str]:
    """The members of a union annotation, as written: ``bool | str | None`` -> {bool, str, None}."""
    text = ast.unparse(annotation)
    inner = re.fullmatch(r"(?:Optional|InitVar)\[(.*)\]", text)
    return {part.strip() for part in (inner.group(1) if inner else text).split("|")}


# ---------------------------------------------------------------- vLLM


class _Package:
    """A release's package: its classes found by name (``class X`` in any module), parsed
    only where found."""

    def __init__(self, root: Path):
        self.root = root
        self._trees: dict[Path, ast.Module] = {}  # each module parsed once per reading
        self._fields: dict[str, dict[str, ast.expr]] = {}

    def tree(self, path: Path) -> ast.Module:
        if path not in self._trees:
            self._trees[path] = _tree(path)
        return self._trees[path]

    @functools.cached_property
    def _where(self) -> dict[str, list[Path]]:
        """Each class name -> the modules that define one of that name (one pass of a regex
        over the package's text; only those modules are parsed)."""
        where: dict[str, list[Path]] = {}
        for path in sorted(self.root.rglob("*.py")):
            text = path.read_text(encoding="utf-8", errors="replace")
            for name in re.findall(r"^class (\w+)", text, re.M):
                where.setdefault(name, []).append(path)
        return where

    def find(self, name: str) -> ast.ClassDef | None:
        for path in self._where.get(name, []):
            found = _classes(self.tree(path)).get(name)
            if found is not None:
                return found
        return None

    def fields(self, name: str) -> dict[str, ast.expr]:
        """The fields of class ``name`` with its bases' (found in the package) before them."""
        if name in self._fields:
            return self._fields[name]
        cls = self.find(name)
        if cls is None:
            raise FlagsUnreadable(f"class {name} (whose fields are flags) is not in the source")
        out: dict[str, ast.expr] = {}
        for base in cls.bases:
            if isinstance(base, ast.Name) and self.find(base.id) is not None:
                out.update(self.fields(base.id))
        out.update(_annotated_fields(cls))
        self._fields[name] = out
        return out


def _vllm(package: Path) -> tuple[str, set[str]]:
    """vLLM from about 0.8 on: ``make_arg_parser`` (``entrypoints/openai/cli_args.py``, in
    0.3x ``entrypoints/launchers/cli_args.py``) adds its own flags, the frontend's (a loop
    over a dataclass's fields, ``get_kwargs(cls)``) and ``EngineArgs.add_cli_args``'s
    (``engine/arg_utils.py``: each flag named, its options from a config class's field, so
    a ``bool`` field is a BooleanOptionalAction with its --no- form)."""
    where = [package / "entrypoints" / sub / "cli_args.py" for sub in ("launchers", "openai")]
    cli = next((p for p in where if p.is_file() and "def make_arg_parser" in p.read_text()), None)
    engine = package / "engine" / "arg_utils.py"
    if cli is None or not engine.is_file():
        raise FlagsUnreadable(
            "no make_arg_parser in entrypoints/{launchers,openai}/cli_args.py beside "
            "engine/arg_utils.py (the layout of vLLM 0.8 to 0.3x)"
        )
    # from 0.2x on, a `bool | str | None` field is a flag with an optional value (no --no-)
    optional_valued = "{bool, str, type(None)}" in engine.read_text()

    def negatable(annotation: ast.expr) -> bool:
        return _is_bool(annotation) and not (
            optional_valued and _parts(annotation) == {"bool", "str", "None"}
        )

    pkg = _Package(package)
    flags = {"--help"}
    flags |= _vllm_named(pkg.tree(engine), pkg, negatable)
    flags |= _vllm_named(pkg.tree(cli), pkg, negatable)
    flags |= _vllm_frontends(pkg.tree(cli), pkg, negatable)
    return f"{cli.relative_to(package.parent)} and {engine.relative_to(package.parent)}", flags


def _vllm_named(tree: ast.Module, pkg: _Package, negatable: Callable) -> set[str]:
    """Each ``add_argument("--flag", …)`` of a module, with its --no- form where it is a
    BooleanOptionalAction: named as one, or ``**kwargs["field"]`` of ``get_kwargs(Config)``
    for a bool field of that config."""
    sources: dict[str, str] = {}  # a kwargs variable -> the config class it was made from
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            call = node.value
            if _name(call) == "get_kwargs" and call.args and isinstance(call.args[0], ast.Name):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        sources[target.id] = call.args[0].id
    flags: set[str] = set()
    for call in _calls(tree, "add_argument"):
        named = _flag_strings(call.args)
        flags.update(named)
        if _boolean_optional(call):
            flags |= _negated(named)
        for options in _unpacked(call):
            config = sources.get(_name(options.value))
            field = options.slice
            if config and isinstance(field, ast.Constant):
                annotation = pkg.fields(config).get(field.value)
                if annotation is not None and negatable(annotation):
                    flags |= _negated(named)
    return flags


def _unpacked(call: ast.Call) -> Iterator[ast.Subscript]:
    """The ``kwargs["field"]`` a call unpacks: ``**kwargs["f"]``, or inside
    ``**{**kwargs["f"], "default": None}``."""
    for kw in call.keywords:
        if kw.arg is not None:
            continue
        if isinstance(kw.value, ast.Subscript):
            yield kw.value
        elif isinstance(kw.value, ast.Dict):
            for key, value in zip(kw.value.keys, kw.value.values, strict=True):
                if key is None and isinstance(value, ast.Subscript):
                    yield value


def _vllm_frontends(tree: ast.Module, pkg: _Package, negatable: Callable) -> set[str]:
    """The frontend classes' flags: ``make_arg_parser`` calls ``X.add_cli_args(parser)``;
    where X's (or its base's) ``add_cli_args`` adds one flag per field of ``get_kwargs(cls)``
    in a loop, each field is a flag (``--no-`` too for a bool), and the literal flags its
    ``_customize_cli_kwargs`` adds beside them."""
    classes = _classes(tree)
    make = next(
        n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "make_arg_parser"
    )
    flags: set[str] = set()
    for call in _calls(make, "add_cli_args"):
        owner = _name(call.func.value) if isinstance(call.func, ast.Attribute) else ""
        if owner not in classes or not _generates(owner, classes):
            continue
        for field, annotation in pkg.fields(owner).items():
            flag = "--" + field.replace("_", "-")
            flags |= {flag, *(_negated([flag]) if negatable(annotation) else ())}
        for name in _lineage(owner, classes):
            for method in classes[name].body:
                if isinstance(method, ast.FunctionDef) and method.name == "_customize_cli_kwargs":
                    flags.update(_flag_strings(ast.walk(method)))
    return flags


def _lineage(name: str, classes: dict[str, ast.ClassDef]) -> list[str]:
    out = [name]
    for base in classes[name].bases:
        if isinstance(base, ast.Name) and base.id in classes:
            out += _lineage(base.id, classes)
    return out


def _generates(name: str, classes: dict[str, ast.ClassDef]) -> bool:
    """Whether class ``name``'s ``add_cli_args`` (its own or a base's) adds a flag per field
    (an ``add_argument`` with an f-string name inside a ``for``)."""
    for owner in _lineage(name, classes):
        for method in classes[owner].body:
            if isinstance(method, ast.FunctionDef) and method.name == "add_cli_args":
                return any(
                    isinstance(arg, ast.JoinedStr)
                    for loop in ast.walk(method)
                    if isinstance(loop, ast.For)
                    for call in _calls(loop, "add_argument")
                    for arg in call.args
                )
    return False


# ---------------------------------------------------------------- SGLang


def _sglang(package: Path) -> tuple[str, set[str]]:
    """SGLang: ``srt/server_args.py``'s ``add_argument`` calls name every flag (0.4, early
    0.5); later releases add one flag per field annotated ``A[T, "help"]`` or
    ``A[T, Arg(cli_name=…, aliases=…, no_cli=…)]``, the fields in ``ServerArgs`` (0.5.18) or
    in ``srt/arg_groups/fields/*.py`` (0.5.23)."""
    server_args = package / "srt" / "server_args.py"
    if not server_args.is_file():
        raise FlagsUnreadable("no srt/server_args.py")
    tree = _tree(server_args)
    flags = set(_flag_strings(a for call in _calls(tree, "add_argument") for a in call.args))
    files = [server_args]
    if any(True for _ in _calls(tree, "add_cli_args_from_dataclass")):
        files += sorted((package / "srt" / "arg_groups" / "fields").glob("*.py"))
        annotated = _sglang_annotated(tree).union(
            *(_sglang_annotated(_tree(path)) for path in files[1:])
        )
        if not annotated:
            raise FlagsUnreadable(
                "server_args.py adds flags from annotated fields, and none were found in "
                "ServerArgs or srt/arg_groups/fields/"
            )
        flags |= annotated
    if not flags:
        raise FlagsUnreadable("srt/server_args.py names no flag")
    flags.add("--help")
    where = str(server_args.relative_to(package.parent))
    if len(files) > 1:
        where += f" and the {len(files) - 1} modules of sglang/srt/arg_groups/fields"
    return where, flags


def _sglang_annotated(tree: ast.Module) -> set[str]:
    flags: set[str] = set()
    for cls in ast.walk(tree):
        if not isinstance(cls, ast.ClassDef):
            continue
        for field, annotation in _annotated_fields(cls).items():
            if not (
                isinstance(annotation, ast.Subscript)
                and _name(annotation.value) in {"A", "Annotated"}
                and isinstance(annotation.slice, ast.Tuple)
            ):
                continue
            _kind, *meta = annotation.slice.elts
            arg = next((m for m in meta if isinstance(m, ast.Call) and _name(m) == "Arg"), None)
            helped = any(isinstance(m, ast.Constant | ast.JoinedStr) for m in meta)
            if arg is None and not helped:
                continue  # registered by hand, if at all
            names = ["--" + field.replace("_", "-")]
            if arg is not None:
                no_cli = _keyword(arg, "no_cli")
                if isinstance(no_cli, ast.Constant) and no_cli.value is True:
                    continue
                cli_name = _keyword(arg, "cli_name")
                if isinstance(cli_name, ast.Constant):
                    names = [cli_name.value]
                aliases = _keyword(arg, "aliases")
                if isinstance(aliases, ast.List | ast.Tuple):
                    names += _flag_strings(aliases.elts)
                if _boolean_optional(arg):
                    names += _negated(names)
            flags.update(names)
    return flags


READERS = {"vllm": _vllm, "sglang": _sglang}
