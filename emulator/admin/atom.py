"""ATOM documents of the Service Bus namespace management API: parsing request entries and rendering
entries, feeds and errors.

Requests carry ``<entry><content type="application/xml"><QueueDescription>...`` in the Service Bus
``connect`` namespace (the SDK strips the ``ns1:`` prefix, see its ``ServiceBusXMLWorkaroundPolicy``);
responses are what Azure sends: an ATOM ``entry`` (``id``, ``title``, ``published``, ``updated``,
``author``, ``link``, ``content``) or a ``feed`` of them whose second ``link`` is the next page.

Request bodies are untrusted: a document type declaration is refused before parsing, so no entity
expansion can happen, and the body size is bounded by the HTTP server.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from xml.sax.saxutils import escape

ATOM_NS = "http://www.w3.org/2005/Atom"
SB_NS = "http://schemas.microsoft.com/netservices/2010/10/servicebus/connect"
XSI_NS = "http://www.w3.org/2001/XMLSchema-instance"
COUNTS_NS = "http://schemas.microsoft.com/netservices/2011/06/servicebus"
XSD_NS = "http://www.w3.org/2001/XMLSchema"

CONTENT_TYPE = "application/atom+xml;type=entry;charset=utf-8"
FEED_CONTENT_TYPE = "application/atom+xml;type=feed;charset=utf-8"
ERROR_CONTENT_TYPE = "application/xml; charset=utf-8"


class MalformedEntry(ValueError):
    """The request body is not an ATOM entry with the expected description."""


@dataclass(frozen=True, slots=True)
class Field:
    """One element of a description: its local name and its text (None for an empty element)."""

    name: str
    text: str | None
    element: ET.Element


def local(tag: str) -> str:
    """The local part of a ``{namespace}name`` tag."""
    return tag.rsplit("}", 1)[-1]


def parse_description(body: bytes, kind: str, *others: str) -> ET.Element:
    """The ``<kind>`` element (e.g. ``QueueDescription``) inside a request entry, or one of ``others``
    (the caller reads which from the element's tag).

    An empty body is an empty description of ``kind`` (every property takes its default)."""
    if not body.strip():
        return ET.Element(f"{{{SB_NS}}}{kind}")
    if b"<!DOCTYPE" in body.upper() or b"<!ENTITY" in body.upper():
        raise MalformedEntry("document type declarations are not allowed in a request body.")
    try:
        root = ET.fromstring(body)
    except ET.ParseError as exc:
        raise MalformedEntry(f"the body is not well-formed XML ({exc}).") from None
    if local(root.tag) != "entry":
        raise MalformedEntry(f"the body must be an ATOM <entry>, got <{local(root.tag)}>.")
    content = next((c for c in root if local(c.tag) == "content"), None)
    if content is None:
        raise MalformedEntry("the <entry> has no <content>.")
    wanted = (kind, *others)
    description = next((c for c in content if local(c.tag) in wanted), None)
    if description is None:
        found = ", ".join(f"<{local(c.tag)}>" for c in content) or "nothing"
        expected = " or ".join(f"<{name}>" for name in wanted)
        raise MalformedEntry(f"the <content> must hold a {expected}, found {found}.")
    return description


def fields(description: ET.Element) -> dict[str, Field]:
    """The description's child elements by lower-case local name."""
    out: dict[str, Field] = {}
    for child in description:
        name = local(child.tag)
        text = child.text.strip() if child.text is not None else None
        out[name.lower()] = Field(name, text or None, child)
    return out


def xsi_type(element: ET.Element) -> str | None:
    """The ``xsi:type`` of an element without its prefix (``d6p1:int`` → ``int``)."""
    value = element.get(f"{{{XSI_NS}}}type")
    return None if value is None else value.rsplit(":", 1)[-1]


def timestamp(value: datetime) -> str:
    return value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond:06d}" + "Z"


# ------------------------------------------------------------------------------------------ rendering

Elements = Iterable[tuple[str, object]]


def text_of(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def elements(values: Elements) -> str:
    """``<Name>value</Name>`` for each pair; a value that is already XML (``Raw``) is inserted as is."""
    parts: list[str] = []
    for name, value in values:
        if value is None:
            continue
        if isinstance(value, Raw):
            parts.append(f"<{name}{value.attributes}>{value.xml}</{name}>")
        else:
            parts.append(f"<{name}>{escape(text_of(value))}</{name}>")
    return "".join(parts)


@dataclass(frozen=True, slots=True)
class Raw:
    """Already rendered XML content for :func:`elements`, with optional attributes (leading space)."""

    xml: str
    attributes: str = ""


def counts_xml(counts: dict[str, int]) -> Raw:
    """``CountDetails`` in the ``d2p1`` namespace, as Azure writes it."""
    order = (
        "ActiveMessageCount",
        "DeadLetterMessageCount",
        "ScheduledMessageCount",
        "TransferMessageCount",
        "TransferDeadLetterMessageCount",
    )
    inner = "".join(
        f"<d2p1:{name}>{counts.get(name[0].lower() + name[1:], 0)}</d2p1:{name}>" for name in order
    )
    return Raw(inner, f' xmlns:d2p1="{COUNTS_NS}"')


def entry(
    *, base_url: str, path: str, title: str, published: datetime, updated: datetime, author: str, body: str
) -> str:
    """One ATOM entry; ``body`` is the rendered description element."""
    url = f"{base_url}/{path}?api-version=2021-05"
    return (
        f'<entry xmlns="{ATOM_NS}">'
        f"<id>{escape(url)}</id>"
        f'<title type="text">{escape(title)}</title>'
        f"<published>{timestamp(published)}</published>"
        f"<updated>{timestamp(updated)}</updated>"
        f"<author><name>{escape(author)}</name></author>"
        f'<link rel="self" href="{escape(url)}"/>'
        f'<content type="application/xml">{body}</content>'
        "</entry>"
    )


def description(kind: str, inner: str) -> str:
    return f'<{kind} xmlns="{SB_NS}" xmlns:i="{XSI_NS}">{inner}</{kind}>'


def feed(*, self_url: str, title: str, updated: datetime, entries: list[str], next_url: str | None) -> str:
    """A feed of entries; the SDK reads a second ``link`` as the next page."""
    links = f'<link rel="self" href="{escape(self_url)}"/>'
    if next_url is not None:
        links += f'<link rel="next" href="{escape(next_url)}"/>'
    return (
        '<?xml version="1.0" encoding="utf-8"?>'
        f'<feed xmlns="{ATOM_NS}">'
        f'<title type="text">{escape(title)}</title>'
        f"<id>{escape(self_url)}</id>"
        f"<updated>{timestamp(updated)}</updated>"
        f"{links}{''.join(entries)}</feed>"
    )


def error(code: int, detail: str) -> str:
    """Azure's error body: ``<Error><Code>404</Code><Detail>...</Detail></Error>``."""
    return f"<Error><Code>{code}</Code><Detail>{escape(detail)}</Detail></Error>"
