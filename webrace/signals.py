"""WebRACE's own Scrapy signals (sent with ``crawler.signals.send_catch_log``).

``round_opened(round_id, urds)``: a crawl round starts here (embedded) or this worker meets
a shared round for the first time (distributed); ``urds`` maps URD id to
:class:`webrace.urd.Urd`. The exclusion middleware asks robots.txt that was unreachable
again, and learns the URDs' scopes to judge redirects.
"""

round_opened = object()
