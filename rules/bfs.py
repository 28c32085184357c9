"""BreadthFirstSearch: the seed's link follower. It records no results and enqueues every
link of every document; the URDs' scope and depth still decide which are crawled."""

from __future__ import annotations

from rules.base import Doc, Rule


class BreadthFirstSearch(Rule):
    def process_doc(self, doc: Doc) -> None:
        for url in doc.links:
            self.enqueue(url)
