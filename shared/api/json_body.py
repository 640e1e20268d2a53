"""Which request bodies the API reads as JSON, by their ``Content-Type``.

``application/json`` and the structured-syntax suffix ``application/<anything>+json`` (RFC 6839 §3.1, e.g.
``application/vnd.acme.order+json``) are JSON; their parameters are accepted and ignored: RFC 8259 §11
defines no ``charset`` for JSON ("adding one really has no effect on compliant recipients"), whose text is
UTF-8 (§8.1). Any other type (``text/plain``, ``application/x-www-form-urlencoded``...) is refused with 415
rather than parsed as JSON anyway: a client sending one is confused about what it sends.

A request with no ``Content-Type`` at all is read as JSON: ``curl --data`` aside, the clients that omit it
(scripts, ``Invoke-RestMethod`` with a string body...) mean JSON, and refusing them would break callers
that worked before the check.
"""

from __future__ import annotations

from collections.abc import Mapping

from shared.api.protocol import UnsupportedMediaType

JSON_MEDIA_TYPE = "application/json"
CONTENT_TYPE = "content-type"


def is_json_media_type(content_type: str) -> bool:
    """Whether ``content_type`` (a header value, parameters included) names JSON."""
    media_type = content_type.split(";", 1)[0].strip().lower()
    if media_type == JSON_MEDIA_TYPE:
        return True
    kind, _, subtype = media_type.partition("/")
    return kind == "application" and subtype.endswith("+json") and len(subtype) > len("+json")


def require_json_content_type(headers: Mapping[str, str]) -> None:
    """Raise :class:`UnsupportedMediaType` naming the expected type when the request's ``Content-Type``
    (``headers`` by lower-case name) is present and is not JSON; no header at all is accepted."""
    content_type = headers.get(CONTENT_TYPE, "").strip()
    if not content_type or is_json_media_type(content_type):
        return
    raise UnsupportedMediaType(
        f"the body's Content-Type is {content_type!r}; the event must be sent as {JSON_MEDIA_TYPE}",
        [
            f"send Content-Type: {JSON_MEDIA_TYPE} (application/*+json and a charset parameter are "
            "accepted too)"
        ],
        expected=JSON_MEDIA_TYPE,
    )
