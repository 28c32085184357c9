"""Delivery channels (the seed's Content-Distribution Agents, seed 000 section 2.2.1): where one
owner wants new ACIs and notifications pushed (an Apprise URL), which of the two, and how the
pushing has gone so far (the retry state the delivery pass keeps).

No Scrapy, no Apprise here: the URL is checked by :mod:`webrace.delivery.channels`.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from webrace.names import canonical_owner, owner_name_problem

EVENTS = ("aci", "notification")
MAX_URL = 2048  # characters: a channel URL longer than this is refused
MAX_ERROR = 300  # characters of the last error kept


class ChannelError(ValueError):
    """A channel the user named cannot be used: one line saying which value and why."""


def channel_id(owner: str, url: str) -> str:
    """Stable per owner and URL: adding the same URL again changes its events, not its id."""
    return hashlib.sha1(f"{owner}\n{url}".encode(), usedforsecurity=False).hexdigest()[:10]


def parse_events(text: str | tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """``"aci,notification"`` (or a sequence) -> ``("aci", "notification")``, in that order."""
    names = [n.strip() for n in (text.split(",") if isinstance(text, str) else text) if n.strip()]
    unknown = [n for n in names if n not in EVENTS]
    if unknown or not names:
        raise ChannelError(f"events {','.join(names) or '(none)'}: expected one or more of {', '.join(EVENTS)}")
    return tuple(e for e in EVENTS if e in names)


def check_owner(owner: str) -> str:
    """``owner`` as every store holds it (``webrace.names``, the one rule: ``Alice`` is ``alice``)."""
    problem = owner_name_problem(owner)
    if problem:
        raise ChannelError(f"owner: {problem}")
    return canonical_owner(owner)


@dataclass(frozen=True)
class Channel:
    id: str
    owner: str
    url: str  # the Apprise URL, secrets included: shown only through `shown`; "" if it cannot be decrypted
    events: tuple[str, ...]
    since: int  # epoch ms: items at or after this are this channel's to deliver
    attempts: int = 0  # failed sends in a row
    next_try: int = 0  # epoch ms: no send before this (the backoff)
    last_error: str = ""
    failing_since: int | None = None  # epoch ms of the first failure of the current run of failures
    last_sent: int | None = None  # epoch ms of the last message it took

    def wants(self, event: str) -> bool:
        return event in self.events
