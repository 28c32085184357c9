"""Items the crawl emits (so Scrapy's feed exports write them)."""

import scrapy


class Page(scrapy.Item):
    """One fetched page, with the owners it was fetched for."""

    url = scrapy.Field()  # final URL (after redirects), canonical form
    parent_url = scrapy.Field()  # page whose link led here; None for a URD's own page
    depth = scrapy.Field()  # links followed from the nearest URD start page (0 = start page)
    owners = scrapy.Field()  # sorted user ids of every URD this page was fetched for
    urd_ids = scrapy.Field()  # sorted ids of those URDs
    urgent = scrapy.Field()  # True when any of those URDs is urgent
    status = scrapy.Field()  # HTTP status
    content_type = scrapy.Field()  # media type without parameters, "" when absent
    size = scrapy.Field()  # body bytes
    links = scrapy.Field()  # normalised outgoing links kept by the extractor pipe
    ip = scrapy.Field()  # address of the origin server
    fetched_at = scrapy.Field()  # ISO 8601 UTC time of the fetch
    not_modified = scrapy.Field()  # True: the server answered 304, stored links were followed
    version = scrapy.Field()  # number of the stored version this page now is (None: no body stored)
    new_version = scrapy.Field()  # True: this fetch stored a new version
    digest = scrapy.Field()  # SHA-256 of that version's body (its name in the object store)
    kept = scrapy.Field()  # True: that body is in the object store (False: dropped as irrelevant, or none)
    relevant_to = scrapy.Field()  # owners who got an ACI for this version (only on new versions judged)
    round = scrapy.Field()  # id of the crawl round that fetched it
