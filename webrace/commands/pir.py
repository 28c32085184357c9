"""``scrapy pir serve``: the Personal Information Roadmap's old name for ``scrapy web serve``
(the same server, options and pages)."""

from __future__ import annotations

from webrace.commands.web import Command as WebCommand


class Command(WebCommand):
    def short_desc(self) -> str:
        return "The same as `scrapy web serve` (its old name): each owner's pages, after a login"
