"""Errors raised by the kube layer, one class per way a call can fail.

Callers branch on the class (``NotFound``, ``Conflict``...) instead of on
status codes, and every message is meant to be shown to a person as is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class KubeError(Exception):
    """Base class of every error from this package."""


class ConfigError(KubeError):
    """A kubeconfig or credential is missing, unreadable or malformed."""


class Unreachable(KubeError):
    """The API server could not be reached (connection refused, TLS, timeout).

    ``sent`` is ``False`` when the request certainly never reached the server.
    """

    def __init__(self, message: str, *, sent: bool = True) -> None:
        super().__init__(message)
        self.sent = sent


class DeadlineExceeded(Unreachable):
    """The call took longer than its overall deadline (``Limits.request_timeout``).

    The server accepted the connection but did not answer completely in time
    (it is overloaded, or trickles bytes).  The request may have reached it;
    it is not sent again.
    """


class Saturated(Unreachable):
    """Not sent: the client's slots for this server are held by requests stuck in flight.

    ``Limits.max_in_flight`` requests are already waiting on the server and
    the oldest has waited ``Limits.stall_after`` seconds or more, so one slow
    server cannot hold every caller.
    """

    def __init__(self, message: str, *, sent: bool = False) -> None:
        super().__init__(message, sent=sent)


class ClientClosed(Unreachable):
    """Not sent: this client was retired (replaced, or its Cluster deleted); get a new one."""

    def __init__(self, message: str, *, sent: bool = False) -> None:
        super().__init__(message, sent=sent)


class ProtocolError(KubeError):
    """The server's answer could not be understood (not JSON, a cut-off line)."""


class TooLarge(ProtocolError):
    """A response body or a watch event was larger than the client accepts.

    ``limit`` is the cap in bytes (``Limits.max_response_bytes`` or
    ``Limits.max_watch_line_bytes``); the connection is dropped.
    """

    def __init__(self, message: str, *, limit: int) -> None:
        super().__init__(message)
        self.limit = limit


class NotLeader(KubeError):
    """A write refused locally: this process does not (validly) hold its Lease.

    Raised by a leader-election fence before the request is sent, so nothing
    reached the API server.
    """


class ApiError(KubeError):
    """The API server answered with an error status."""

    def __init__(self, status: int, reason: str, message: str, body: Any = None,
                 headers: Mapping[str, str] | None = None) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message
        self.body = body
        self.headers: Mapping[str, str] = headers or {}

    @property
    def retryable(self) -> bool:
        """Whether the same request may succeed later (throttling, server trouble)."""
        return self.status == 429 or self.status >= 500


class NotFound(ApiError):
    """404: the object (or its kind) does not exist."""


class Conflict(ApiError):
    """409: stale ``resourceVersion`` on update, or the object already exists."""


class Invalid(ApiError):
    """422: the object failed validation (CRD schema, admission)."""


class Unauthorized(ApiError):
    """401: the credentials were not accepted (expired token, wrong certificate)."""

    token: str | None = None
    """The bearer token that was refused, if one was sent."""


class Forbidden(ApiError):
    """403: RBAC denied the request."""


class Gone(ApiError):
    """410: a watch's ``resourceVersion`` is too old; relist."""


_BY_STATUS: dict[int, type[ApiError]] = {
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    410: Gone,
    422: Invalid,
}


def from_status(status: int, body: Any, headers: Mapping[str, str] | None = None) -> ApiError:
    """Build the most specific error for an HTTP status and a ``Status`` body."""
    reason = ""
    message = ""
    if isinstance(body, dict):
        reason = str(body.get("reason", ""))
        message = str(body.get("message", ""))
    elif body:
        message = str(body)[:500]
    cls = _BY_STATUS.get(status, ApiError)
    return cls(status, reason or "Error", message or "(no message)", body, headers)
