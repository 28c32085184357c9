"""The web app's settings (``WEBRACE_WEB_*`` and the few others it reads), read once from
the Scrapy settings, each falling back to its default in ``webrace.settings`` (so a bare
``Settings({...})`` in a script or a test works too)."""

from __future__ import annotations

import ipaddress
import os
import secrets
from dataclasses import dataclass
from typing import Any

from webrace import settings as defaults
from webrace.backends import data_dir

LOOPBACK_NAMES = ("127.0.0.1", "localhost")
SECRET_FILE = "web-secret-key"  # noqa: S105 - a file name


def setting(settings: Any, name: str) -> Any:
    """``settings[name]``, or its default in ``webrace.settings`` when it is not set there."""
    value = settings.get(name)
    return getattr(defaults, name, None) if value is None else value


@dataclass(frozen=True)
class WebConfig:
    allowed_hosts: tuple[str, ...]
    plain_http: PlainHttp
    secret_key: str
    session_hours: float
    threads: int
    connection_limit: int
    queue_limit: int
    channel_timeout: int
    max_body: int
    page_size: int
    trusted_proxy: str | None
    login_limit: Any  # failed logins allowed per address and name (a `limits` rate item)

    @classmethod
    def from_settings(cls, settings: Any, host: str = "127.0.0.1") -> WebConfig:
        def number(name: str, kind: type = int) -> Any:
            value = setting(settings, name)
            try:
                result = kind(value)
            except (TypeError, ValueError):
                raise ValueError(f"{name} must be a number, not {value!r}") from None
            if result <= 0:
                raise ValueError(f"{name} must be positive, not {value!r}")
            return result

        return cls(
            allowed_hosts=allowed_hosts(setting(settings, "WEBRACE_WEB_ALLOWED_HOSTS"), host),
            plain_http=plain_http(setting(settings, "WEBRACE_WEB_PLAIN_HTTP"),
                                  settings.get("WEBRACE_WEB_SECURE_COOKIES")),
            secret_key=setting(settings, "WEBRACE_WEB_SECRET_KEY") or _kept_secret(settings),
            session_hours=number("WEBRACE_WEB_SESSION_HOURS", float),
            threads=number("WEBRACE_WEB_THREADS"),
            connection_limit=number("WEBRACE_WEB_CONNECTION_LIMIT"),
            queue_limit=number("WEBRACE_WEB_QUEUE_LIMIT"),
            channel_timeout=number("WEBRACE_WEB_CHANNEL_TIMEOUT"),
            max_body=number("WEBRACE_WEB_MAX_BODY"),
            page_size=number("WEBRACE_WEB_PAGE_SIZE"),
            trusted_proxy=setting(settings, "WEBRACE_WEB_TRUSTED_PROXY") or None,
            login_limit=login_limit(setting(settings, "WEBRACE_WEB_LOGIN_LIMIT")),
        )


def login_limit(value: Any) -> Any:
    """``WEBRACE_WEB_LOGIN_LIMIT`` ("5/minute", "20 per hour") as a rate of the ``limits`` library."""
    from limits import parse

    try:
        return parse(str(value))
    except ValueError:
        raise ValueError(f"WEBRACE_WEB_LOGIN_LIMIT must be a rate such as '5/minute', not {value!r}") from None


@dataclass(frozen=True)
class PlainHttp:
    """Which clients may use the app over plain http (``WEBRACE_WEB_PLAIN_HTTP``): loopback
    always (the traffic never leaves the machine), private addresses when ``private``, and
    the ``networks`` listed. Over https every client may."""

    private: bool = False
    networks: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = ()

    def allows(self, address: str | None) -> bool:
        try:
            ip = ipaddress.ip_address((address or "").strip("[]").split("%", 1)[0])
        except ValueError:  # no address (a unix socket) or a name: not known to be near
            return False
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        if ip.is_loopback or (self.private and ip.is_private):
            return True
        return any(ip in network for network in self.networks)


def plain_http(value: Any, secure_cookies: Any = None) -> PlainHttp:
    """``WEBRACE_WEB_PLAIN_HTTP``: None (loopback only), ``"private"``, or networks (a list, or
    separated by commas: ``"10.0.0.0/8, 192.168.1.0/24"``), ``private`` among them or not.
    ``secure_cookies``: the old ``WEBRACE_WEB_SECURE_COOKIES``, which it replaces; set to
    False it would silently mean nothing now, so it is refused, saying what to set instead."""
    if secure_cookies is not None and not _flag(secure_cookies):
        raise ValueError("WEBRACE_WEB_SECURE_COOKIES is replaced by WEBRACE_WEB_PLAIN_HTTP (cookies are Secure "
                         "over https, and plain http is answered from loopback and the networks it lists): remove "
                         "it and set WEBRACE_WEB_PLAIN_HTTP = \"private\" or a list of networks")
    if not value:
        return PlainHttp()
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)):
        raise ValueError(f"WEBRACE_WEB_PLAIN_HTTP must be \"private\" or a list of networks, not {value!r}")
    private, networks = False, []
    for item in (str(i).strip() for i in items):
        if item.lower() == "private":
            private = True
        elif item:
            try:
                networks.append(ipaddress.ip_network(item, strict=False))
            except ValueError:
                raise ValueError(f"WEBRACE_WEB_PLAIN_HTTP: {item[:60]!r} is neither \"private\" nor a network "
                                 "such as 192.168.1.0/24") from None
    return PlainHttp(private, tuple(networks))


def allowed_hosts(value: Any, host: str) -> tuple[str, ...]:
    """The Host names to answer: the setting (a list, or names separated by commas), else the
    loopback names and ``host`` when it is an address of its own (not 0.0.0.0 or ::)."""
    if value:
        names = value.split(",") if isinstance(value, str) else list(value)
        return tuple(n.strip().lower() for n in names if n.strip())
    extra = []
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        address = None
    if address is not None and not address.is_unspecified and str(address) not in LOOPBACK_NAMES:
        extra.append(str(address))
    return (*LOOPBACK_NAMES, *extra)


def _flag(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() not in ("0", "false", "no", "off", "")
    return bool(value)


def _kept_secret(settings: Any) -> str:
    """The random key in ``WEBRACE_DATA_DIR/web-secret-key`` (made on first use, mode 0600),
    so that sessions outlive a restart."""
    path = data_dir(settings) / SECRET_FILE
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        key = path.read_text(encoding="ascii").strip()
        if len(key) >= 32:
            return key
        raise ValueError(f"{path} holds no usable key: remove it (a new one is made) or set "
                         "WEBRACE_WEB_SECRET_KEY") from None
    key = secrets.token_hex(32)
    with os.fdopen(fd, "w", encoding="ascii") as out:
        out.write(key + "\n")
    return key
