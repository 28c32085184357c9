"""One send through Apprise (https://github.com/caronc/apprise): mail over SMTP, JSON webhooks,
ntfy, chat services... Apprise speaks every protocol; here it gets a time limit, so a
channel that accepts a connection and never answers costs at most ``timeout`` seconds, and
a guard (:mod:`webrace.delivery.guard`) that checks every connection it makes.

Apprise is imported on first use: every `scrapy` command imports the command modules and
every crawl loads the delivery extension, and most never send anything.
"""

from __future__ import annotations

import functools
import importlib
import threading
import warnings
from typing import Any

from webrace.delivery.guard import REFUSED, STRICT, Guard

APP_ID = "WebRACE"
APP_DESC = "WebRACE: user-driven crawling"
_LOADING = threading.Lock()


def apprise() -> Any:
    """The ``apprise`` module, its services loaded (once, in any thread)."""
    with _LOADING:
        return _load()


@functools.cache
def _load() -> Any:
    with warnings.catch_warnings():  # Apprise 2.2's own (it imports imghdr): not the user's to act on
        warnings.simplefilter("ignore", DeprecationWarning)
        import apprise as module

        module.NotificationManager().load_modules()
    return module


def schemes() -> Any:
    """Apprise's services by scheme (``"json" in schemes()``)."""
    return apprise().NotificationManager()


def asset(timeout: float | None = None) -> Any:
    """Apprise's settings for WebRACE: our name, no files of Apprise's own (its persistent
    store stays in memory), and a time limit per service."""
    module = apprise()
    return module.AppriseAsset(app_id=APP_ID, app_desc=APP_DESC, storage_mode=module.PersistentStoreMode.MEMORY,
                               service_timeout=timeout)


def instantiate(url: str, timeout: float | None = None) -> Any:
    """Apprise's service for ``url`` (None: Apprise cannot use it), its socket timeouts at most
    ``timeout`` seconds (a URL's own ``cto=``/``rto=`` may set them lower)."""
    plugin = apprise().Apprise.instantiate(url, asset=asset(timeout))
    if plugin is not None and timeout is not None:
        plugin.socket_connect_timeout = min(float(plugin.socket_connect_timeout), timeout)
        plugin.socket_read_timeout = min(float(plugin.socket_read_timeout), timeout)
    return plugin


def parse(url: str) -> dict | None:
    """``url`` as Apprise reads it (``qsd``: its query; ``qsd+``, ``qsd-``, ``qsd:``: the
    headers, parameters and payload fields it sets); None if Apprise cannot parse it."""
    apprise()
    return importlib.import_module("apprise.utils.parse").parse_url(url, verify_host=False)


def send(url: str, title: str, body: str, timeout: float, guard: Guard = STRICT) -> str | None:
    """Push one message, every connection checked by ``guard``; None when the channel took
    it, else one line saying why not (``refused: ...`` when the guard refused a connection)."""
    plugin = instantiate(url, timeout)
    if plugin is None:
        return "Apprise cannot use this URL any more (was Apprise upgraded?)"
    module = apprise()
    service = module.Apprise(asset=asset(timeout))
    service.add(plugin)
    with guard.applied() as attempt:  # Apprise's worker thread copies this context: the guard goes too
        try:
            result = service.notify(body=body, title=title, body_format=module.NotifyFormat.TEXT, timeout=timeout)
        except Exception as exc:  # a plugin's bug must not end the pass: it is this channel's failure
            result, error = None, f"{type(exc).__name__}: {exc}"[:300]
    if attempt.refused:
        return f"{REFUSED}{attempt.refused[0]} (WEBRACE_DELIVERY_ALLOW_HOSTS allows internal hosts)"[:300]
    if result is None:
        return error
    if result:
        return None
    return _why(result.logs()) or f"not delivered ({result.status.name.lower()})"


def _why(entries: Any) -> str:
    """Apprise's last warning or error about the send, on one line."""
    said = [" ".join(str(getattr(e, "message", "")).split()) for e in entries]
    return ([m for m in said if m] or [""])[-1][:300]
