"""Rule classes the rules tests name in their templates (importable: tests/ is on the path)."""

from __future__ import annotations

import re

from rules import Rule


class Visits(Rule):
    """Records the document's URL and seq; and whether it had results from an earlier crawl."""

    def process_doc(self, doc):
        before = self.results.get(self.name, doc.url)
        return {"url": doc.url, "seq": doc.seq, "seen_before": before is not None, "title": doc.selector.css(
            "title::text").get()}


class Nothing(Rule):
    def process_doc(self, doc):
        return None


class ReadsOther(Rule):
    """Reads the results another rule recorded for the same document."""

    def configure(self, other: str) -> None:
        self.other = other

    def process_doc(self, doc):
        return [len(self.results.get(self.other, doc.url) or [])]


class TextUrls(Rule):
    """Enqueues URLs written in the page's text (not links): only a rule can find them."""

    def process_doc(self, doc):
        for path in re.findall(r"see (/\S+\.html)", doc.text):
            self.enqueue(path)


class Boom(Rule):
    def process_doc(self, doc):
        raise RuntimeError("rule bug")


class Totals(Rule):
    """close(): how many documents it saw."""

    def configure(self) -> None:
        self.seen = 0

    def process_doc(self, doc):
        self.seen += 1

    def close(self):
        return {"documents": self.seen}


class NotARule:
    pass
