"""Which app settings the code reads, found by reading the source (AST), not by running it.

A name counts as read when it is a string literal (or a module-level string constant) in:
``os.environ[...]``, ``os.environ.get(...)``, ``os.getenv(...)``; ``get``/subscript on a mapping named
like a settings mapping (``env``, ``values``, ``environ``, ``settings``, ``app_settings``) when the name
looks like an app setting; ``AppSetting("NAME", ...)`` declarations; ``%NAME%`` binding expressions and
``connection="NAME"`` arguments in decorators (the Functions host resolves those from app settings).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

SETTINGS_MAPPING_NAMES = frozenset({"env", "values", "environ", "settings", "app_settings"})
BINDING_EXPRESSION = re.compile(r"%([A-Za-z_][A-Za-z0-9_]*)%")
# SCREAMING_SNAKE_CASE, a ``__`` section (ServiceBusConnection__fullyQualifiedNamespace) or a host prefix.
_SETTING_LIKE = re.compile(
    r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+|\w+__\w+|(?:AzureWebJobs|ServiceBus|AzureServiceBus)\w*"
)


@dataclass(frozen=True, slots=True, order=True)
class SettingRead:
    """One place the code reads (or declares, or binds) an app setting."""

    name: str
    path: str
    line: int
    kind: str  # environ | mapping | declaration | binding | connection


def looks_like_setting(name: str) -> bool:
    """True for names shaped like app settings (not ordinary dictionary keys such as ``Topic``)."""
    return _SETTING_LIKE.fullmatch(name) is not None


def _module_constants(tree: ast.Module) -> dict[str, str]:
    constants: dict[str, str] = {}
    for node in tree.body:
        targets: list[ast.expr] = []
        value: ast.expr | None = None
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            for target in targets:
                if isinstance(target, ast.Name):
                    constants[target.id] = value.value
    return constants


def _is_os_environ(node: ast.expr) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and node.attr == "environ"
        and isinstance(node.value, ast.Name)
        and node.value.id == "os"
    ) or (isinstance(node, ast.Name) and node.id == "environ")


def _mapping_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _imported_modules(tree: ast.Module) -> dict[str, str]:
    """Local alias -> dotted module name, for ``import a.b as c`` and ``from a import b`` (b a module)."""
    modules: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Import):
            for alias in node.names:
                modules[alias.asname or alias.name.split(".")[0]] = (
                    alias.name if alias.asname else alias.name.split(".")[0]
                )
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                modules[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return modules


class _Scanner(ast.NodeVisitor):
    def __init__(
        self, path: str, constants: dict[str, str], modules: dict[str, str], root: Path | None
    ) -> None:
        self.path = path
        self.constants = constants
        self.modules = modules
        self.root = root
        self.found: list[SettingRead] = []

    def _text(self, node: ast.expr | None) -> str | None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.Name):
            return self.constants.get(node.id)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and self.root is not None:
            # ``runtime.CONNECTION``: a string constant of another module of the app
            module = self.modules.get(node.value.id)
            if module:
                return _constants_of_module(self.root, module).get(node.attr)
        return None

    def _add(self, name: str | None, node: ast.AST, kind: str) -> None:
        if name:
            self.found.append(SettingRead(name, self.path, getattr(node, "lineno", 0), kind))

    def _read_from(self, receiver: ast.expr, key: ast.expr | None, node: ast.AST) -> None:
        name = self._text(key)
        if name is None:
            return
        if _is_os_environ(receiver):
            self._add(name, node, "environ")
        elif _mapping_name(receiver) in SETTINGS_MAPPING_NAMES and looks_like_setting(name):
            self._add(name, node, "mapping")

    def visit_Subscript(self, node: ast.Subscript) -> None:
        self._read_from(node.value, node.slice, node)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        first = node.args[0] if node.args else None
        if isinstance(func, ast.Attribute) and func.attr in ("get", "pop", "setdefault"):
            self._read_from(func.value, first, node)
        elif (
            isinstance(func, ast.Attribute)
            and func.attr == "getenv"
            and isinstance(func.value, ast.Name)
            and func.value.id == "os"
        ) or (isinstance(func, ast.Name) and func.id == "getenv"):
            self._add(self._text(first), node, "environ")
        elif (isinstance(func, ast.Name) and func.id == "AppSetting") or (
            isinstance(func, ast.Attribute) and func.attr == "AppSetting"
        ):
            keyword = next((k.value for k in node.keywords if k.arg == "name"), None)
            self._add(self._text(first if first is not None else keyword), node, "declaration")
        self.generic_visit(node)

    def _visit_decorated(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        for decorator in node.decorator_list:
            for sub in ast.walk(decorator):
                if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
                    for match in BINDING_EXPRESSION.finditer(sub.value):
                        self._add(match.group(1), sub, "binding")
                if isinstance(sub, ast.keyword) and sub.arg == "connection":
                    self._add(self._text(sub.value), sub.value, "connection")
        self.generic_visit(node)

    visit_FunctionDef = _visit_decorated
    visit_AsyncFunctionDef = _visit_decorated
    visit_ClassDef = _visit_decorated


def _constants_of_module(root: Path, module: str) -> dict[str, str]:
    base = root.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return _module_constants(ast.parse(candidate.read_text(encoding="utf-8")))
    return {}


def scan_source(source: str, path: str = "<source>", root: Path | None = None) -> list[SettingRead]:
    """Every app-setting read in one module's source (``root``: resolve constants of imported modules)."""
    tree = ast.parse(source, filename=path)
    scanner = _Scanner(path, _module_constants(tree), _imported_modules(tree), root)
    scanner.visit(tree)
    return sorted(scanner.found)


def app_source_files(root: Path) -> list[Path]:
    """The deployed app's Python files: function_app.py, app/, functions/ and shared/."""
    files = [root / "function_app.py"]
    for package in ("app", "functions", "shared"):
        files.extend(sorted((root / package).rglob("*.py")))
    return [f for f in files if f.is_file() and "__pycache__" not in f.parts]


def scan_app(root: Path) -> list[SettingRead]:
    """Every app-setting read in the deployed app's code."""
    found: list[SettingRead] = []
    for file in app_source_files(root):
        found.extend(scan_source(file.read_text(encoding="utf-8"), file.relative_to(root).as_posix(), root))
    return sorted(found)
