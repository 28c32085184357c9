"""Redirects of a round's pages: the target is claimed in the round's frontier before it is
downloaded (one download per page per round, however it is reached).

Scrapy's ``RedirectMiddleware`` follows a ``Location`` by returning a new request, which
carries the page's round context (``meta["webrace"]``) and ``dont_filter`` (the frontier, not
Scrapy's dupefilter, decides what a round downloads). This subclass, in its place
(``DOWNLOADER_MIDDLEWARES``), first has the target judged as the exclusion middleware judges a
redirect (trap rules, the URDs' scope: a refused target is claimed by nobody), then asks the
spider to claim it (:meth:`webrace.spiders.urd.UrdSpider.claim_redirect`):

- claimed (new to the round): the redirect is followed, and a link to the target offered
  later (by another page, another worker) is merged into this page instead of downloaded;
- the round has the target already (pending or fetched): the redirect is not followed; the
  redirect response goes to the spider with :data:`REDIRECT_SEEN` in its meta, and the page
  ends as a duplicate of the target (its URDs merged into it).

Requests of other spiders (DynaBot), or without a round, are redirected as Scrapy does.
"""

from __future__ import annotations

from scrapy import Request
from scrapy.downloadermiddlewares.redirect import RedirectMiddleware as ScrapyRedirectMiddleware
from scrapy.exceptions import IgnoreRequest
from scrapy.http import Response

from webrace.middlewares.exclusion import IGNORED, ExclusionMiddleware

REDIRECT_SEEN = "webrace_redirect_seen"  # meta: (target, URDs gained, its state): the round had it
REDIRECT_CLAIMED = "webrace_redirect_claimed"  # meta: the targets claimed on the way to this request


class RedirectMiddleware(ScrapyRedirectMiddleware):
    async def process_response(self, request: Request, response: Response) -> Request | Response:
        redirected = super().process_response(request, response)
        if not isinstance(redirected, Request) or "webrace" not in request.meta:
            return redirected
        claim = getattr(self.crawler.spider, "claim_redirect", None)
        if claim is None:
            return redirected
        self._judge(redirected, request)
        if not await claim(request, redirected.url):
            return response
        redirected.meta[REDIRECT_CLAIMED] = [*request.meta.get(REDIRECT_CLAIMED, ()), redirected.url]
        return redirected

    def _judge(self, redirected: Request, request: Request) -> None:
        """The exclusion middleware's judgement of the target, before it is claimed (it
        judges it again when the request passes, unchanged)."""
        exclusion = self.crawler.get_downloader_middleware(ExclusionMiddleware)
        if exclusion is None:
            return
        try:
            exclusion.judge_redirect(redirected)
        except IgnoreRequest:
            request.meta[IGNORED] = redirected.meta.get(IGNORED)  # counted there: the errback does not
            raise
