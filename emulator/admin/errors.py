"""Errors of the ATOM management API, with Azure's status codes and detail texts.

Azure answers ``<Error><Code>404</Code><Detail>Entity 'ns:Queue:q' was not found. ...</Detail></Error>``;
the SDK maps 401 to ``ClientAuthenticationError``, 404 to ``ResourceNotFoundError``, 409 to
``ResourceExistsError`` and everything else to ``HttpResponseError`` with the detail as its message.
"""

from __future__ import annotations

MORE = "To know more visit https://aka.ms/sbResourceMgrExceptions."


class AdminError(Exception):
    """A refused request: the HTTP status and Azure's detail text."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


def bad_request(detail: str, sub_code: int = 40000) -> AdminError:
    return AdminError(400, f"SubCode={sub_code}. {detail} {MORE}")


def not_found(namespace: str, kind: str, path: str) -> AdminError:
    """``kind`` and ``path`` in Azure's tracker form: ``Queue``/``q``, ``Topic``/``t|sub|rule``."""
    return AdminError(404, f"Entity '{namespace}:{kind}:{path}' was not found. {MORE}")


def already_exists(namespace: str, kind: str, path: str) -> AdminError:
    return AdminError(
        409,
        f"SubCode=40900. Conflict. The messaging entity '{namespace}:{kind}:{path}' already exists. {MORE}",
    )
