"""Deterministic message ids: the same logical message always gets the same ``MessageId``, so the broker's
duplicate detection (:mod:`shared.topology.duplicate_detection`) drops a retried send.

Two sources of "the same logical message":

* **A publish with an ``Idempotency-Key``** (the HTTP convention for a safely retried POST): the id is a
  function of the event type and the key (:func:`idempotent_message_id`).
* **What a handler publishes or sends**: a handler retried after its outgoing messages left produces them
  again in the same order, so the id is a function of the endpoint, the incoming message's id and the
  outgoing message's position among that message's outgoing messages (:func:`outgoing_message_id`).

Both are UUIDv5 (RFC 9562 §5.5: SHA-1 over a namespace UUID and a name) over a fixed Busbar namespace per
source: deterministic across processes and releases (unlike ``hash()``), the same length whatever the key
(a MessageId holds at most 128 characters), a GUID as NServiceBus and ServiceControl expect message ids to
look, and no client text (a key may carry an order number or an e-mail) copied onto the message. The
parts are joined with a newline, which a key cannot hold (:func:`idempotency_key_problem`), so two
different (type, key) pairs never name the same string.
"""

from __future__ import annotations

import uuid

PUBLISH_NAMESPACE = uuid.UUID("6f1c1d0e-5b1a-4c55-9a53-7d2f3b1e8a01")
"""Fixed namespace of the ids of idempotent publishes: changing it changes every id (never do)."""
OUTGOING_NAMESPACE = uuid.UUID("2b7e6a4c-93d2-4f0e-8c61-0e5a9d4b7c12")
"""Fixed namespace of the ids of handlers' outgoing messages: changing it changes every id (never do)."""

MAX_IDEMPOTENCY_KEY_LENGTH = 128
"""The longest key accepted: Service Bus's limit on a MessageId (128 characters), so a client whose
keys are its own message ids can always use them, and a bound on what a request may make us hash."""


def idempotency_key_problem(key: str) -> str | None:
    """What is wrong with ``key`` as an ``Idempotency-Key`` (``None``: nothing): empty, longer than
    :data:`MAX_IDEMPOTENCY_KEY_LENGTH`, or holding a character that is not printable (a control character
    such as a newline, or an unassigned one): a key is meant to be written in a log and typed back."""
    if not key.strip():
        return "the Idempotency-Key header is empty: send a non-empty key, or no header"
    if len(key) > MAX_IDEMPOTENCY_KEY_LENGTH:
        return (
            f"the Idempotency-Key is {len(key)} characters long; at most {MAX_IDEMPOTENCY_KEY_LENGTH} "
            "are allowed (the length of a Service Bus MessageId)"
        )
    bad = next((c for c in key if not c.isprintable()), None)
    if bad is not None:
        return (
            f"the Idempotency-Key holds the non-printable character U+{ord(bad):04X} at position "
            f"{key.index(bad)}; use printable characters only"
        )
    return None


def idempotent_message_id(event_type: str, key: str) -> str:
    """The ``MessageId`` of publishing ``event_type`` under ``key``: the same for the same pair."""
    return str(uuid.uuid5(PUBLISH_NAMESPACE, f"{event_type}\n{key}"))


def outgoing_message_id(endpoint: str, incoming_message_id: str, position: int) -> str:
    """The ``MessageId`` of the ``position``-th (from 0) message ``endpoint`` published or sent while
    handling the message whose id is ``incoming_message_id``."""
    return str(uuid.uuid5(OUTGOING_NAMESPACE, f"{endpoint}\n{incoming_message_id}\n{position}"))
