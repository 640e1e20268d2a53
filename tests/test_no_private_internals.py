"""No product module reads or writes a third-party package's private internals (issue 39, item 1).

Read from the syntax tree of every product module (not tests): a private name is one with a single leading
underscore (``_x``; dunders such as ``__name__`` are Python's public protocol). It is a finding when a
product module

* imports a private module or name of a third-party package (``from azure.servicebus._pyamqp import ...``,
  ``from uamqp import c_uamqp``, the Cython binding that :data:`INTERNAL_MODULES` names),
* reads or writes an attribute ``obj._x`` that the module does not define itself (a private name is
  private to its module: ``self._x``, a module's ``_helper`` and the like are the module's business; a name it
  never defines is someone else's), or
* names such an attribute in a call (``getattr(obj, "_x")``, ``setattr``, a helper given the name; a
  module-level string constant is resolved), which also catches a module storing its own attributes on a
  third-party object.

Each finding is ``"<path>: <name>"`` (no line numbers, so edits elsewhere do not churn the list). The ones
that remain are listed in :data:`ALLOWED`, each with why it cannot yet go; an entry whose finding has gone
fails too, so the list only shrinks.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(60)

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("app", "devhost", "emulator", "functions", "shared", "spark")
FILES = ("function_app.py",)

DOCUMENTED = {
    # namedtuple's documented API (https://docs.python.org/3/library/collections.html#collections.namedtuple):
    # the leading underscore only keeps it apart from field names.
    "_replace": "namedtuple API",
    "_asdict": "namedtuple API",
    "_fields": "namedtuple API",
    "_make": "namedtuple API",
    # os._exit is documented (https://docs.python.org/3/library/os.html#os._exit).
    "_exit": "os._exit",
}
"""Names with a leading underscore that are public, documented API."""

INTERNAL_MODULES = {
    "uamqp.c_uamqp": "uamqp's Cython binding: not part of uamqp's documented API",
}
"""Third-party modules without a leading underscore that are internal all the same."""

SDK_INTERNALS = "azure-servicebus's private AMQP stack (_pyamqp) and transport"
TRIGGER_EDGE = (
    "the SDK-type trigger's typed application properties: the binding extension hands the function a "
    "uamqp-decoded message whose public API has only untyped values (Busbar's codec reads the bytes this "
    "re-encodes); goes when the extension hands over the model_binding_data bytes"
)

ALLOWED: dict[str, str] = {
    "shared/envelope/sdk.py: azure.servicebus._pyamqp.types": (
        "the {TYPE, VALUE} form azure-servicebus's encoder takes to send a property with its AMQP type (a "
        "long, a ubyte, ...) on Busbar's own new messages (publishes, handlers' outgoing, resume signals); "
        "the SDK has no public typed-value API. Copies of received messages go through the seam "
        "(shared.amqp.sender). Goes when those sends do too"
    ),
    "functions/trigger_properties.py: _message": TRIGGER_EDGE,
    "functions/trigger_properties.py: uamqp.c_uamqp": TRIGGER_EDGE,
}


def product_files(root: Path) -> list[Path]:
    """The product's Python modules (generated protobuf code excluded)."""
    paths = [path for package in PACKAGES for path in sorted((root / package).rglob("*.py"))]
    paths += [root / name for name in FILES if (root / name).exists()]
    return [path for path in paths if "_generated" not in path.parts]


def is_private(name: str) -> bool:
    # "_" alone names nothing (it is the replacement in re.sub(pattern, "_", text), for one).
    return len(name) > 1 and name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _third_party(module: str) -> bool:
    root = module.split(".")[0]
    return root not in PACKAGES and root not in sys.stdlib_module_names


def _private_module(module: str) -> bool:
    return any(is_private(part) for part in module.split(".")) or module in INTERNAL_MODULES


def own_private_names(tree: ast.Module) -> set[str]:
    """Private names a module defines itself: functions, classes, assigned names and ``self``/``cls``
    attributes, parameters, import aliases."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.ctx, ast.Store)
            and isinstance(node.value, ast.Name)
            and node.value.id in ("self", "cls")
        ):
            names.add(node.attr)
        elif isinstance(node, ast.alias) and node.asname:
            names.add(node.asname)
    return {name for name in names if is_private(name)}


def _string_constants(tree: ast.Module) -> dict[str, str]:
    constants: dict[str, str] = {}
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    constants[target.id] = node.value.value
    return constants


def findings_in(tree: ast.Module, own: set[str]) -> Iterator[str]:
    """The private third-party names ``tree`` imports, reads or writes."""
    constants = _string_constants(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _third_party(alias.name) and _private_module(alias.name):
                    yield alias.name
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            if not _third_party(node.module):
                continue
            if _private_module(node.module):
                yield node.module
            for alias in node.names:
                if is_private(alias.name) or f"{node.module}.{alias.name}" in INTERNAL_MODULES:
                    yield f"{node.module}.{alias.name}"
        elif isinstance(node, ast.Attribute) and is_private(node.attr):
            if node.attr in own or node.attr in DOCUMENTED:
                continue
            if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                continue
            yield node.attr
        elif isinstance(node, ast.Call) and node.args:
            if isinstance(node.args[0], ast.Name) and node.args[0].id in ("self", "cls"):
                continue
            for argument in node.args[1:]:
                text = argument.value if isinstance(argument, ast.Constant) else None
                if isinstance(argument, ast.Name):
                    text = constants.get(argument.id)
                if (
                    isinstance(text, str)
                    and text.isidentifier()
                    and is_private(text)
                    and text not in own
                    and text not in DOCUMENTED
                ):
                    # A private name stored by name on another object: someone else's object either way.
                    yield text


def findings(root: Path) -> set[str]:
    """Every ``"<path>: <name>"`` finding in the product under ``root``."""
    paths = product_files(root)
    trees = {path: ast.parse(path.read_text(encoding="utf-8"), str(path)) for path in paths}
    return {
        f"{path.relative_to(root).as_posix()}: {name}"
        for path, tree in trees.items()
        for name in findings_in(tree, own_private_names(tree))
    }


@pytest.fixture(scope="module")
def found() -> set[str]:
    return findings(ROOT)


def test_no_product_module_touches_a_third_party_private_name_outside_the_allow_list(found: set[str]) -> None:
    unlisted = sorted(found - ALLOWED.keys())
    assert not unlisted, "private third-party names used (remove them, or list each with why):\n" + "\n".join(
        unlisted
    )


def test_every_allowed_exception_is_still_needed_and_says_why(found: set[str]) -> None:
    assert not sorted(ALLOWED.keys() - found), "allowed exceptions that are gone: delete them from ALLOWED"
    assert not [key for key, why in ALLOWED.items() if not why.strip()], "each exception says why"


def test_the_check_catches_private_imports_reads_writes_and_stored_attributes(tmp_path: Path) -> None:
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "reader.py").write_text(
        "import azure.servicebus._pyamqp.receiver\n"
        "from azure.servicebus._pyamqp import types\n"
        "from uamqp import c_uamqp\n"
        "from aiohttp import _helpers\n"
        "from collections import namedtuple\n"
        "from shared._own import thing\n"
        "_MARK = '_busbar_mark'\n"
        "class Own:\n"
        "    def __init__(self) -> None:\n"
        "        self._state = 1\n"
        "def read(message, other: Own, row):\n"
        "    setattr(message, _MARK, True)\n"
        "    getattr(message, '_frame', None)\n"
        "    message._message.clone()\n"
        "    row._replace(a=1)\n"
        "    return other._state, message.__class__.__name__\n"
    )
    assert findings(tmp_path) == {
        "shared/reader.py: azure.servicebus._pyamqp.receiver",
        "shared/reader.py: azure.servicebus._pyamqp",
        "shared/reader.py: uamqp.c_uamqp",
        "shared/reader.py: aiohttp._helpers",
        "shared/reader.py: _busbar_mark",
        "shared/reader.py: _frame",
        "shared/reader.py: _message",
    }


def test_the_product_files_are_the_tracked_ones() -> None:
    """The check reads every tracked product module (a module it missed would escape it)."""
    tracked = subprocess.run(
        ["git", "ls-files", *(f"{package}/*.py" for package in PACKAGES), *FILES],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert {ROOT / name for name in tracked} <= set(product_files(ROOT))
