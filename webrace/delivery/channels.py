"""An owner's delivery channels: Apprise URLs (``mailto://``, ``mailtos://``, ``json://`` and
``jsons://`` webhooks, and the other services the admin allows: ``WEBRACE_DELIVERY_SCHEMES``),
each with the events it takes ("aci": new ACIs, "notification": sentinel notifications).

A URL is checked when it is added, here for every entry path (`scrapy deliver channel add`,
the profile page): a scheme the admin does not allow, a URL Apprise's service refuses, a
webhook setting its own method, headers or fields (unless the admin allows it), or a host
that is not a public address (unless the admin allows it) is one line of error and nothing
is stored (:mod:`webrace.delivery.policy`; the check that counts is the guard's, at connect
time). A URL is never shown with its password: ``list()`` gives it as ``shown`` (Apprise's
privacy form). An owner sees a channel's state without the remote side's answer (a refused
port and an error status look alike): the detail is the admin's (the log, `scrapy deliver
channel list --errors`).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from webrace.backends import open_delivery_store
from webrace.backends.delivery import DeliveryStore
from webrace.backends.redis import safe_url
from webrace.delivery.policy import ChannelPolicy
from webrace.delivery.send import instantiate, schemes
from webrace.records.channel import EVENTS, MAX_URL, Channel, ChannelError, channel_id, check_owner, parse_events
from webrace.urd import now_millis

UNREADABLE = "(its URL cannot be decrypted with this installation's channel key: remove it and add it again)"


def check_url(url: str, policy: ChannelPolicy | None = None) -> str:
    """``url`` stripped, if ``policy`` (default: the default settings) lets an owner add it
    and Apprise can use it; else :class:`ChannelError` (one line, no password)."""
    policy = policy or ChannelPolicy.from_settings(None)
    url = (url or "").strip()
    if not url or len(url) > MAX_URL or any(c.isspace() for c in url):
        raise ChannelError(f"channel URL {safe_url(url)[:80]!r}: expected one Apprise URL (SCHEME://...) "
                           f"of at most {MAX_URL} characters, without spaces")
    named = safe_url(url)[:80]
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if not scheme or scheme not in schemes():
        raise ChannelError(f"channel URL {named!r}: unknown scheme {f'{scheme}://' if scheme else '(none)'} "
                           f"(the services allowed here: {policy.allowed()})")
    if scheme not in policy.schemes:
        raise ChannelError(f"channel URL {named!r}: scheme {scheme}:// is not allowed here "
                           f"(the services allowed here: {policy.allowed()})")
    plugin = instantiate(url)
    if plugin is None:
        raise ChannelError(f"channel URL {named!r}: Apprise's {scheme}:// service refuses it "
                           "(a missing host, user, token or recipient?)")
    custom = policy.custom(url)
    if custom:
        raise ChannelError(f"channel URL {named!r}: a channel may not set the request's {', '.join(custom[:5])} "
                           "(only the default method, headers and payload are sent)")
    host = str(getattr(plugin, "smtp_host", None) or getattr(plugin, "host", None) or "")
    refused = policy.guard.refusal(host)
    if refused:
        raise ChannelError(f"channel URL {named!r}: {refused[:120]}; channels may only reach public hosts")
    return url


def shown(url: str) -> str:
    """The URL as it may be shown: Apprise's privacy form (passwords and tokens masked)."""
    if not url:
        return UNREADABLE
    plugin = instantiate(url)
    return plugin.url(privacy=True) if plugin is not None else safe_url(url)


def status(channel: Channel, failing_after: int) -> str:
    """``ok``, ``new`` (nothing sent yet), ``retrying (N failures)`` or ``failing since ...``:
    what its owner may see, never the remote side's answer (which would tell an open port
    from a closed one)."""
    if channel.attempts >= failing_after and channel.failing_since is not None:
        return f"failing since {_iso(channel.failing_since)} ({channel.attempts} failures in a row)"
    if channel.attempts:
        return f"retrying ({channel.attempts} failure{'s' * (channel.attempts != 1)})"
    return "ok" if channel.last_sent is not None else "new"


class Channels:
    """Add, list and remove owners' channels (``scrapy deliver channel``, the web app), under
    the admin's ``policy``."""

    def __init__(self, store: DeliveryStore, failing_after: int = 3, policy: ChannelPolicy | None = None) -> None:
        self.store = store
        self.failing_after = failing_after
        self.policy = policy or ChannelPolicy.from_settings(None)

    def add(self, owner: str, url: str, events: Any = EVENTS, since: int | None = None) -> str:
        """The channel's id (the same for the same owner and URL: its events are replaced).
        Items at or after ``since`` (epoch ms; default now) are delivered to it."""
        owner, url, events = check_owner(owner), check_url(url, self.policy), parse_events(events)
        cid = channel_id(owner, url)
        self.store.put_channel(Channel(cid, owner, url, events, now_millis() if since is None else since))
        return cid

    def list(self, owner: str | None = None, errors: bool = False) -> list[dict]:
        """Every channel (of ``owner``), without its URL's secrets (``shown``), with the state
        its owner may see; ``errors``: with each one's ``last_error`` too (the admin's view)."""
        return [{"id": c.id, "owner": c.owner, "shown": shown(c.url), "events": list(c.events), "since": c.since,
                 "status": status(c, self.failing_after), "attempts": c.attempts, "next_try": c.next_try,
                 "failing_since": c.failing_since, "last_sent": c.last_sent,
                 **({"last_error": c.last_error} if errors else {})}
                for c in self.store.channels(owner)]

    def remove(self, owner: str, channel_id: str) -> bool:
        """False if ``owner`` has no channel with this id."""
        return self.store.remove_channel(owner, channel_id)

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> Channels:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_channels(settings: Any, resolver: Any = None) -> Channels:
    """The channels of the mode's delivery store, under the admin's policy (close it, or use it
    as a context manager); ``resolver``: see :meth:`ChannelPolicy.from_settings`."""
    return Channels(open_delivery_store(settings), settings.getint("WEBRACE_DELIVERY_FAILING_AFTER", 3),
                    ChannelPolicy.from_settings(settings, resolver))


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


__all__ = ["ChannelError", "Channels", "check_url", "open_channels", "shown", "status"]
