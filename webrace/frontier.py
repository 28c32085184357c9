"""The crawl frontier of one round: which URLs are pending or done, and for which URDs.

This is where the seed's coalescing happens (seed 000 section 2.2.2): a URL is requested
once however many URDs reach it, and the URDs (so the owners) reaching it are merged into
its node. A node keeps, per URD, the depth still allowed below it; a URD that reaches an
already-fetched page with more depth left is carried on through the page's stored links,
without fetching the page again. Plain Python, no Scrapy.
"""

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
    budgets: dict[str, int]  # URD id -> depth still allowed below this page
    state: str = PENDING
    links: list[str] = field(default_factory=list)


class Frontier:
    def __init__(self) -> None:
        self.nodes: dict[str, Node] = {}

    def __len__(self) -> int:
        return len(self.nodes)

    def get(self, url: str) -> Node | None:
        return self.nodes.get(url)

    def offer(
        self, url: str, parent_url: str | None, depth: int, budgets: dict[str, int]
    ) -> tuple[Offer, dict[str, int]]:
        """Offer ``url`` reached for ``budgets``; return the verdict and the budgets that are
        new to the node (to be carried on through its links if it is already done)."""
        node = self.nodes.get(url)
        if node is None:
            self.nodes[url] = Node(url, parent_url, depth, dict(budgets))
            return Offer.NEW, dict(budgets)
        gained = {u: r for u, r in budgets.items() if r > node.budgets.get(u, -1)}
        if not gained:
            return Offer.DUPLICATE, {}
        node.budgets.update(gained)
        node.depth = min(node.depth, depth)
        return Offer.MERGED, gained

    def alias(self, url: str, node: Node) -> bool:
        """Record that ``node`` was answered from ``url`` (a redirect target). Returns False
        when ``url`` had been fetched already in this round (the page is a duplicate)."""
        known = self.nodes.get(url)
        if known is not None and known is not node and known.state == DONE:
            return False
        self.nodes[url] = node
        return True
