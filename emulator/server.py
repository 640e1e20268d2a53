"""The emulator process: AMQP listener, management/health HTTP listener, namespace and store wired
together, runnable in the foreground (CLI) or on a background thread (tests, devhost)."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from emulator.amqp.connection import Connection
from emulator.amqp.nodes import Nodes
from emulator.arm.auth import generate_token
from emulator.arm.management import ManagementOptions, ManagementServer
from emulator.auth import DEFAULT_KEY, DEFAULT_KEY_NAME, SasAuthority
from emulator.broker.namespace import Namespace
from emulator.broker.properties import EmulatorConfig, default_config
from emulator.broker.store import Store
from emulator.forwarding_graph import ForwardingSource, cycle_warnings, dangling_forwards
from emulator.identity import IdentityAuthority
from emulator.identity_endpoint import TOKEN_PATH
from emulator.tier import Sku

log = logging.getLogger("emulator")

# Cloud quota: concurrent AMQP connections per namespace.
MAX_CONNECTIONS = 5000
# Largest delivery accepted on the wire (Premium's 100 MB message limit plus framing).
MAX_DELIVERY_BYTES = 101 * 1024 * 1024
# Unfinished multi-frame deliveries one connection may hold across all its links: one largest delivery
# plus headroom. Azure does not document one; without it 4 links x 95 MiB grew the process to 410 MB.
MAX_CONNECTION_BUFFER_BYTES = 128 * 1024 * 1024
# A connection must finish the protocol header, SASL and open within this time or it is closed.
# Azure does not document its figure; 30 s is far above what a real client needs (a few round trips),
# and idle sockets that never speak no longer hold slots of the connection quota forever.
HANDSHAKE_TIMEOUT_SECONDS = 30.0


@dataclass(slots=True)
class EmulatorOptions:
    """How to run one emulator instance."""

    config: EmulatorConfig = field(default_factory=default_config)
    data_dir: Path | None = None  # None: in memory
    host: str = "127.0.0.1"
    amqp_port: int = 5672
    management_port: int = 5300
    key_name: str = DEFAULT_KEY_NAME
    key: str = DEFAULT_KEY
    max_connections: int = MAX_CONNECTIONS
    # ARM on the management port: the bearer token it accepts (None: a random one, see
    # Emulator.management_token), HTTPS on a second port, and which subscription id / resource group
    # it answers for (None: any).
    management_token: str | None = None
    management_tls: bool = False
    management_tls_port: int = 5301
    # HTTPS (admin API) and AMQP over TLS on one port, the namespace's host as the SDK reaches it through a
    # fully qualified namespace (AMQP always on 5671 there); needs management_tls. None: not served.
    amqps_port: int | None = None
    arm_subscription_id: str | None = None
    arm_resource_group: str | None = None
    # The namespace's tier: what ARM and $namespaceinfo report, and the message size rules (emulator.tier).
    sku: Sku = Sku.STANDARD


class AmqpServer:
    """Accepts AMQP connections for one namespace."""

    def __init__(
        self,
        namespace: Namespace,
        authority: SasAuthority,
        identity: IdentityAuthority,
        max_connections: int,
        clock: Callable[[], float],
    ) -> None:
        self.namespace = namespace
        self.authority = authority
        self.identity = identity
        self.clock = clock
        self.nodes = Nodes(self)
        self.max_connections = max_connections
        self.max_delivery_bytes = MAX_DELIVERY_BYTES
        self.max_connection_buffer_bytes = MAX_CONNECTION_BUFFER_BYTES
        self.handshake_timeout = HANDSHAKE_TIMEOUT_SECONDS
        self.connections: set[Connection] = set()

    def admit(self, connection: Connection) -> bool:
        if len(self.connections) >= self.max_connections:
            return False
        self.connections.add(connection)
        return True

    def forget(self, connection: Connection) -> None:
        self.connections.discard(connection)

    def protocol(self) -> Connection:
        return Connection(self)


class Emulator:
    """One running emulator: start it, read its ports and connection string, stop it."""

    def __init__(self, options: EmulatorOptions) -> None:
        self.options = options
        self.store = Store(None if options.data_dir is None else options.data_dir / "emulator.sqlite3")
        self.namespace = Namespace(options.config.namespace.name, self.store, sku=options.sku)
        self.authority = SasAuthority({options.key_name: options.key})
        self.identity = IdentityAuthority.load(options.data_dir)
        self.amqp = AmqpServer(
            self.namespace, self.authority, self.identity, options.max_connections, time.time
        )
        self.amqp_port = options.amqp_port
        self.management_port = options.management_port
        self.management_token = options.management_token or generate_token()
        self.management_tls_port: int | None = None  # set by start() when management_tls is on
        self.management_ca_file: Path | None = None  # the CA certificate HTTPS clients verify against
        self.amqps_port: int | None = None  # set by start() when amqps_port and management_tls are on
        # With TLS: a PYTHONPATH entry whose certifi trusts the CA (the SDK's AMQP client reads only certifi).
        self.certifi_trust: Path | None = None
        self._servers: list[asyncio.base_events.Server] = []
        self._load_entities()
        self.management = ManagementServer(
            self.namespace,
            ManagementOptions(
                host=options.host,
                port=options.management_port,
                token=self.management_token,
                tls=options.management_tls,
                tls_port=options.management_tls_port,
                amqps_port=options.amqps_port,
                data_dir=options.data_dir,
                subscription_id=options.arm_subscription_id,
                resource_group=options.arm_resource_group,
            ),
            endpoint=lambda: f"sb://localhost:{self.amqp_port}/",
            authority=self.authority,
            identity=self.identity,
            amqp=self.amqp.protocol,
        )

    def _load_entities(self) -> None:
        """Create the config's entities; entities created at run time (ARM) are kept across restarts."""
        namespace = self.options.config.namespace
        with self.store.transaction():
            for queue in namespace.queues:
                self.namespace.create_queue(queue.name, queue.properties)
            for topic in namespace.topics:
                self.namespace.create_topic(topic.name, topic.properties)
                for subscription in topic.subscriptions:
                    self.namespace.create_subscription(
                        topic.name, subscription.name, subscription.properties, list(subscription.rules)
                    )
            self.namespace.restore_runtime_entities()
        self.startup_warnings = topology_warnings(self.namespace)
        for warning in self.startup_warnings:
            log.warning("%s", warning)

    @property
    def connection_string(self) -> str:
        o = self.options
        return (
            f"Endpoint=sb://localhost:{self.amqp_port};SharedAccessKeyName={o.key_name};"
            f"SharedAccessKey={o.key};UseDevelopmentEmulator=true;"
        )

    @property
    def admin_connection_string(self) -> str | None:
        """What ``ServiceBusAdministrationClient.from_connection_string`` takes: the HTTPS management
        port (the client always speaks HTTPS; pass ``connection_verify=<management CA file>``).
        ``ServiceBusClient`` takes it too: ``UseDevelopmentEmulator=true`` makes it speak plain AMQP to
        that port, which the port accepts beside TLS.

        None without TLS."""
        if self.management_tls_port is None:
            return None
        o = self.options
        return (
            f"Endpoint=sb://localhost:{self.management_tls_port};SharedAccessKeyName={o.key_name};"
            f"SharedAccessKey={o.key};UseDevelopmentEmulator=true;"
        )

    @property
    def identity_endpoint(self) -> str:
        """``IDENTITY_ENDPOINT`` for an app whose managed identity the emulator stands in for."""
        return f"http://127.0.0.1:{self.management_port}{TOKEN_PATH}"

    @property
    def identity_header(self) -> str:
        """``IDENTITY_HEADER``: the secret the token endpoint wants in ``X-IDENTITY-HEADER``."""
        return self.identity.identity_header

    @property
    def fully_qualified_namespace(self) -> str | None:
        """``host:port`` where both the admin client (HTTPS) and ServiceBusClient (AMQP over TLS, which
        the SDK always opens on 5671 for a namespace name) reach this emulator; None without that port."""
        return None if self.amqps_port is None else f"localhost:{self.amqps_port}"

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self.namespace.bind_loop(loop)
        self.namespace.start()
        amqp = await loop.create_server(self.amqp.protocol, self.options.host, self.options.amqp_port)
        self.amqp_port = amqp.sockets[0].getsockname()[1]
        self._servers = [amqp]
        await self.management.start()
        self.management_port = self.management.port
        self.management_tls_port = self.management.tls_port
        self.management_ca_file = self.management.ca_file
        self.amqps_port = self.management.amqps_port
        self.certifi_trust = self.management.certifi_trust

    async def stop(self) -> None:
        for server in self._servers:
            server.close()
        for connection in list(self.amqp.connections):
            connection.close_with_error("amqp:connection:forced", "The emulator is shutting down.")
        await self.management.stop()
        for server in self._servers:
            await server.wait_closed()
        self._servers = []
        self.store.close()


def topology_warnings(namespace: Namespace) -> list[str]:
    """Forwarding destinations that do not exist and forwarding cycles, in the loaded namespace."""
    sources: list[ForwardingSource] = []
    labels: dict[str, str] = {}
    edges: dict[str, list[str]] = {}
    for entity in namespace.message_entities():
        kind = "Queue" if entity.kind == "queue" else "Subscription"
        props = entity.props
        sources.append(
            ForwardingSource(kind, entity.path, props.forward_to, props.forward_dead_lettered_messages_to)
        )
        key = entity.path.lower()
        labels[key] = f"{kind.lower()} '{entity.path}'"
        target = namespace.send_target(props.forward_to) if props.forward_to else None
        if target is not None:
            edges[key] = [target.path.lower()]
    for topic in namespace.topics.values():
        labels[topic.path.lower()] = f"topic '{topic.path}'"
        edges[topic.path.lower()] = [sub.path.lower() for sub in topic.subscriptions.values()]
    warnings = dangling_forwards(sources, lambda path: namespace.send_target(path) is not None)
    warnings.extend(cycle_warnings(edges, lambda key: labels.get(key, key)))
    return warnings


class EmulatorThread:
    """Runs an :class:`Emulator` on its own event loop thread (tests and in-process embedding)."""

    def __init__(self, options: EmulatorOptions) -> None:
        self.options = options
        self.loop = asyncio.new_event_loop()
        self.emulator: Emulator | None = None
        self._thread = threading.Thread(target=self._run, name="emulator", daemon=True)
        self._ready = threading.Event()
        self._error: BaseException | None = None

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.emulator = Emulator(self.options)
            self.loop.run_until_complete(self.emulator.start())
        except BaseException as exc:
            self._error = exc
            if self.emulator is not None:
                self.emulator.store.close()
            self._ready.set()
            return
        self._ready.set()
        self.loop.run_forever()

    def start(self) -> Emulator:
        self._thread.start()
        self._ready.wait(30)
        if self._error is not None:
            raise self._error
        assert self.emulator is not None
        return self.emulator

    def call[T](self, fn: Callable[[], T]) -> T:
        """Run ``fn`` on the emulator's loop thread and return its result."""
        return asyncio.run_coroutine_threadsafe(_call(fn), self.loop).result(30)

    def stop(self) -> None:
        if self.emulator is not None and self.loop.is_running():
            asyncio.run_coroutine_threadsafe(self._shutdown(self.emulator), self.loop).result(30)
            self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(30)
        self.loop.close()

    async def _shutdown(self, emulator: Emulator) -> None:
        await emulator.stop()
        # As asyncio.run does on exit: what is still pending (a connection accepted while stopping, a
        # timer) is cancelled and run to its end here. Left pending, it would be destroyed by the garbage
        # collector mid-await, in whichever test runs then, with its socket still open.
        current = asyncio.current_task()
        pending = [task for task in asyncio.all_tasks() if task is not current]
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending, timeout=5)
        await self.loop.shutdown_asyncgens()


async def _call[T](fn: Callable[[], T]) -> T:
    return fn()
