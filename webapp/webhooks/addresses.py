"""Where a webhook may point: HTTPS to a public address. A URL whose host resolves to a
loopback, private, link-local or otherwise non-public address is refused, at registration
and again before every attempt (a name can be re-pointed after it was checked), unless the
address lies in ``WEBHOOK_ALLOWED_NETWORKS``. Otherwise a tenant could make the service call
its own internals (the metrics endpoint, a cloud metadata service) and read the log of answers.
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

from django.conf import settings

IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class AddressRefused(Exception):
    """The URL may not be called; ``str`` says why and what to do instead."""


@dataclass(frozen=True)
class Target:
    """A checked URL: where to connect (``addresses``, tried in order) and what to ask it for."""

    scheme: str
    host: str
    port: int
    path: str
    addresses: tuple[str, ...]


def _allowed_networks() -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    return [ipaddress.ip_network(n, strict=False) for n in settings.WEBHOOK_ALLOWED_NETWORKS]


def refusal_for(address: IpAddress) -> str | None:
    """Why ``address`` may not be called, or None if it may."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped  # ::ffff:127.0.0.1 is 127.0.0.1
    if (address.is_global and not address.is_multicast) or any(address in network for network in _allowed_networks()):
        return None
    kind = (
        "loopback"
        if address.is_loopback
        else "link-local"
        if address.is_link_local
        else "private"
        if address.is_private
        else "non-public"
    )
    return (
        f"resolves to {address}, a {kind} address; webhooks go to public addresses only "
        "(give a public HTTPS URL, or an operator adds the network to WEBHOOK_ALLOWED_NETWORKS)"
    )


def check_url(url: str) -> Target:
    """Resolve ``url`` and check every address it resolves to; raises ``AddressRefused``."""
    parts = urlsplit(url)
    allowed_schemes = ("https", "http") if settings.WEBHOOK_ALLOW_HTTP else ("https",)
    if parts.scheme not in allowed_schemes:
        raise AddressRefused(f"must be an https:// URL, got {parts.scheme or 'no'} scheme (deliveries carry job data)")
    if not parts.hostname:
        raise AddressRefused("has no host name")
    if parts.username or parts.password:
        raise AddressRefused("must not carry a user name or password (deliveries are signed instead)")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise AddressRefused("has an invalid port") from None
    try:
        found = socket.getaddrinfo(parts.hostname, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
        raise AddressRefused(f"host {parts.hostname!r} does not resolve (check the name)") from None
    addresses = [ipaddress.ip_address(info[4][0].split("%", 1)[0]) for info in found]
    for address in addresses:
        reason = refusal_for(address)
        if reason is not None:
            raise AddressRefused(reason)
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    unique = tuple(dict.fromkeys(str(a) for a in addresses))
    return Target(scheme=parts.scheme, host=parts.hostname, port=port, path=path, addresses=unique)
