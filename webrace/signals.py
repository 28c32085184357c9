"""WebRACE's own Scrapy signals (sent with ``crawler.signals.send_catch_log``).

``round_opened(round_id, urds, sentinels)``: a crawl round starts here (embedded) or this
worker meets a shared round for the first time (distributed); ``urds`` maps URD id to
:class:`webrace.urd.Urd`, ``sentinels`` URL to the sentinels due on it in this round (the
sentinel middleware takes each group once; what is left is checked when the round closes).
The exclusion middleware asks robots.txt that was unreachable again and learns the URDs'
scopes; the annotation and sentinel middlewares learn the round's URDs and sentinels
(:class:`RoundBook`), so no component reads the spider's attributes.

``request_refused(request, reason)``: the exclusion middleware refused a URD crawl's request
(``reason``: robots, mime, redirect_scope...); the URD spider counts its URL as ignored, once
per crawl (:class:`webrace.rounds.tally.UrlTally`).

``page_abandoned(request)``: (distributed mode) Redis went away while a leased page was
handled: nothing of it is emitted here, and the lease scheduler gives its lease up (the page
goes back to the queue as soon as Redis answers again).

``round_closed(round_id)``: a round this process ran is closed (embedded mode; in the
distributed mode `scrapy urd schedule` closes rounds): the delivery extension pushes what it
found to the owners' channels.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

round_opened = object()
round_closed = object()
request_refused = object()
page_abandoned = object()

ROUNDS_KEPT = 16  # rounds remembered: a page of an earlier round may still be in flight


class RoundBook:
    """The last rounds' URDs and due sentinels, by round id, learned from ``round_opened``."""

    def __init__(self, crawler: Any) -> None:
        self.rounds: OrderedDict[str, tuple[dict, dict]] = OrderedDict()
        crawler.signals.connect(self.round_opened, signal=round_opened)

    def round_opened(self, round_id: str, urds: dict[str, Any], sentinels: dict[str, list] | None = None) -> None:
        self.rounds[round_id] = (urds, sentinels if sentinels is not None else {})
        while len(self.rounds) > ROUNDS_KEPT:
            self.rounds.popitem(last=False)

    def urds(self, round_id: str | None) -> dict[str, Any] | None:
        entry = self.rounds.get(round_id or "")
        return entry[0] if entry is not None else None

    def sentinels(self, round_id: str | None, url: str) -> list:
        """The sentinels due in this round on ``url`` and not taken yet (they stay)."""
        entry = self.rounds.get(round_id or "")
        return (entry[1].get(url) or []) if entry is not None else []

    def take_sentinels(self, round_id: str | None, url: str) -> list | None:
        """The sentinels due in this round on ``url``, once."""
        entry = self.rounds.get(round_id or "")
        return entry[1].pop(url, None) if entry is not None else None
