"""Request/response nodes: ``$cbs`` (put-token) and ``{entity}/$management`` (lock renewal, peek,
settlement by lock token, ...). Responses go back on the session's link whose source is the node."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from emulator.amqp.links import IncomingLink, OutgoingLink
from emulator.amqp.session import Session, entity_path
from emulator.auth import SasAuthority, TokenRejected
from emulator.broker import errors
from emulator.broker.errors import BrokerError
from emulator.broker.namespace import Namespace
from emulator.broker.queue import MessageQueue
from emulator.encoding.message import decode_body_value
from emulator.identity import SERVICE_BUS_RESOURCE, IdentityAuthority
from shared.amqp.encoding.codec import DecodeError
from shared.amqp.encoding.sections import (
    AMQP_VALUE,
    APPLICATION_PROPERTIES,
    PROPERTIES,
    ParsedMessage,
    parse_message,
    section,
)
from shared.amqp.encoding.types import Array, Int, Long, Symbol, Timestamp

log = logging.getLogger("emulator.amqp")

Handler = Callable[["NodeRequest"], tuple[int, dict[str, Any] | None]]


@dataclass(slots=True)
class NodeRequest:
    """One $management request: the entity it addresses and its body."""

    namespace: Namespace
    path: str
    body: dict[str, Any]

    @property
    def scheduling_queue(self) -> MessageQueue:
        """Where scheduled messages of this entity wait: a topic's own store, or the queue."""
        topic = self.namespace.topics.get(self.path.lower())
        return topic.scheduled if topic is not None else self.namespace.receive_queue(self.path)[1]

    @property
    def queue(self) -> MessageQueue:
        """The message queue the request operates on (a topic has none: only scheduling works there)."""
        if self.namespace.send_target(self.path) is not None and self.namespace.topics.get(self.path.lower()):
            raise BrokerError(errors.NOT_ALLOWED, f"The operation is not valid on topic '{self.path}'.")
        return self.namespace.receive_queue(self.path)[1]


MAX_PEEK = 250


def _key(mapping: dict[Any, Any], name: str, default: Any = None) -> Any:
    if name in mapping:
        return mapping[name]
    return mapping.get(Symbol(name), default)


def _tokens(body: dict[str, Any]) -> list[uuid.UUID]:
    raw = _key(body, "lock-tokens")
    items = raw.items if isinstance(raw, Array) else raw
    if not isinstance(items, list | tuple) or not all(isinstance(t, uuid.UUID) for t in items):
        raise BrokerError(errors.ARGUMENT_ERROR, "'lock-tokens' must be an array of uuid.")
    return list(items)


class NodeContext(Protocol):
    """What the nodes need of the server (:class:`emulator.server.AmqpServer`), which they never import."""

    @property
    def namespace(self) -> Namespace: ...

    @property
    def authority(self) -> SasAuthority: ...

    @property
    def identity(self) -> IdentityAuthority: ...

    @property
    def clock(self) -> Callable[[], float]: ...


class Nodes:
    """Dispatches node requests arriving on incoming links."""

    def __init__(self, server: NodeContext) -> None:
        self.server = server
        self.operations: dict[str, Handler] = {
            "com.microsoft:renew-lock": self._renew_lock,
            "com.microsoft:peek-message": self._peek,
            "com.microsoft:update-disposition": self._update_disposition,
            "com.microsoft:schedule-message": self._schedule,
            "com.microsoft:cancel-scheduled-message": self._cancel_scheduled,
            "com.microsoft:receive-by-sequence-number": self._receive_deferred,
            "com.microsoft:renew-session-lock": self._renew_session_lock,
            "com.microsoft:get-session-state": self._get_session_state,
            "com.microsoft:set-session-state": self._set_session_state,
            "com.microsoft:get-message-sessions": self._list_sessions,
        }

    def handle(self, session: Session, link: IncomingLink, payload: memoryview) -> None:
        try:
            request = parse_message(payload)
        except DecodeError as exc:
            log.info("undecodable %s request: %s", link.node, exc)
            return
        message_id = request.prop(0)
        props = request.application_properties or {}
        if link.node == "$cbs":
            status, description = self._put_token(session, request, props)
            self._respond(
                session,
                link,
                message_id,
                {"status-code": Int(status), "status-description": description},
                None,
            )
            return
        operation = str(_key(props, "operation", ""))
        handler = self.operations.get(operation)
        body = decode_body_value(request)
        try:
            if handler is None:
                raise BrokerError(
                    errors.NOT_IMPLEMENTED, f"The operation '{operation}' is not supported.", 501
                )
            if not isinstance(body, dict):
                raise BrokerError(errors.ARGUMENT_ERROR, "The request body must be an amqp-value map.")
            session.connection.authorize(link.entity_path)
            status, response = handler(NodeRequest(session.namespace, link.entity_path, body))
            app = {"statusCode": Int(status), "statusDescription": "OK" if status == 200 else "No Content"}
        except BrokerError as exc:
            app = {
                "statusCode": Int(exc.status_code),
                "statusDescription": exc.description,
                "errorCondition": Symbol(exc.condition),
            }
            response = None
        self._respond(session, link, message_id, app, response)

    def _respond(
        self,
        session: Session,
        request_link: IncomingLink,
        correlation_id: Any,
        app: dict[str, Any],
        body: dict[str, Any] | None,
    ) -> None:
        reply_link = None
        for candidate in session.links.values():
            if isinstance(candidate, OutgoingLink) and entity_path(candidate.address) == entity_path(
                request_link.address
            ):
                reply_link = candidate
                break
        if reply_link is None:
            log.info("no reply link for %s on session %s", request_link.address, session.channel)
            return
        payload = (
            section(PROPERTIES, [None, None, None, None, None, correlation_id])
            + section(APPLICATION_PROPERTIES, app)
            + section(AMQP_VALUE, body)
        )
        reply_link.send_transfer(b"\x00\x00\x00\x00", payload, settled=True)

    # ------------------------------------------------------------------------------------------ $cbs

    def _put_token(self, session: Session, request: ParsedMessage, props: dict[Any, Any]) -> tuple[int, str]:
        if str(_key(props, "operation", "")) != "put-token":
            return 400, "Only put-token is supported on $cbs."
        token = decode_body_value(request)
        audience = _key(props, "name")
        if not isinstance(token, str) or not isinstance(audience, str):
            return 400, "put-token needs a string token body and a 'name' audience."
        try:
            if token.startswith("SharedAccessSignature "):
                grant = self.server.authority.check(token, audience, self.server.clock())
            else:
                # A Microsoft Entra ID token (the SDK's token credentials), valid for the whole namespace.
                # Told apart by its form, as Service Bus does: pyamqp sends type "jwt" for SAS tokens too.
                grant = self.server.identity.check(token, SERVICE_BUS_RESOURCE, self.server.clock())
        except TokenRejected as exc:
            log.info("connection %s: put-token refused: %s", session.connection.peer, exc)
            return 401, str(exc)
        if not self._audience_exists(audience):
            # Azure refuses a token for an entity that does not exist, so the SDK fails the handler's open
            # with ServiceBusAuthenticationError instead of attaching a link to nothing.
            log.info("connection %s: put-token for a missing entity: %s", session.connection.peer, audience)
            return 404, (
                f"The messaging entity '{audience}' could not be found. "
                "To know more visit https://aka.ms/sbResourceMgrExceptions."
            )
        session.connection.add_grant(grant)
        return 200, "OK"

    def _audience_exists(self, audience: str) -> bool:
        """Whether a put-token audience names the namespace or an entity (queue, topic, subscription, or
        one of their sub-queues) that exists."""
        path = entity_path(audience)
        if path.lower().endswith("/$management"):
            path = path[: -len("/$management")]
        if not path:
            return True
        namespace = self.server.namespace
        if namespace.send_target(path) is not None:
            return True
        try:
            namespace.receive_queue(path)
        except BrokerError:
            return False
        return True

    # ------------------------------------------------------------------------------------------ $management

    def _renew_lock(self, req: NodeRequest) -> tuple[int, dict[str, Any] | None]:
        expirations = [Timestamp(req.queue.renew(token)) for token in _tokens(req.body)]
        return 200, {"expirations": Array(0x83, tuple(expirations))}

    def _peek(self, req: NodeRequest) -> tuple[int, dict[str, Any] | None]:
        start = int(_key(req.body, "from-sequence-number", 0) or 0)
        count = int(_key(req.body, "message-count", 1) or 1)
        if count < 1:
            raise BrokerError(errors.ARGUMENT_OUT_OF_RANGE, "message-count must be at least 1.")
        found = req.queue.peek(max(start, 1) if start else 0, min(count, MAX_PEEK), _session_id(req.body))
        if not found:
            return 204, None
        return 200, {"messages": [{"message": m.encode_for_delivery(with_state=True)} for m in found]}

    def _update_disposition(self, req: NodeRequest) -> tuple[int, dict[str, Any] | None]:
        status = str(_key(req.body, "disposition-status", ""))
        tokens = _tokens(req.body)
        session_id = _session_id(req.body)
        for token in tokens:
            if status == "completed":
                req.queue.complete(token, session_id)
            elif status == "abandoned":
                req.queue.abandon(token, session_id)
            elif status == "defered":
                req.queue.defer(token, session_id)
            elif status == "suspended":
                reason = _key(req.body, "deadletter-reason")
                description = _key(req.body, "deadletter-description")
                req.queue.dead_letter(token, reason, description, session_id)
            else:
                raise BrokerError(errors.ARGUMENT_ERROR, f"Unknown disposition-status '{status}'.")
        return 200, {}

    def _schedule(self, req: NodeRequest) -> tuple[int, dict[str, Any] | None]:
        entries = _key(req.body, "messages")
        if not isinstance(entries, list) or not entries:
            raise BrokerError(errors.ARGUMENT_ERROR, "'messages' must be a non-empty list.")
        parsed = []
        for entry in entries:
            raw = _key(entry, "message") if isinstance(entry, dict) else None
            if not isinstance(raw, bytes):
                raise BrokerError(errors.ARGUMENT_ERROR, "each scheduled entry needs a binary 'message'.")
            try:
                parsed.append(parse_message(raw))
            except DecodeError as exc:
                raise BrokerError(errors.DECODE_ERROR, f"The message could not be decoded: {exc}") from exc
        sequence_numbers = self.server.namespace.send(req.path, parsed)
        return 200, {"sequence-numbers": Array(0x81, tuple(Long(n) for n in sequence_numbers))}

    def _cancel_scheduled(self, req: NodeRequest) -> tuple[int, dict[str, Any] | None]:
        req.scheduling_queue.cancel_scheduled(_sequence_numbers(req.body))
        return 200, {}

    def _receive_deferred(self, req: NodeRequest) -> tuple[int, dict[str, Any] | None]:
        settle_mode = int(_key(req.body, "receiver-settle-mode", 1) or 0)
        found = req.queue.receive_deferred(
            _sequence_numbers(req.body), self, settle_mode == 0, _session_id(req.body)
        )
        if not found:
            return 204, None
        messages = []
        for msg in found:
            # A message received by sequence number is still deferred, and the SDK reports its state.
            encoded = msg.encode_for_delivery(locked_until_ms=msg.locked_until_ms or None, with_state=True)
            entry: dict[str, Any] = {"message": encoded}
            if msg.lock_token is not None:
                entry["lock-token"] = msg.lock_token
            messages.append(entry)
        return 200, {"messages": messages}

    def _renew_session_lock(self, req: NodeRequest) -> tuple[int, dict[str, Any] | None]:
        return 200, {"expiration": Timestamp(req.queue.renew_session(_required_session(req.body)))}

    def _get_session_state(self, req: NodeRequest) -> tuple[int, dict[str, Any] | None]:
        return 200, {"session-state": req.queue.get_session_state(_required_session(req.body))}

    def _set_session_state(self, req: NodeRequest) -> tuple[int, dict[str, Any] | None]:
        state = _key(req.body, "session-state")
        if state is not None and not isinstance(state, bytes):
            raise BrokerError(errors.ARGUMENT_ERROR, "'session-state' must be binary or null.")
        req.queue.set_session_state(_required_session(req.body), state)
        return 200, {}

    def _list_sessions(self, req: NodeRequest) -> tuple[int, dict[str, Any] | None]:
        since = _key(req.body, "last-updated-time")
        updated_since = None if since is None or int(since) >= NO_FILTER_TIME else int(since)
        skip = int(_key(req.body, "skip", 0) or 0)
        top = int(_key(req.body, "top", 100) or 100)
        ids = req.queue.list_sessions(updated_since)[skip : skip + top]
        if not ids:
            return 204, None
        return 200, {"skip": Int(skip + len(ids)), "sessions-ids": ids}


# The SDK's "no filter" sentinel for get-message-sessions: 9999-12-31.
NO_FILTER_TIME = 253402300800000


def _session_id(body: dict[str, Any]) -> str | None:
    value = _key(body, "session-id")
    if value is not None and not isinstance(value, str):
        raise BrokerError(errors.INVALID_FIELD, errors.non_string_session_id(value))
    return value


def _required_session(body: dict[str, Any]) -> str:
    session_id = _session_id(body)
    if session_id is None:
        raise BrokerError(errors.ARGUMENT_ERROR, "'session-id' is required.")
    return session_id


def _sequence_numbers(body: dict[str, Any]) -> list[int]:
    raw = _key(body, "sequence-numbers")
    items = raw.items if isinstance(raw, Array) else raw
    if not isinstance(items, list | tuple) or not all(isinstance(n, int) for n in items):
        raise BrokerError(errors.ARGUMENT_ERROR, "'sequence-numbers' must be an array of long.")
    return [int(n) for n in items]
