"""The crawl frontier of one round: which URLs are pending or done, and for which URDs.

This is where the seed's coalescing happens (seed 000 section 2.2.2): a URL is requested
once however many URDs reach it, and the URDs (so the owners) reaching it are merged into
its node. A node keeps, per URD, the depth still allowed below it; a URD that reaches an
already-fetched page with more depth left is carried on through the page's stored links,
without fetching the page again. Plain Python, no Scrapy.
"""

from __future__ import annotations

from collections import Counter

from webrace.records.rounds import DONE, PENDING, Node, Offer


class Frontier:
    """Also tracks which URDs are still *active*: have a pending page from which they may
    follow links further. Only an active URD can still add its owner to a page already
    fetched, so a page's owners are final once no active URD that could reach it is
    missing from it: the spider holds a page's item until then."""

    def __init__(self) -> None:
        self.nodes: dict[str, Node] = {}
        self.active: Counter[str] = Counter()

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
            node = self.nodes[url] = Node(url, parent_url, depth, dict(budgets))
            self._count(node)
            return Offer.NEW, dict(budgets)
        gained = {u: r for u, r in budgets.items() if r > node.budgets.get(u, -1)}
        if not gained:
            return Offer.DUPLICATE, {}
        node.budgets.update(gained)
        if depth < node.depth:  # a shorter path: depth and parent must agree
            node.depth, node.parent_url = depth, parent_url
        self._count(node)
        return Offer.MERGED, gained

    def finish(
        self, node: Node, state: str = DONE, expanded: dict[str, int] | None = None, keep_lease: bool = False
    ) -> tuple[set[str], dict[str, int]]:
        """Mark ``node`` fetched (or failed) once its links have been offered for
        ``expanded`` (the budgets its links were followed with; None: nothing to follow).

        Returns ``(ended, missed)``. If URDs or depth were merged into the node since it was
        taken (by another worker, in distributed mode) ``missed`` holds them and nothing
        changes: follow the links for ``missed`` too, then finish again. Otherwise ``ended``
        holds the URDs that are no longer active. Offer the links first, so the children
        keep their URDs active. (``keep_lease`` is for a shared frontier: nothing is leased here.)"""
        if expanded is not None:
            missed = {u: r for u, r in node.budgets.items() if r > expanded.get(u, -1)}
            if missed:
                return set(), missed
        node.state = state
        ended = set()
        for urd_id in node.counted:
            self.active[urd_id] -= 1
            if self.active[urd_id] <= 0:
                del self.active[urd_id]
                ended.add(urd_id)
        node.counted.clear()
        return ended, {}

    def offer_many(
        self, parent_url: str | None, depth: int, offers: list[tuple[str, dict[str, int]]]
    ) -> list[tuple[Offer, dict[str, int], str]]:
        """:meth:`offer` for each ``(url, budgets)`` of one page's links, with each node's
        state after the offer (one round trip in a shared frontier)."""
        results = []
        for url, budgets in offers:
            verdict, gained = self.offer(url, parent_url, depth, budgets)
            results.append((verdict, gained, self.nodes[url].state))
        return results

    def contains(self, url: str) -> bool:
        return url in self.nodes

    def known(self, urls: list[str]) -> set[str]:
        """Which of ``urls`` the frontier has."""
        return {url for url in urls if url in self.nodes}

    def known_then_finish(
        self, urls: list[str], node: Node, state: str, expanded: dict[str, int], keep_lease: bool = False
    ) -> tuple[set[str], tuple[set[str], dict[str, int]]]:
        """:meth:`known` of ``urls``, then :meth:`finish` (a shared frontier does both in one
        round trip): for a page none of whose links is to be offered."""
        return self.known(urls), self.finish(node, state, expanded, keep_lease)

    def snapshot(self, urls: list[str]) -> tuple[set[str], dict[str, Node | None]]:
        """The active URDs and the current nodes of ``urls``, read together."""
        return set(self.active), {url: self.nodes.get(url) for url in urls}

    def adopt(self, node: Node) -> Node:
        """The node for ``node.url``, taking ``node`` when the frontier has none (a request
        that outlived its frontier, e.g. resumed from a JOBDIR)."""
        return self.nodes.setdefault(node.url, node)

    def active_urds(self) -> set[str]:
        return set(self.active)

    def forget_active(self) -> None:
        """Treat every URD as done (the spider's safety net when it goes idle)."""
        self.active.clear()

    def _count(self, node: Node) -> None:
        if node.state != PENDING:
            return
        for urd_id, remaining in node.budgets.items():
            if remaining >= 1 and urd_id not in node.counted:
                node.counted.add(urd_id)
                self.active[urd_id] += 1

    def expanded(self, url: str, budgets: dict[str, int]) -> None:
        """(A shared frontier clears a page's pending expansion: see RedisFrontier.expanded.)
        One process follows a merge at once or dies with its round: nothing to keep."""

    def claim(self, url: str, node: Node) -> tuple[bool, dict[str, int], str]:
        """``node``'s request is about to follow a redirect to ``url`` (before downloading
        it): claim ``url`` for ``node`` so that a link to it offered later is merged into
        ``node`` rather than downloaded again. Returns ``(claimed, gained, state)``: claimed
        (``url`` was new to the round, or is ``node``'s already): follow the redirect; else
        the round has ``url`` (pending or done): ``node``'s URDs were offered to it (``gained``
        what that added, ``state`` its node's state) and the redirect is not followed."""
        known = self.nodes.get(url)
        if known is None:
            self.nodes[url] = node
            return True, {}, node.state
        if known is node or known.url == node.url:
            return True, {}, known.state
        _, gained = self.offer(url, node.parent_url, node.depth, node.budgets)
        return False, gained, self.nodes[url].state
