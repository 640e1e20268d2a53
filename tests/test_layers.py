"""The package rules of docs/architecture.md, checked on the source: which package may import which, which
modules stay free of the Azure SDKs, and which import loops may exist.

Imports are read from the syntax tree, wherever they appear (module level, inside functions, under
``TYPE_CHECKING``): a lazy import is still a dependency.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("app", "devhost", "emulator", "functions", "shared", "spark")
RUNTIME = "azure_functions_runtime"
CODEC = "shared.amqp.encoding"
"""Busbar's one AMQP codec (docs/architecture.md, "The seam to the AMQP wire")."""
RECEIVING_SIDE = (
    "shared.amqp.async_receiver",
    "shared.amqp.connection",
    "shared.amqp.deliveries",
    "shared.amqp.received",
    "shared.amqp.receiver",
    "shared.amqp.session_lock",
    "shared.amqp.values",
)
"""The seam's receiving side, which devhost's trigger listeners use: AMQP and the value model only."""


@dataclass(frozen=True, slots=True)
class Rule:
    """Modules under ``scope`` must not import anything under one of ``forbidden``."""

    scope: str
    forbidden: tuple[str, ...]
    why: str
    exempt: tuple[
        str, ...
    ] = ()  # modules (and packages) of ``scope`` the rule does not cover (each says why)
    allowed: tuple[str, ...] = ()  # modules under ``forbidden`` that ``scope`` may import all the same


RULES = (
    Rule("shared", ("app", "functions", "devhost", "emulator"), "the library knows nothing of what uses it"),
    Rule("shared", ("azure.functions",), "Busbar's logic runs outside the Functions host too"),
    Rule("app", ("functions", "devhost", "emulator"), "the composition root sits below the triggers"),
    Rule(
        "app",
        ("app.endpoints.sample",),
        "the sample can be switched off (BUSBAR_SAMPLE_ENDPOINTS) or deleted: only discovery finds it",
        exempt=("app.endpoints.sample",),
    ),
    Rule(
        "functions",
        ("app.endpoints.sample",),
        "the sample can be switched off (BUSBAR_SAMPLE_ENDPOINTS) or deleted: only discovery finds it",
    ),
    Rule(
        "app.endpoints",
        ("azure.functions", "functions", "app.discovery", "app.services", "app.bootstrap", "app.runtime"),
        "an endpoint module is contracts and handlers: discovery imports it (so it cannot import what "
        "imports discovery), and handlers never import azure.functions",
    ),
    Rule("functions", ("devhost", "emulator"), "the triggers run in Azure, where neither exists"),
    Rule("spark", ("app", "functions", "devhost", "emulator"), "the replay job ships without the app"),
    Rule(
        "devhost",
        ("app", "functions", "shared", "spark", "emulator"),
        "devhost hosts any function app",
        # The CLI's --with-emulator starts an emulator beside the host (make run); the host itself never
        # knows which Service Bus it talks to.
        exempt=("devhost.__main__",),
        # Busbar's one AMQP codec and the value classes it gives, with which the host side reads the bytes
        # it hands the worker and writes each value as the .NET host does; and the receiving side of the
        # seam to the wire, through which its trigger listeners receive and settle (issue 39 item 1). None
        # brings Busbar's logic along: pinned below.
        allowed=("shared.envelope.properties", CODEC, *RECEIVING_SIDE),
    ),
    Rule(
        CODEC,
        ("shared",),
        "the emulator and devhost import Busbar's AMQP codec: it must not bring Busbar's logic along",
        # Its own modules, and the typed-value model it reads and writes (issue 39 item 2).
        allowed=(CODEC, "shared.envelope.properties"),
    ),
    Rule(
        CODEC,
        ("azure", "proton", "uamqp"),
        "the emulator, which never imports an SDK, speaks the wire with the codec: it stays stdlib-only",
    ),
    *(
        Rule(
            module,
            ("shared",),
            "devhost's listeners import the seam's receiving side: it must not bring Busbar's logic along",
            # The seam's own modules, the codec, and the value model.
            allowed=(*RECEIVING_SIDE, CODEC, "shared.envelope.properties"),
        )
        for module in RECEIVING_SIDE
    ),
    Rule(
        "shared.envelope.properties",
        ("shared",),
        "devhost, the emulator and the codec import the value model: it must not bring Busbar's logic along",
    ),
    Rule(
        "devhost",
        ("devhost.worker",),
        "the host reaches the function code only through the worker channel (in Azure: another process)",
        exempt=("devhost.worker",),  # the worker package itself
    ),
    Rule(
        "devhost",
        (RUNTIME,),
        "the runtime keeps one app per process in module globals and changes os.environ, sys.path, the "
        "working directory and logging: it runs in the worker process, never in the host's",
        # What the worker process runs, and the reference indexer (python -m devhost.worker.index_app, a
        # process of its own).
        exempt=("devhost.worker",),
    ),
    Rule(
        "devhost.worker",
        (
            "devhost.host",
            "devhost.servicebus",
            "devhost.http",
            "devhost.storage",
            "devhost.timer_trigger",
            "devhost.dispatcher",
            "devhost.channel.process_worker",
            *("devhost.testing", "devhost.__main__"),
            "aiohttp",
        ),
        "the worker knows the host only through the protocol",
    ),
    Rule(
        "emulator",
        ("app", "functions", "shared", "spark", "devhost"),
        "the emulator is its own product",
        # Busbar's one AMQP codec and its typed-value model (the AMQP integer widths, float, char, symbol):
        # stdlib-only and importing nothing else of Busbar (pinned above), so the emulator and the app read
        # and write the wire with one codec and hold a property's AMQP type with the same classes (issue 39
        # items 1 and 2).
        allowed=(CODEC, "shared.envelope.properties"),
    ),
    Rule("emulator", ("azure",), "the SDKs are the emulator's clients, never its code"),
    Rule(
        "emulator.broker",
        ("emulator.amqp", "emulator.arm", "emulator.admin", "emulator.server", "emulator.config"),
        "the broker sits below every front end and below the file reader",
    ),
    Rule(
        "emulator.encoding",
        ("emulator.broker", "emulator.amqp", "emulator.arm", "emulator.admin", "emulator.server"),
        "the encoding is the bottom layer",
    ),
    Rule("emulator.filters", ("emulator.amqp", "emulator.arm", "emulator.admin"), "filters are broker logic"),
)

# Domain logic that is pure: no SDK, no host, no I/O library, not even through what it imports.
PURE_MODULES = (
    "shared.contracts",
    "shared.delivery",
    "shared.messages",
    "shared.envelope",
    "shared.entity_paths",
    "shared.amqp.encoding.application_properties",
    "shared.amqp.encoding.codec",
    "shared.amqp.encoding.sections",
    "shared.amqp.encoding.types",
    "shared.rate_limit",
    "shared.handlers.dispatch",
    "shared.handlers.endpoints",
    "shared.redrive.decision",
    "shared.redrive.guards",
    "shared.redrive.policy",
    "shared.router.decision",
    "shared.archive.rows",
    "shared.monitoring.histogram",
    "shared.monitoring.minute_stats",
    "shared.monitoring.recorder",
    "shared.monitoring.view",
    "shared.ops.message_view",
    "shared.telemetry.conventions",
    "shared.telemetry.propagation",
    "shared.topology.delivery_paths",
    "shared.topology.desired",
    "shared.topology.names",
    "shared.topology.plan",
    "shared.topology.quotas",
    "shared.topology.routing",
    "shared.topology.rule_filters",
    "shared.topology.validation",
)
# The OpenTelemetry *API* is pure (without an SDK its tracers and meters are no-ops); its SDK exports.
IMPURE_ROOTS = ("azure", "httpx", "pyarrow", "fsspec", "pyspark", "grpc", "opentelemetry.sdk")

# The protocol state machine: a connection owns sessions, a session owns links, and each refers back.
ALLOWED_LOOPS = (frozenset({"emulator.amqp.connection", "emulator.amqp.session", "emulator.amqp.links"}),)


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path, root: Path) -> Iterator[str]:
    """Every module ``path`` imports, relative imports resolved."""
    name = module_name(path, root)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            yield target
            # ``from pkg import module`` depends on the submodule too.
            yield from (f"{target}.{alias.name}" for alias in node.names)


def source_tree(root: Path, packages: Iterable[str]) -> dict[str, set[str]]:
    """Module -> the modules it imports, for every module of ``packages`` under ``root``."""
    graph: dict[str, set[str]] = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            graph[module_name(path, root)] = set(imports_of(path, root))
    return graph


def under(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def violations(graph: dict[str, set[str]], rules: Iterable[Rule] = RULES) -> list[str]:
    found = []
    for rule in rules:
        for module, imported in sorted(graph.items()):
            if not under(module, rule.scope) or any(under(module, exempt) for exempt in rule.exempt):
                continue
            bad = {
                t
                for t in imported
                if any(under(t, forbidden) for forbidden in rule.forbidden)
                and not any(under(t, allowed) for allowed in rule.allowed)
            }
            # ``from x import y`` yields x and x.y: report the import once, as its module.
            for target in sorted(t for t in bad if t.rpartition(".")[0] not in bad):
                found.append(f"{module} imports {target}: {rule.why}")
    return found


def impure_imports(graph: dict[str, set[str]], pure: Iterable[str]) -> list[str]:
    """Imports of an SDK or I/O library by a pure module or by any module it reaches."""
    found = []
    for start in pure:
        seen, todo = {start}, [start]
        while todo:
            module = todo.pop()
            for target in sorted(graph.get(module, ())):
                if any(under(target, root) for root in IMPURE_ROOTS):
                    found.append(f"{start} reaches {target} (imported by {module})")
                elif target in graph and target not in seen:
                    seen.add(target)
                    todo.append(target)
    return found


def import_loops(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """Strongly connected components of more than one module (Tarjan), over modules in ``graph``."""
    edges = {m: {t for t in targets if t in graph and t != m} for m, targets in graph.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    loops: list[frozenset[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in edges[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                loops.append(frozenset(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return loops


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return source_tree(ROOT, PACKAGES)


def test_no_package_imports_what_its_layer_forbids(graph: dict[str, set[str]]) -> None:
    assert violations(graph) == []


def test_pure_domain_modules_reach_no_sdk_and_no_io_library(graph: dict[str, set[str]]) -> None:
    assert set(PURE_MODULES) <= set(graph), set(PURE_MODULES) - set(graph)
    assert impure_imports(graph, PURE_MODULES) == []


def test_the_only_import_loop_is_the_protocol_state_machine(graph: dict[str, set[str]]) -> None:
    loops = [loop for loop in import_loops(graph) if loop not in ALLOWED_LOOPS]
    assert loops == [], [sorted(loop) for loop in loops]


def test_the_checks_catch_a_broken_rule_a_lazy_import_and_a_loop(tmp_path: Path) -> None:
    """The checker itself: a forbidden import (even inside a function), a relative one, and a cycle."""
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "__init__.py").write_text("")
    (tmp_path / "shared" / "a.py").write_text("def f():\n    import emulator.server\n")
    (tmp_path / "shared" / "b.py").write_text("from . import c\n")
    (tmp_path / "shared" / "c.py").write_text("from .b import thing\n")
    (tmp_path / "emulator").mkdir()
    (tmp_path / "emulator" / "__init__.py").write_text("")
    (tmp_path / "emulator" / "broker").mkdir()
    (tmp_path / "emulator" / "broker" / "__init__.py").write_text("")
    (tmp_path / "emulator" / "broker" / "queue.py").write_text("from ..amqp.codec import encode\n")
    tree = source_tree(tmp_path, ("shared", "emulator"))

    assert violations(tree) == [
        "shared.a imports emulator.server: the library knows nothing of what uses it",
        "emulator.broker.queue imports emulator.amqp.codec: the broker sits below every front end and "
        "below the file reader",
    ]
    assert import_loops(tree) == [frozenset({"shared.b", "shared.c"})]


def test_devhost_may_import_the_value_model_and_nothing_else_of_shared_envelope(tmp_path: Path) -> None:
    """The exemption lets exactly ``shared.envelope.properties`` through: its package, a sibling, or a module
    the value model itself might come to import are still refused."""
    (tmp_path / "devhost").mkdir()
    (tmp_path / "devhost" / "__init__.py").write_text("")
    (tmp_path / "devhost" / "listener.py").write_text(
        "from shared.envelope.properties import Char\nimport shared.envelope.properties\n"
    )
    (tmp_path / "devhost" / "reader.py").write_text("from shared.envelope import properties\n")
    (tmp_path / "devhost" / "copier.py").write_text("from shared.envelope.sdk import to_envelope\n")
    (tmp_path / "shared" / "envelope").mkdir(parents=True)
    (tmp_path / "shared" / "__init__.py").write_text("")
    (tmp_path / "shared" / "envelope" / "__init__.py").write_text("")
    (tmp_path / "shared" / "envelope" / "properties.py").write_text(
        "from shared.messages import IncomingMessage\n"
    )
    (tmp_path / "shared" / "envelope" / "sdk.py").write_text("")
    tree = source_tree(tmp_path, ("devhost", "shared"))

    assert violations(tree) == [
        "devhost.copier imports shared.envelope.sdk: devhost hosts any function app",
        "devhost.reader imports shared.envelope: devhost hosts any function app",
        "shared.envelope.properties imports shared.messages: devhost, the emulator and the codec import the "
        "value model: it must not bring Busbar's logic along",
    ]


def test_the_emulator_may_import_the_codec_and_the_codec_stays_stdlib_only(tmp_path: Path) -> None:
    """The emulator's exemption lets exactly ``shared.amqp.encoding`` (and the value model) through: Busbar's
    AMQP client beside it in ``shared.amqp`` is refused, and so is the codec importing an SDK, proton or
    Busbar's logic."""
    for package in ("emulator", "emulator/amqp", "shared", "shared/amqp", "shared/amqp/encoding"):
        (tmp_path / package).mkdir(parents=True, exist_ok=True)
        (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / "emulator" / "amqp" / "frames.py").write_text(
        "from shared.amqp.encoding.codec import decode_value\nfrom shared.envelope.properties import UInt\n"
    )
    (tmp_path / "emulator" / "amqp" / "client.py").write_text(
        "from shared.amqp.receiver import EntityReceiver\n"
    )
    (tmp_path / "shared" / "amqp" / "encoding" / "codec.py").write_text(
        "from shared.amqp.encoding.types import Array\nfrom shared.envelope.properties import UInt\n"
    )
    (tmp_path / "shared" / "amqp" / "encoding" / "types.py").write_text("import proton\n")
    (tmp_path / "shared" / "amqp" / "encoding" / "sections.py").write_text(
        "def f():\n    from shared.messages import IncomingMessage\n    from azure.servicebus import x\n"
    )
    tree = source_tree(tmp_path, ("emulator", "shared"))

    logic = "the emulator and devhost import Busbar's AMQP codec: it must not bring Busbar's logic along"
    stdlib = "the emulator, which never imports an SDK, speaks the wire with the codec: it stays stdlib-only"
    assert violations(tree) == [
        f"shared.amqp.encoding.sections imports shared.messages: {logic}",
        f"shared.amqp.encoding.sections imports azure.servicebus: {stdlib}",
        f"shared.amqp.encoding.types imports proton: {stdlib}",
        "emulator.amqp.client imports shared.amqp.receiver: the emulator is its own product",
    ]


def test_the_host_side_reaches_neither_the_worker_side_nor_the_runtime(tmp_path: Path) -> None:
    """The host side of devhost imports nothing of ``devhost.worker`` nor of ``azure_functions_runtime``
    (lazily neither); the worker's modules import each other, the runtime and the channel's wire freely, and
    nothing of the host's triggers."""
    for package in ("devhost", "devhost/worker", "devhost/channel", "devhost/servicebus"):
        (tmp_path / package).mkdir(parents=True, exist_ok=True)
        (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / "devhost" / "worker" / "process_loop.py").write_text(
        "from devhost.worker.runtime_driver import RuntimeDriver\nfrom devhost.channel.frames import read\n"
        "from devhost.servicebus.settlement import REGISTRY\n"
    )
    (tmp_path / "devhost" / "worker" / "runtime_driver.py").write_text(
        "def f():\n    import azure_functions_runtime\n"
    )
    (tmp_path / "devhost" / "host.py").write_text("def f():\n    from devhost.worker import process_loop\n")
    (tmp_path / "devhost" / "channel" / "http_return.py").write_text(
        "def f():\n    from azure_functions_runtime.bindings.meta import to_outgoing_proto\n"
    )
    (tmp_path / "devhost" / "dispatcher.py").write_text(
        "from devhost.worker.runtime_driver import RuntimeDriver\n"
    )
    tree = source_tree(tmp_path, ("devhost",))

    assert violations(tree) == [
        "devhost.dispatcher imports devhost.worker.runtime_driver: the host reaches the function code only "
        "through the worker channel (in Azure: another process)",
        "devhost.host imports devhost.worker: the host reaches the function code only through the worker "
        "channel (in Azure: another process)",
        "devhost.channel.http_return imports azure_functions_runtime.bindings.meta: the runtime keeps one "
        "app per process in module globals and changes os.environ, sys.path, the working directory and "
        "logging: it runs in the worker process, never in the host's",
        "devhost.worker.process_loop imports devhost.servicebus.settlement: the worker knows the host only "
        "through the protocol",
    ]
