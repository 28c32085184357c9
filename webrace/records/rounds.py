"""The records every part of a round shares: a page's node in the frontier and the verdict
on offering a link (a leaf module: it imports nothing of WebRACE)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

PENDING, DONE, FAILED = "pending", "done", "failed"


class Offer(Enum):
    NEW = "new"  # first time seen: request it
    MERGED = "merged"  # seen; this offer added URDs or depth to it (coalesced)
    DUPLICATE = "duplicate"  # seen; this offer added nothing


@dataclass
class Node:
    url: str
    parent_url: str | None
    depth: int  # links from the nearest start page
    # group id -> depth still allowed below this page (a group: the URDs of a round sharing a
    # start page, scope and depth, see webrace.rounds.groups; the frontier takes any ids)
    budgets: dict[str, int]
    state: str = PENDING
    links: list[str] = field(default_factory=list)
    counted: set[str] = field(default_factory=set)  # groups this pending node keeps active
    # the URL the page was answered from when a redirect moved it (its item's URL, the parent
    # of its links); None: its own
    answered_from: str | None = None
    # where the page's refresh (<meta http-equiv="refresh">, a Refresh header) sends the
    # browser: followed like a redirect, with the page's own depth budget (one of its links)
    refresh: str | None = None

    @property
    def page_url(self) -> str:
        """The URL the page was stored at: its item's, and its links' parent."""
        return self.answered_from or self.url

__all__ = ["DONE", "FAILED", "PENDING", "Node", "Offer"]
