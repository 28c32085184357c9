"""Items the crawl emits (so Scrapy's feed exports write them)."""

from __future__ import annotations

from dataclasses import dataclass, field

import scrapy

from webrace.records.aci import Aci, PageAcis


class Page(scrapy.Item):
    """One fetched page, with the owners it was fetched for."""

    url = scrapy.Field()  # final URL (after redirects), canonical form
    parent_url = scrapy.Field()  # page whose link led here; None for a URD's own page
    depth = scrapy.Field()  # links followed from the nearest URD start page (0 = start page)
    owners = scrapy.Field()  # sorted user ids of every URD this page was fetched for
    urd_ids = scrapy.Field()  # sorted ids of those URDs
    urgent = scrapy.Field()  # True when any of those URDs is urgent
    status = scrapy.Field()  # HTTP status (a page served fresh, without a request: its stored status)
    content_type = scrapy.Field()  # media type without parameters, "" when absent
    size = scrapy.Field()  # body bytes
    links = scrapy.Field()  # normalised outgoing links kept by the extractor pipe
    ip = scrapy.Field()  # address of the origin server
    fetched_at = scrapy.Field()  # ISO 8601 UTC time of the fetch
    not_modified = scrapy.Field()  # True: a 304, or served fresh (no request); stored links were followed
    version = scrapy.Field()  # number of the stored version this page now is (None: no body stored)
    # True: this fetch stored a new version, or found one an earlier fetch stored whose item
    # never went out (a worker died, Redis went away: MetaInfo.unannounced; counted as webrace/announced_again)
    new_version = scrapy.Field()
    digest = scrapy.Field()  # SHA-256 of that version's body (its name in the object store)
    kept = scrapy.Field()  # True: that body is in the object store (False: dropped as irrelevant, or none)
    relevant_to = scrapy.Field()  # owners who got an ACI for this version (only on new versions judged)
    round = scrapy.Field()  # id of the crawl round that fetched it


@dataclass
class AciBatch:
    """The ACIs of one new version of one page, leaving the crawl as one item however many
    owners they are for: Scrapy's item machinery (signals, pipelines) costs per item, so a
    page relevant to 10,000 owners costs it one item, not 10,000. Feed exports still write
    one ACI per line or row (:class:`webrace.exporters.FeedExporter` unrolls the batch);
    each owner's list is split out by the ACI store and by delivery."""

    url: str  # the page's URL
    acis: PageAcis | list[Aci] = field(default_factory=list)  # iterating either gives Aci objects


class ServiceProfile(scrapy.Item):
    """DynaBot: a source that is a member of the service class, and exactly how to query it."""

    kind = scrapy.Field()  # "profile"
    source = scrapy.Field()  # the start URL
    service_class = scrapy.Field()  # the SCD's name
    form = scrapy.Field()  # {"index", "action", "method", "enctype"} of the form that worked
    button = scrapy.Field()  # name/value of the button clicked (None: none)
    arguments = scrapy.Field()  # argument name -> parameter name it went into
    user_arguments = scrapy.Field()  # the arguments a person supplies when querying (SCD user="true")
    fields = scrapy.Field()  # every name-value pair sent (defaults included), in order
    states = scrapy.Field()  # the vertices traversed: [{"vertex", "url"}], start first
    result_type = scrapy.Field()  # the type the result page matched
    extracted = scrapy.Field()  # the result vertex's resultType objects: [{"text", "elements"}]
    empty = scrapy.Field()  # True: the page matched but held no resultType object (an empty result)
    probes = scrapy.Field()  # requests sent to the source after its start page
    # what backs the claim: {"control": argument -> the nonsense value sent (None: no value to replace),
    # "reason", "no_results": what the control's answer said} (webrace.dynabot.evidence)
    evidence = scrapy.Field()


class ServiceTrace(scrapy.Item):
    """DynaBot: one analysed source, whatever the outcome."""

    kind = scrapy.Field()  # "trace"
    source = scrapy.Field()  # the start URL
    outcome = scrapy.Field()  # "match", "no-match", "no-form" or "error"
    # [{"index", "action", "method", "parameters", "kept", "submissions", "left_alone"}] (kept: passed the form
    # filter; left_alone: why the form is never submitted, webrace.dynabot.sideeffects)
    forms = scrapy.Field()
    parameters = scrapy.Field()  # form parameters on the page, in all
    probes = scrapy.Field()  # requests sent after the start page (form submissions and followed links)
    submissions = scrapy.Field()  # form submissions among them
    skipped = scrapy.Field()  # requests not sent: robots.txt, errors ({reason: count})
    seconds = scrapy.Field()  # from the start page's response to the decision
    reason = scrapy.Field()  # for no-match / error: why, in words
    steps = scrapy.Field()  # per probe: {"probe", "form", "why" (why it was chosen), "answer", "heard"}
