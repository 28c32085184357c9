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

__all__ = ["DONE", "FAILED", "PENDING", "Node", "Offer"]
