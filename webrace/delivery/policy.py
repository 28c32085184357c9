"""What the admin lets owners' channels do, checked when a channel is added (by every entry
path: `scrapy deliver channel add`, the profile page) and again before each send, so that a
channel stored before the admin narrowed a rule is not sent:

- ``WEBRACE_DELIVERY_SCHEMES``: the Apprise schemes an owner may use (default: mail and
  webhooks);
- ``WEBRACE_DELIVERY_CUSTOM_REQUESTS``: whether an owner may set a webhook's method, headers,
  query parameters or payload fields (Apprise's ``?method=``, ``?+Header=``, ``?-param=``,
  ``?:field=``); off by default;
- ``WEBRACE_DELIVERY_ALLOW_HOSTS``: the internal hosts sends may reach
  (:class:`~webrace.delivery.guard.Guard`, checked at connect time).

Settings missing from ``settings`` (a bare ``Settings({...})``) take their defaults from
``webrace.settings``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from webrace import settings as defaults
from webrace.delivery.guard import REFUSED, AllowList, Guard, Resolver
from webrace.delivery.send import parse
from webrace.records.channel import ChannelError


def setting(settings: Any, name: str) -> Any:
    """``settings[name]``, or its default in ``webrace.settings`` when it is not set there."""
    value = settings.get(name) if settings is not None else None
    return getattr(defaults, name, None) if value is None else value


def _flag(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() not in ("0", "false", "no", "off", "")
    return bool(value)


@dataclass(frozen=True)
class ChannelPolicy:
    schemes: frozenset[str]
    custom_requests: bool
    guard: Guard

    @classmethod
    def from_settings(cls, settings: Any, resolver: Resolver | None = None) -> ChannelPolicy:
        """The admin's settings; ``resolver`` (``socket.getaddrinfo``'s signature) resolves
        names for the guard (tests answer with their own)."""
        value = setting(settings, "WEBRACE_DELIVERY_SCHEMES")
        names = value.split(",") if isinstance(value, str) else list(value or ())
        schemes = frozenset(str(n).strip().lower().removesuffix("://") for n in names if str(n).strip())
        try:
            allow = AllowList.parse(setting(settings, "WEBRACE_DELIVERY_ALLOW_HOSTS"))
        except ValueError as exc:  # the admin's setting: one line wherever it is read
            raise ChannelError(str(exc)) from None
        return cls(schemes, _flag(setting(settings, "WEBRACE_DELIVERY_CUSTOM_REQUESTS")),
                   Guard(allow, resolver) if resolver is not None else Guard(allow))

    def allowed(self) -> str:
        return ", ".join(f"{s}://" for s in sorted(self.schemes)) or "none"

    def custom(self, url: str) -> list[str]:
        """What ``url`` sets of the request Apprise makes (``method=DELETE``, ``+X-Header``,
        ``-param``, ``:field``), as Apprise itself reads the URL; values are left out (a header
        may hold a secret). Empty when the admin allows custom requests."""
        if self.custom_requests:
            return []
        parsed = parse(url) or {}
        found = []
        method = str(parsed.get("qsd", {}).get("method") or "")
        if method and method.upper() != "POST":  # POST is what every webhook does anyway
            found.append(f"method={method}")
        for prefix in ("+", "-", ":"):
            found += [f"{prefix}{key}" for key in parsed.get(f"qsd{prefix}", {})]
        return found

    def refusal(self, url: str) -> str | None:
        """Why ``url`` may not be sent to any more (None: it may), without a lookup: its
        scheme or its custom request. Where it connects is the guard's, at connect time."""
        scheme = url.split("://", 1)[0].lower() if "://" in url else ""
        if scheme not in self.schemes:
            return f"{REFUSED}scheme {scheme}:// is not allowed (WEBRACE_DELIVERY_SCHEMES: {self.allowed()})"
        custom = self.custom(url)
        if custom:
            return (f"{REFUSED}the URL sets the request's {', '.join(custom[:5])} "
                    "(WEBRACE_DELIVERY_CUSTOM_REQUESTS is off)")
        return None
