"""An HTTP function's return value made into the response by ``azure_functions_runtime``'s own encoder.

The runtime encodes the value for the ``$return`` HTTP binding (``bindings.meta.to_outgoing_proto``, in the
worker process) and the host answers with what it got: an ``RpcHttp`` (from a ``func.HttpResponse``) or a
string. Anything else fails the invocation in Azure with the runtime's ``TypeError`` ("unable to encode
outgoing TypedData: unsupported type "http" for Python type "dict""), ``None`` and ``bytes`` included: an
app that returned a dict here would first fail in Azure.
"""

from __future__ import annotations

from typing import Any

from devhost.channel.protocol import HttpOutput


def _set_cookie(cookie: Any) -> str:
    """One ``RpcHttpCookie`` as the Set-Cookie value the host writes for it."""
    parts = [f"{cookie.name}={cookie.value}"]
    if cookie.domain.value:
        parts.append(f"Domain={cookie.domain.value}")
    if cookie.path.value:
        parts.append(f"Path={cookie.path.value}")
    if cookie.HasField("max_age"):
        parts.append(f"Max-Age={int(cookie.max_age.value)}")
    if cookie.secure.value:
        parts.append("Secure")
    if cookie.http_only.value:
        parts.append("HttpOnly")
    return "; ".join(parts)


def http_output_of(typed: Any) -> HttpOutput:
    """The response the host makes of an HTTP function's encoded return value (``TypedData``)."""
    kind = typed.WhichOneof("data")
    if kind == "string":
        return HttpOutput(200, {}, typed.string.encode("utf-8"), "text/plain; charset=utf-8")
    http = typed.http
    headers = {name: value for name, value in http.headers.items() if name.lower() != "content-type"}
    cookies = [_set_cookie(cookie) for cookie in http.cookies]
    if cookies:
        headers["Set-Cookie"] = ", ".join(cookies)
    content_type = next((v for k, v in http.headers.items() if k.lower() == "content-type"), None)
    body_kind = http.body.WhichOneof("data")
    if body_kind is None:
        body = b""
    elif body_kind == "bytes":
        body = http.body.bytes
    else:
        body = str(getattr(http.body, body_kind)).encode("utf-8")
    return HttpOutput(int(http.status_code or 200), headers, body, content_type)
