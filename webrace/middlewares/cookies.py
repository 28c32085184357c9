"""Scrapy's CookiesMiddleware, deciding which cookie domains are public suffixes with the snapshot
of the public suffix list that tldextract ships (:func:`webrace.urls.public_suffix`).

Scrapy's own middleware asks a ``TLDExtract()`` built with tldextract's defaults, which
downloads the list from publicsuffix.org on first use (and, offline, logs a long traceback
before falling back to the snapshot): the first cookie of a crawl made a request to the
internet that no setting, robots.txt or exclusion list governs. The decision is Scrapy's;
only the list it is taken from differs.
"""

from __future__ import annotations

from collections.abc import Iterable
from http.cookiejar import Cookie

from scrapy import Request
from scrapy.downloadermiddlewares.cookies import CookiesMiddleware as ScrapyCookiesMiddleware
from scrapy.http.cookies import CookieJar
from scrapy.utils.httpobj import urlparse_cached

from webrace.urls import public_suffix


class CookiesMiddleware(ScrapyCookiesMiddleware):
    def _process_cookies(self, cookies: Iterable[Cookie], *, jar: CookieJar, request: Request) -> None:
        # Scrapy's method (2.19), with public_suffix() for its module-level TLDExtract()
        hostname = urlparse_cached(request).hostname
        if hostname is None:
            return
        request_domain = hostname.lower()
        for cookie in cookies:
            cookie_domain = cookie.domain.removeprefix(".")
            if cookie_domain and public_suffix(cookie_domain):
                if cookie_domain != request_domain:
                    continue  # a cookie for every site under a public suffix: refused
                cookie.domain = request_domain
            jar.set_cookie_if_ok(cookie, request)
