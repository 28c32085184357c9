"""An owner's delivery channels: Apprise URLs (``mailto://``, ``mailtos://``, ``json://`` and
``jsons://`` webhooks, ``ntfy://``, ``slack://``, ...; see Apprise's list of services), each
with the events it takes ("aci": new ACIs, "notification": sentinel notifications).

A URL is checked by Apprise when it is added: a scheme Apprise does not know, or a URL its
service refuses, is one line of error and nothing is stored. A URL is never shown with its
password: ``list()`` gives it as ``shown`` (Apprise's privacy form).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from webrace.backends import open_delivery_store
from webrace.backends.delivery import DeliveryStore
from webrace.backends.redis import safe_url
from webrace.delivery.send import instantiate, schemes
from webrace.records.channel import EVENTS, MAX_URL, Channel, ChannelError, channel_id, check_owner, parse_events
from webrace.urd import now_millis


def check_url(url: str) -> str:
    """``url`` stripped, if Apprise can use it; else :class:`ChannelError` (one line, no password)."""
    url = (url or "").strip()
    if not url or len(url) > MAX_URL or any(c.isspace() for c in url):
        raise ChannelError(f"channel URL {safe_url(url)[:80]!r}: expected one Apprise URL (SCHEME://...) "
                           f"of at most {MAX_URL} characters, without spaces")
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if not scheme or scheme not in schemes():
        named = f"{scheme}://" if scheme else "(none)"
        raise ChannelError(f"channel URL {safe_url(url)[:80]!r}: unknown scheme {named} (Apprise's services: "
                           "mailto://, mailtos://, json://, jsons://, ntfy://, slack://, ...)")
    if instantiate(url) is None:
        raise ChannelError(f"channel URL {safe_url(url)[:80]!r}: Apprise's {scheme}:// service refuses it "
                           "(a missing host, user, token or recipient?)")
    return url


def shown(url: str) -> str:
    """The URL as it may be shown: Apprise's privacy form (passwords and tokens masked)."""
    plugin = instantiate(url)
    return plugin.url(privacy=True) if plugin is not None else safe_url(url)


def status(channel: Channel, failing_after: int) -> str:
    """``ok``, ``new`` (nothing sent yet), ``retrying (N failures)`` or ``failing since ...``."""
    if channel.attempts >= failing_after and channel.failing_since is not None:
        return (f"failing since {_iso(channel.failing_since)} ({channel.attempts} failures in a row), "
                f"last error: {channel.last_error}")
    if channel.attempts:
        return f"retrying ({channel.attempts} failure{'s' * (channel.attempts != 1)}), last error: {channel.last_error}"
    return "ok" if channel.last_sent is not None else "new"


class Channels:
    """Add, list and remove owners' channels (``scrapy deliver channel``, the web app)."""

    def __init__(self, store: DeliveryStore, failing_after: int = 3) -> None:
        self.store = store
        self.failing_after = failing_after

    def add(self, owner: str, url: str, events: Any = EVENTS, since: int | None = None) -> str:
        """The channel's id (the same for the same owner and URL: its events are replaced).
        Items at or after ``since`` (epoch ms; default now) are delivered to it."""
        owner, url, events = check_owner(owner), check_url(url), parse_events(events)
        cid = channel_id(owner, url)
        self.store.put_channel(Channel(cid, owner, url, events, now_millis() if since is None else since))
        return cid

    def list(self, owner: str | None = None) -> list[dict]:
        """Every channel (of ``owner``), without its URL's secrets (``shown``), with its state."""
        return [{"id": c.id, "owner": c.owner, "shown": shown(c.url), "events": list(c.events), "since": c.since,
                 "status": status(c, self.failing_after), "attempts": c.attempts, "next_try": c.next_try,
                 "last_error": c.last_error, "failing_since": c.failing_since, "last_sent": c.last_sent}
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


def open_channels(settings: Any) -> Channels:
    """The channels of the mode's delivery store (close it, or use it as a context manager)."""
    return Channels(open_delivery_store(settings), settings.getint("WEBRACE_DELIVERY_FAILING_AFTER", 3))


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


__all__ = ["ChannelError", "Channels", "check_url", "open_channels", "shown", "status"]
