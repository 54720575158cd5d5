"""Sending one webhook request: the Standard Webhooks signature, the target check, the POST.

A request carries ``webhook-id`` (the delivery's id: the same on every retry,
so a receiver deduplicates by it), ``webhook-timestamp`` (Unix seconds) and
``webhook-signature`` (``v1,<base64 HMAC-SHA256 of "id.timestamp.body">``
keyed by the secret's bytes). The secret is ``whsec_`` and base64, as
Standard Webhooks' libraries take it.

A target is checked at every attempt, after DNS resolution: only http and
https, and no private, loopback, link-local or otherwise reserved address
unless ``AGENTSTATE["WEBHOOK_ALLOW_PRIVATE"]``. The request then connects to
the very address that was checked (the hostname goes in ``Host`` and in TLS's
server name), so a name that resolves elsewhere a moment later cannot turn
it to an internal service. Redirects are not followed.
"""

import base64
import hashlib
import hmac
import http.client
import ipaddress
import re
import secrets
import socket
import ssl
import time
from dataclasses import dataclass
from typing import cast
from urllib.parse import urlsplit

from agentstate.exceptions import BadInput

SECRET_PREFIX = "whsec_"
SCHEMES = {"http": 80, "https": 443}

# What ``check_url`` accepts, as patterns: the characters of a URI (RFC 3986, others
# percent-encoded), a host name's labels, a port.
_URI_CHAR = r"(?:[A-Za-z0-9\-._~!$&'()*+,;=:@/?\[\]]|%[0-9A-Fa-f]{2})"
_URI = re.compile(rf"(?:{_URI_CHAR}|#)*")
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOST_NAME = re.compile(rf"{_LABEL}(?:\.{_LABEL})*\.?")
_PORT = r"(?:6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}|[0-9]{1,4})"
_REST = r"(?:[A-Za-z0-9\-._~!$&'()*+,;=:@/?]|%[0-9A-Fa-f]{2})"
URL_PATTERN = (
    rf"^[Hh][Tt][Tt][Pp][Ss]?://{_HOST_NAME.pattern}(?::{_PORT})?"
    rf"(?:[/?]{_REST}*)?(?:#{_REST}*)?$"
)
"""The URLs ``check_url`` accepts, bar a user name and an IPv6 address, as one pattern
(what the API's schema states)."""


class RefusedTarget(BadInput):
    """A webhook URL that may not be called."""


class Unresolved(RefusedTarget):
    """A webhook URL whose host does not resolve (now)."""


def new_secret() -> str:
    """A fresh secret in Standard Webhooks' form: ``whsec_`` and 24 random bytes in base64."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(24)).decode()


def signature(secret: str, message_id: str, timestamp: int, body: bytes) -> str:
    """The ``webhook-signature`` header's value for one request."""
    key = base64.b64decode(secret.removeprefix(SECRET_PREFIX))
    signed = f"{message_id}.{timestamp}.".encode() + body
    digest = hmac.new(key, signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def check_url(url: str) -> None:
    """A URL that could be a webhook's (scheme and host), before any DNS look-up."""
    if not _URI.fullmatch(url):
        raise RefusedTarget(
            "url: a URL is printable ASCII without spaces (percent-encode the rest).", field="url"
        )
    try:
        parts = urlsplit(url)
    except ValueError as error:  # a bracketed host that is no IPv6 address
        raise RefusedTarget(f"url: a malformed URL ({error}).", field="url") from None
    if parts.scheme not in SCHEMES:
        raise RefusedTarget("url: only http and https URLs can be webhooks.", field="url")
    if not parts.hostname:
        raise RefusedTarget("url: the URL names no host.", field="url")
    if "%" in parts.hostname:
        raise RefusedTarget(
            "url: an address with a zone (%...) cannot be a webhook's.", field="url"
        )
    if not _HOST_NAME.fullmatch(parts.hostname) and not _is_address(parts.hostname):
        raise RefusedTarget("url: the host is no host name or IP address.", field="url")
    try:
        parts.port  # noqa: B018 - read for its check
    except ValueError:
        raise RefusedTarget("url: the port is not a number from 0 to 65535.", field="url") from None


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


# NAT64's well-known prefix: its addresses reach the IPv4 address in their last 32 bits.
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


def _public(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """Whether ``ip`` is a global unicast address, and so is any IPv4 address it
    reaches (IPv4-mapped, or through NAT64)."""
    if not ip.is_global or ip.is_multicast:
        return False
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return _public(ip.ipv4_mapped)
        if ip in _NAT64:
            return _public(ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF))
    return True


def resolve(url: str, allow_private: bool) -> str:
    """The address to connect to for ``url``: its host resolved, every address it
    resolves to checked (``RefusedTarget``)."""
    check_url(url)
    parts = urlsplit(url)
    try:
        port = parts.port or SCHEMES[parts.scheme]
        infos = socket.getaddrinfo(parts.hostname, port, type=socket.SOCK_STREAM)
    except (OSError, ValueError) as error:
        raise Unresolved(f"url: cannot resolve {parts.hostname!r}: {error}", field="url") from None
    # An AF_INET or AF_INET6 address (what a host name resolves to) starts with its text.
    addresses = [cast(str, info[4][0]) for info in infos]
    if not allow_private:
        for address in addresses:
            if not _public(ipaddress.ip_address(address.split("%", 1)[0])):
                raise RefusedTarget(
                    f"url: {parts.hostname} resolves to {address}, a private, loopback,"
                    " link-local or reserved address.",
                    field="url",
                )
    return addresses[0]


@dataclass(frozen=True)
class Answer:
    status_code: int | None
    duration_ms: int
    error: str

    @property
    def ok(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300


def post(
    url: str, body: bytes, headers: dict[str, str], *, timeout: float, allow_private: bool
) -> Answer:
    """POST ``body`` to ``url`` at the address ``resolve`` checked; never raises."""
    began = time.monotonic()
    try:
        address = resolve(url, allow_private)
        status = _send(url, address, body, headers, timeout)
        error = "" if 200 <= status < 300 else f"answered {status}"
    except (OSError, http.client.HTTPException, BadInput) as failure:
        status = None
        error = getattr(failure, "detail", None) or f"{type(failure).__name__}: {failure}"
    return Answer(status, round((time.monotonic() - began) * 1000), error[:2000])


def _send(url: str, address: str, body: bytes, headers: dict[str, str], timeout: float) -> int:
    parts = urlsplit(url)
    hostname = cast(str, parts.hostname)  # resolve() has refused a URL without one
    port = parts.port or SCHEMES[parts.scheme]
    if parts.scheme == "https":
        connection: http.client.HTTPConnection = _PinnedHTTPS(hostname, address, port, timeout)
    else:
        connection = http.client.HTTPConnection(address, port, timeout=timeout)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    host = hostname if parts.port is None else f"{hostname}:{parts.port}"
    try:
        connection.request(
            "POST",
            path,
            body=body,
            headers={"Host": host, "Content-Type": "application/json", **headers},
        )
        response = connection.getresponse()
        response.read(64 * 1024)
        return response.status
    finally:
        connection.close()


class _PinnedHTTPS(http.client.HTTPSConnection):
    """HTTPS to ``address``, verifying the certificate of ``hostname``."""

    def __init__(self, hostname: str, address: str, port: int, timeout: float) -> None:
        context = ssl.create_default_context()
        super().__init__(address, port, timeout=timeout, context=context)
        self._hostname = hostname
        self._pinned_context = context

    def connect(self) -> None:
        sock = socket.create_connection((self.host, self.port), self.timeout)
        self.sock = self._pinned_context.wrap_socket(sock, server_hostname=self._hostname)
