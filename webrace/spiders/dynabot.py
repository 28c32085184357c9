"""``scrapy crawl dynabot -a scd=FILE -a seeds=FILE [-a frontier=trace|randomwalk|linkhint]
[-a hints=blast,sequence] [-a sites=any|DOMAIN,...] [-a probe=V,...] [-a ARGUMENT=V,...]``:
DynaBot (seed 004, chapter II).

Every page the frontier yields is a candidate source: its forms are analysed, the service
class description's probing templates are turned into probes (``webrace.dynabot.analyzer``),
and the probes are sent one after the other (a source is left at its first match) as
ordinary Scrapy requests, so robots.txt, per-host politeness and the user agent apply to
them as to any request. Each response is matched against the control flow graph, following
intermediate pages (a second form, a link to the results) until a result vertex.

Only queries are submitted (``webrace.dynabot.sideeffects``): a form with side effects
(contact, comment, sign-up, log-in, order...) is left alone and the trace says why, POST
forms only where the class says they are queries, within a per-site cap. A result is claimed
only when a control probe, the same request with a value that cannot match, gets an answer
that differs as the class expects (``webrace.dynabot.evidence``). Typed-in values come from
``-a`` (``-a keywords=...``, ``-a probe=...``), the class, then the start page's own words,
the words of answers that found nothing, the class's further values (``webrace.dynabot.values``).
A search box in no form is typed into, and Enter pressed, in the browser (``webrace.dynabot.browser``).

Items: a ``ServiceProfile`` (``kind: "profile"``) per member found, with exactly how to
query it, and a ``ServiceTrace`` (``kind: "trace"``) per analysed source. At the end the
statistics of the seed's Tables 2-5 are logged and written to
``WEBRACE_DATA_DIR/last-dynabot.json``.

Frontiers (section 2.5): ``trace`` analyses the seed list in order and follows no link;
``randomwalk`` follows the links of every page, in random order; ``linkhint`` follows them
too, URLs containing a hint word first (deepest first among them). Both stay on the seeds'
sites (``-a sites=`` adds others, or ``any``), fetch pages only (no JSON, CSV, images...: by
extension before the request, by Content-Type once its headers arrive) and analyse a source
once however many sort orders, pages or formats link to it, and a form the site repeats on
every page (its search box) once (``webrace.dynabot.links``).
"""

from __future__ import annotations

import json
import logging
import random
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import urlsplit

import lxml.html
import scrapy
from scrapy import signals
from scrapy.exceptions import IgnoreRequest, NotConfigured, StopDownload
from scrapy.http import HtmlResponse, Response, TextResponse
from scrapy.linkextractors import LinkExtractor
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet.task import deferLater
from twisted.python.failure import Failure

from scd import SCDError, ServiceClass, load_scd
from webrace.backends import data_dir
from webrace.dynabot import browser
from webrace.dynabot.analyzer import (
    Probe,
    Step,
    extract,
    form_filter,
    hint_score,
    next_step,
    onward,
    plan_probes,
    same_site,
    submit_button,
    wizard_step,
)
from webrace.dynabot.answers import MAX_MARKUP, refinements, said
from webrace.dynabot.browser import needs_browser
from webrace.dynabot.evidence import (
    MASK,
    Answer,
    Evidence,
    echoed,
    judge,
    mask_in_tags,
    nonsense,
    page_results_only,
    text_of,
)
from webrace.dynabot.forms import Form, Parameter, Upload, analyze_forms, form_data, form_request
from webrace.dynabot.links import NOT_PAGES, Sites, form_key, html_media, source_key
from webrace.dynabot.sideeffects import classify
from webrace.dynabot.stats import format_report, report
from webrace.dynabot.values import NEXT_VALUE, PROBE, answer_words, parse_values, site_words, vary, with_value
from webrace.items import ServiceProfile, ServiceTrace
from webrace.middlewares.exclusion import IGNORED
from webrace.urls import BadURL, normalize
from webrace.userfiles import UserFileTooLarge, read_bounded

logger = logging.getLogger(__name__)
EXTRACT_SLACK = 5  # results read per result kept: those the control's answer shows too are dropped

FRONTIERS = ("trace", "randomwalk", "linkhint")
HTTP_ERRORS = list(range(400, 600))  # probes read error answers too: they say what is wrong
MAX_QUEUED = 20  # refinements kept waiting per source
MAX_PRELUDES = 3  # pages followed on the way to a source's form (refresh, frame, wizard steps)
POLL_WAIT = 0.5  # seconds before following a "still running" page to another like it, doubled each hop


def browser_wanted(settings: Any) -> bool:
    """WEBRACE_DYNABOT_BROWSER: "auto" (on when scrapy-playwright and Chromium are there), True, False."""
    value = str(settings.get("WEBRACE_DYNABOT_BROWSER", "auto")).strip().lower()
    return value not in ("false", "0", "off", "no")


def _parameter(form: Form, name: str | None) -> Parameter | None:
    return next((p for p in form.parameters if p.name == name), None) if name else None


def read_seeds(path: str) -> tuple[list[str], list[str]]:
    """The seed URLs of a file (one per line, ``#`` comments), and the problems of the lines
    that are not URLs (``FILE:LINE: reason``)."""
    seeds, problems = [], []
    try:
        lines = read_bounded(path).decode("utf-8").splitlines()
    except UserFileTooLarge as exc:
        return [], [str(exc)]
    except (OSError, UnicodeDecodeError) as exc:
        return [], [f"{path}: cannot read the seed list: {exc}"]
    for number, line in enumerate(lines, 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        try:
            url = normalize(line)
        except BadURL as exc:
            problems.append(f"{path}:{number}: not a URL: {exc}")
            continue
        if url not in seeds:
            seeds.append(url)
    return seeds, problems


def check_arguments(scd: str | None, seeds: str | None, frontier: str,
                    max_pages: str | int | None = None, sites: str = "") -> tuple[ServiceClass, list[str]]:
    """The service class and seed URLs, or ValueError with every problem (one per line)."""
    problems = []
    service = None
    if not scd:
        problems.append("missing -a scd=FILE (a service class description, e.g. serviceclasses/nucleotide_blast.xml)")
    else:
        try:
            service = load_scd(scd)
        except SCDError as exc:
            problems.extend(str(exc).splitlines())
        except OSError as exc:
            problems.append(f"{scd}: cannot read: {exc.strerror or exc}")
    urls: list[str] = []
    if not seeds:
        problems.append("missing -a seeds=FILE (start URLs, one per line)")
    else:
        urls, bad = read_seeds(seeds)
        problems.extend(bad)
        if not urls and not bad:
            problems.append(f"{seeds}: no URL in the seed list")
    if frontier not in FRONTIERS:
        problems.append(f"unknown frontier {frontier!r}: expected one of {', '.join(FRONTIERS)}")
    if max_pages is not None and not str(max_pages).isdigit():
        problems.append(f"-a max_pages={max_pages}: expected a whole number of pages")
    problems.extend(Sites.problems(sites))
    if problems:
        raise ValueError("\n".join(problems))
    assert service is not None  # noqa: S101 - for the type checker: no service class is among `problems`
    return service, urls


@dataclass
class Source:
    """One source under analysis."""

    url: str
    forms: list[Form]
    plan: list[Probe]
    started: float
    priority: int = 0  # the start page's: a source's probes go with it in the frontier
    kept_forms: set[int] = field(default_factory=set)
    next_probe: int = 0
    pending: list[tuple[scrapy.Request, list]] = field(default_factory=list)  # follow-ups not sent yet
    requests: int = 0  # probes sent (submissions and followed links)
    submissions: int = 0
    per_form: Counter = field(default_factory=Counter)  # form index -> submissions
    skipped: Counter = field(default_factory=Counter)
    done: bool = False
    page_markup: str = ""  # the start page: what an answer says is what it adds to it
    refine: list[Probe] = field(default_factory=list)  # probes the answers suggested, best first
    sent: set = field(default_factory=set)  # Probe.key() of every probe sent
    requests_sent: set = field(default_factory=set)  # (method, URL, body) of every probe sent
    steps: list[dict] = field(default_factory=list)  # per probe: why it was sent, what came back
    answered: Counter = field(default_factory=Counter)  # "page", "HTTP 500", failures: how probes were answered
    hop_limits: int = 0  # probes whose intermediate pages reached the hop limit
    form_page: str = ""  # the page whose forms are probed (the start page, or where it led)
    preludes: int = 0  # requests on the way to that page (refresh, frame, wizard step)
    before: list[dict] = field(default_factory=list)  # their states, for the profile
    browser: bool = False  # its form exists only in the browser (built by scripts)
    browser_requests: int = 0  # requests made through the browser
    scripted: str = ""  # why answers built by scripts were not shown in the browser
    left_alone: dict[int, str] = field(default_factory=dict)  # form index -> why it is never submitted
    claim: Claim | None = None  # a result waiting for its control probe's answer
    blocked: list[str] = field(default_factory=list)  # claims a control probe did not back, and why
    answer_words: int = 0  # probes planned with a word an answer showed (webrace.dynabot.values)

    def summary(self) -> str:
        if not self.answered:
            return "no other answer" if self.blocked else "no probe was answered"
        return "answers: " + ", ".join(f"{n} {'pages' if k == 'page' else k}" for k, n in sorted(self.answered.items()))


@dataclass
class Claim:
    """A probe's answer that matched a result vertex, waiting for the control probe that backs it
    (webrace.dynabot.evidence): the same request with a value that cannot match."""

    probe: Probe
    states: list[dict]
    vertex: Any  # the result vertex matched
    markup: str  # the hit's answer
    values: dict[str, str]
    control: Probe | None = None  # sent


class DynaBotSpider(scrapy.Spider):
    name = "dynabot"
    # A refresh is read by the spider (the delay honoured, the hop counted, the trace told),
    # not followed at once by Scrapy's MetaRefreshMiddleware.
    custom_settings = {"METAREFRESH_ENABLED": False}
    def __init__(self, scd: str | None = None, seeds: str | None = None, frontier: str = "trace",
                 hints: str = "", max_pages: str | int | None = None, seed: str | int | None = None,
                 sites: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        try:
            self.service, self.seeds = check_arguments(scd, seeds, frontier, max_pages, sites)
        except ValueError as exc:
            raise NotConfigured(f"dynabot: {exc}") from None
        # -a probe=V,... and -a ARGUMENT=V,...: probe values tried before the class's (webrace.dynabot.values)
        names = {a.name for e in self.service.examples for a in e.arguments} | {PROBE}
        self.given_values, problems = parse_values(self.service, {k: v for k, v in kwargs.items() if k in names})
        if problems:
            raise NotConfigured("dynabot: " + "\n".join(problems))
        self.frontier = frontier
        self.sites = Sites(self.seeds, sites)
        if frontier != "trace" and not self.sites.any:
            # Scrapy's OffsiteMiddleware drops the rest, redirects off the sites included
            self.allowed_domains = self.sites.domains
        self.source_keys = {source_key(url) for url in self.seeds}  # sources requested or analysed
        self.form_keys: set[tuple] = set()  # forms analysed on a page of a link frontier
        self.hints = [h.strip().lower() for h in hints.split(",") if h.strip()]
        self.max_pages_arg = max_pages
        self.random = random.Random(seed)  # noqa: S311 - probe order, reproducible from -a seed; no secret
        self.traces: list[dict] = []
        self.pages = 0
        self.page_statuses: Counter = Counter()
        self.page_types: Counter = Counter()
        self.links = LinkExtractor(deny_extensions=NOT_PAGES)
        # what a person fills in when querying a member (user="true" in any probing template)
        self.user_arguments = {a.name for e in self.service.examples for a in e.arguments if a.user}
        self.posts: Counter = Counter()  # site (host:port) -> POSTs sent
        origins = [v for v in self.service.controlflow.origins() if v.type == "HTMLform"]
        self.origin_post = any(v.post for v in origins)  # the start page's POST forms may be queries
        self.origin_allow = frozenset().union(*(v.allow for v in origins))
        # arguments whose values the result types look for: their echoes are no results
        self.echo_arguments = set().union(*(echoed(self.service, v) for v in self.service.controlflow.results()))

    @classmethod
    def update_settings(cls, settings: Any) -> None:
        """The browser mode (webrace.dynabot.browser), when it is wanted and can run: Chromium through
        scrapy-playwright for pages that build their form with scripts; every other request keeps
        Scrapy's own download handler."""
        super().update_settings(settings)
        if browser_wanted(settings) and browser.available(settings) is None:
            settings.setdict(browser.browser_settings(settings), priority="spider")

    @classmethod
    def from_crawler(cls, crawler: Any, *args: Any, **kwargs: Any) -> DynaBotSpider:
        spider = super().from_crawler(crawler, *args, **kwargs)
        settings = crawler.settings
        spider.per_form = settings.getint("WEBRACE_DYNABOT_MAX_PROBES_PER_FORM")
        spider.per_source = settings.getint("WEBRACE_DYNABOT_MAX_PROBES_PER_SOURCE")
        spider.max_hops = settings.getint("WEBRACE_DYNABOT_MAX_HOPS")
        spider.max_wait = settings.getfloat("WEBRACE_DYNABOT_MAX_REFRESH_WAIT")
        spider.max_response = settings.getint("WEBRACE_DYNABOT_MAX_RESPONSE_BYTES")
        spider.browser_budget = settings.getint("WEBRACE_DYNABOT_BROWSER_PROBES")
        why_not = (browser.available(settings) if browser_wanted(settings)
                   else "off (-s WEBRACE_DYNABOT_BROWSER=auto turns it on)")
        if why_not and str(settings.get("WEBRACE_DYNABOT_BROWSER")).lower() in ("true", "1"):
            raise NotConfigured(f"dynabot: WEBRACE_DYNABOT_BROWSER is on but the browser cannot run: {why_not}")
        spider.browser_off = why_not  # None: the browser mode is on
        spider.use_hints = settings.getbool("WEBRACE_DYNABOT_USE_HINTS")
        spider.max_posts = settings.getint("WEBRACE_DYNABOT_MAX_POSTS_PER_SITE")
        spider.max_extracted = settings.getint("WEBRACE_DYNABOT_MAX_EXTRACTED")
        spider.site_words = settings.getint("WEBRACE_DYNABOT_SITE_WORDS")
        spider.max_pages = (int(spider.max_pages_arg) if spider.max_pages_arg
                            else settings.getint("WEBRACE_DYNABOT_MAX_PAGES"))
        crawler.signals.connect(spider.closed_report, signal=signals.spider_closed)
        crawler.signals.connect(spider.headers_received, signal=signals.headers_received)
        return spider

    # -- the frontier ------------------------------------------------------------------------

    async def start(self):
        for number, url in enumerate(self.seeds):
            priority = -number if self.frontier == "trace" else self._priority(url, 0)
            yield self.page_request(url, depth=0, priority=priority)

    def page_request(self, url: str, depth: int, priority: int) -> scrapy.Request:
        self.pages += 1
        return scrapy.Request(url, callback=self.parse_page, errback=self.page_failed, priority=priority,
                              cb_kwargs={"depth": depth}, meta={"dynabot": "page"})

    def headers_received(self, headers: Any, body_length: int, request: scrapy.Request, spider: Any) -> None:
        """A frontier page that is not HTML is not downloaded further: it has no form and no link."""
        if request.meta.get("dynabot") == "page" and self.frontier != "trace" \
                and not html_media(headers.get("Content-Type")):
            self.crawler.stats.inc_value("dynabot/pages_not_html")
            raise StopDownload(fail=False)

    def _priority(self, url: str, depth: int) -> int:
        if self.frontier == "randomwalk":
            return self.random.randrange(1_000_000)
        if self.frontier == "linkhint":
            hinted = any(hint in url.lower() for hint in self.hints)
            return (1_000_000 if hinted else 0) + depth  # hinted first, deepest first among equals
        return 0

    def follow_links(self, response: Response, depth: int):
        """The links of an HTML page to pages of the seeds' sites, a source not requested yet each."""
        if self.frontier == "trace" or not isinstance(response, HtmlResponse):
            return
        for link in self.links.extract_links(response):
            if self.pages >= self.max_pages:
                self.crawler.stats.inc_value("dynabot/links_over_max_pages")
                return
            try:
                url = normalize(link.url)
            except BadURL:
                continue
            key = source_key(url)
            if not self.sites.allows(url):
                self.crawler.stats.inc_value("dynabot/links_offsite")
            elif key in self.source_keys:
                self.crawler.stats.inc_value("dynabot/links_same_source")
            else:
                self.source_keys.add(key)
                yield self.page_request(url, depth + 1, self._priority(url, depth + 1))

    @staticmethod
    def _form_key(form: Form) -> tuple:
        return form_key(form.method, form.action, (p.name for p in form.parameters))

    def _fresh_source(self, response: Response) -> bool:
        """Whether a frontier page is a source not analysed yet: a redirect may end on one
        another link requested (another sort order of the same table, its canonical URL)."""
        first = (response.meta.get("redirect_urls") or [response.url])[0]
        key = source_key(response.url)
        if self.frontier == "trace" or key == source_key(first):
            return True
        if key in self.source_keys:
            self.crawler.stats.inc_value("dynabot/pages_same_source")
            return False
        self.source_keys.add(key)
        return True

    # -- a candidate source ----------------------------------------------------------------------

    def parse_page(self, response: Response, depth: int, source: Source | None = None):
        """A candidate source's page: the start page, or (``source`` given) a page it led to
        before any probe: where a refresh or a frame sends the browser, a wizard's next step."""
        if source is None:
            self.page_statuses[response.status] += 1
            media = (response.headers.get("Content-Type") or b"").decode("latin-1").split(";")[0].strip() or "none"
            self.page_types[media] += 1
            fresh = self._fresh_source(response)  # asked before its own links are counted
            yield from self.follow_links(response, depth)
            if not fresh:
                return
            source = Source(response.url, [], [], time.monotonic(), response.request.priority)
        elif source.done:
            return
        else:
            media = (response.headers.get("Content-Type") or b"").decode("latin-1").split(";")[0].strip() or "none"
        if response.status >= 400 or not isinstance(response, TextResponse) or not html_media(
                response.headers.get("Content-Type")):
            if self.frontier == "trace" or source.preludes:
                reason = f"HTTP {response.status}" if response.status >= 400 else f"not an HTML page ({media})"
                yield self.trace(source, "error" if response.status >= 400 else "no-form", reason)
            return
        forms = analyze_forms(response.body, response.url, response.encoding)
        source.forms, source.form_page, source.page_markup = forms, response.url, response.text[:MAX_MARKUP]
        if not forms:
            self.crawler.stats.inc_value("dynabot/pages_without_forms")
            moved = onward(response.text, response.url)
            if moved and moved.urls[0] != response.url and source.preludes < MAX_PRELUDES:
                # a page that sends the browser on, or shows its form in a frame: that page is the source's
                yield self._prelude(source, scrapy.Request(moved.urls[0]), f"{moved.how} to {moved.urls[0]}", depth)
                return
            if needs_browser(response.body, []) and not source.browser:
                if (request := self._render(source, response, depth)) is not None:
                    yield request
                    return
            if self.frontier == "trace" or source.preludes:
                yield self.trace(source, "no-form", "the page has no form" + self._browser_note(source, response, []))
            return
        usable = self._usable(source, forms, response.url)
        if self.frontier != "trace" and not source.preludes and usable:
            # a site's search box on every page is one source: probed from the first page it is on
            fresh = [f for f in usable if self._form_key(f) not in self.form_keys]
            self.form_keys.update(self._form_key(f) for f in fresh)
            if not fresh:
                self.crawler.stats.inc_value("dynabot/pages_with_known_forms")
                return
            usable = fresh
        source.plan = plan_probes(usable, self.service, self.per_form, self.per_source, self.use_hints)
        if self.use_hints:  # each probe with the command line's values, the class's, the site's own words
            known = [v for e in self.service.examples for a in e.arguments for v in (a.value, *a.also)]
            words = site_words(response.text[:MAX_MARKUP], self.site_words, known)
            source.plan = vary(source.plan, self.service, self.given_values, words)
        source.kept_forms = {p.form.index for p in source.plan}
        source.next_probe = 0
        if not source.plan:
            step = wizard_step(usable, self.service) if self.use_hints and not source.browser else None
            kept = [form for form, _ in form_filter(usable, self.service)]
            if step is None and needs_browser(response.body, kept) and not source.browser:
                if (request := self._render(source, response, depth)) is not None:
                    yield request
                    return
            if step is not None and source.preludes < MAX_PRELUDES and self._may_post(step[0].method, step[0].action):
                form, assignment, button, why = step
                request = form_request(form, assignment, button=button)
                source.submissions += 1
                yield self._prelude(source, request, why, depth)
                return
            if usable or not forms:
                reason = "no form can take the probing templates' required arguments" + self._browser_note(
                    source, response, kept)
            elif source.left_alone:
                reason = "no form is a query"
            else:
                reason = "every form posts to another site: " + ", ".join(sorted({f.action for f in forms}))
            yield self.trace(source, "no-match", reason + self._left_alone_note(source))
            return
        yield from self.send_next(source)

    def _usable(self, source: Source, forms: list[Form], url: str) -> list[Form]:
        """The forms DynaBot may submit: on the page's site, and queries, never forms with side
        effects (webrace.dynabot.sideeffects); each one left alone is told, with why."""
        usable = []
        for form in forms:
            if not same_site(form.action, url):
                source.skipped["form posts to another site"] += 1
                continue
            verdict = classify(form, post_query=self.origin_post, allow=self.origin_allow)
            if verdict.query:
                usable.append(form)
                continue
            source.left_alone[form.index] = verdict.reason
            self.crawler.stats.inc_value(f"dynabot/forms_left_alone/{verdict.kind}")
            logger.info("dynabot: form %d of %s (%s %s) left alone: %s", form.index, url, form.method, form.action,
                        verdict.reason)
        return usable

    @staticmethod
    def _left_alone_note(source: Source) -> str:
        if not source.left_alone:
            return ""
        return "; left alone: " + "; ".join(f"form {n}, {why}" for n, why in sorted(source.left_alone.items()))

    def _may_post(self, method: str, url: str, reserve: int = 0) -> bool:
        """Whether one more request may go to ``url``'s site: a POST within the per-site cap
        (``reserve`` more kept back, for a control probe), counted; any other method."""
        if method != "POST":
            return True
        site = urlsplit(url).netloc.lower()
        if self.posts[site] + 1 + reserve > self.max_posts:
            self.crawler.stats.inc_value("dynabot/posts_over_cap")
            return False
        self.posts[site] += 1
        self.crawler.stats.inc_value("dynabot/posts")
        return True

    def _render(self, source: Source, response: Response, depth: int) -> scrapy.Request | None:
        """The page again, through the browser, when it builds its form with scripts (browser mode)."""
        if self.browser_off or source.preludes >= MAX_PRELUDES or source.browser_requests >= self.browser_budget:
            return None
        source.browser = True
        source.browser_requests += 1
        request = browser.render_request(response.url)
        return self._prelude(source, request, "the page has scripts and no usable form: shown in the browser",
                             depth, keep_meta=True)

    def _browser_note(self, source: Source, response: Response, forms: list) -> str:
        if source.browser or not needs_browser(response.body, forms):
            return ""
        if self.browser_off:
            return f"; the page has scripts that may build one: browser mode {self.browser_off}"
        return f"; browser budget ({self.browser_budget}) spent"

    def _prelude(self, source: Source, request: scrapy.Request, why: str, depth: int,
                 keep_meta: bool = False) -> scrapy.Request:
        """A request on the way to the source's form (a refresh, a frame, a wizard's step): counted
        as a probe, told in the trace, answered to :meth:`parse_page` with the source."""
        source.preludes += 1
        source.requests += 1
        source.before.append({"vertex": "before", "url": request.url})
        source.steps.append({"probe": len(source.steps) + 1, "form": None, "why": why, "answer": ""})
        meta = {**(request.meta if keep_meta else {}), "dynabot": "probe", "dont_retry": True,
                "download_maxsize": self.max_response}
        return request.replace(callback=self.parse_page, errback=self.prelude_failed, dont_filter=True,
                               priority=source.priority, cb_kwargs={"depth": depth, "source": source}, meta=meta)

    def prelude_failed(self, failure: Failure):
        source: Source = failure.request.cb_kwargs["source"]
        reason = failure.request.meta.get(IGNORED) or failure.type.__name__
        source.skipped[reason] += 1
        if not source.done:
            yield self.trace(source, "error", f"page on the way to the form not fetched: {reason}")

    def page_failed(self, failure: Failure):
        request = failure.request
        reason = request.meta.get(IGNORED) or failure.type.__name__
        self.page_statuses[reason] += 1
        if self.frontier == "trace":
            source = Source(request.url, [], [], time.monotonic())
            yield self.trace(source, "error", f"start page not fetched: {reason}")

    # -- probing ----------------------------------------------------------------------------------

    def _next_probe(self, source: Source) -> Probe | None:
        """The best refinement the answers suggested, else the plan's next probe; never one sent
        before, never over the per-form budget."""
        while source.refine:
            probe = source.refine.pop(0)
            if probe.key() not in source.sent and source.per_form[probe.form.index] < self.per_form:
                return probe
        while source.next_probe < len(source.plan):
            probe = source.plan[source.next_probe]
            source.next_probe += 1
            if probe.key() not in source.sent and source.per_form[probe.form.index] < self.per_form:
                return probe
        return None

    def send_next(self, source: Source):
        """The next follow-up of the current probe, else a claim's control probe, else the next
        probe, else the verdict."""
        while not source.done:
            if source.claim is not None:  # over the budget too: a claim is not left unchecked
                if source.claim.control is None:
                    sent = self._control(source)
                    if sent:
                        yield from sent
                        return
                elif source.pending:  # the control probe's pages (bounded by the hop limit)
                    request, _ = source.pending.pop(0)
                    source.requests += 1
                    yield request
                    return
                else:
                    self._blocked(source, "its control probe's pages ended without an answer")
                continue
            if source.requests >= self.per_source:
                yield self.trace(source, "no-match", f"probe budget ({self.per_source}) spent; " + source.summary())
                return
            if source.pending:
                request, _ = source.pending.pop(0)
                source.requests += 1
                yield request
                return
            if source.hop_limits >= 2:
                yield self.trace(source, "no-match", f"intermediate pages never led to a result ({self.max_hops} "
                                 f"pages followed, twice); " + source.summary())
                return
            probe = self._next_probe(source)
            if probe is None:
                # "error" only when the service never answered: 5xx and failures; a 4xx is an answer ("wrong input")
                answers = [k for k in source.answered if k == "page" or k.startswith("HTTP 4")]
                outcome = "error" if source.answered and not answers else "no-match"
                yield self.trace(source, outcome, "no probe's response matched a result of the service class; "
                                 + source.summary())
                return
            if source.browser and source.browser_requests >= self.browser_budget:
                yield self.trace(source, "no-match", f"browser budget ({self.browser_budget}) spent; "
                                 + source.summary())
                return
            if not self._may_post(probe.form.method, probe.form.action, reserve=1):
                yield self.trace(source, "no-match", f"the site's POST cap ({self.max_posts}, "
                                 "WEBRACE_DYNABOT_MAX_POSTS_PER_SITE) is reached; " + source.summary())
                return
            source.sent.add(probe.key())
            request = self._probe_request(source, probe)
            if request is None:
                continue
            yield request
            return

    def _probe_request(self, source: Source, probe: Probe) -> scrapy.Request | None:
        """The request of a probe (in the browser when the form exists only there), counted."""
        kwargs = self._probe_kwargs(source, probe, [("start", source.form_page or source.url)], probe.form, 0)
        try:
            if source.browser:  # the form exists in the browser only: filled and submitted there
                kwargs["meta"] = {**kwargs["meta"], "download_maxsize": self.max_response}
                request = browser.probe_request(source.form_page, probe.form.index, probe.assignment,
                                                probe.button, **kwargs)
                source.browser_requests += 1
            else:
                request = form_request(probe.form, probe.assignment, button=probe.button, **kwargs)
        except ValueError as exc:
            source.skipped["unusable"] += 1
            logger.debug("probe not sent: %s", exc)
            return None
        if not source.browser:  # (a browser probe's request is its page: the form is filled there)
            sent = (request.method, request.url, request.body)
            if sent in source.requests_sent and not probe.control:  # another form of the page sends the same
                source.skipped["same request as an earlier probe"] += 1
                return None
            source.requests_sent.add(sent)
        source.requests += 1
        source.submissions += 1
        if not probe.control:
            source.per_form[probe.form.index] += 1
        source.steps.append({"probe": len(source.steps) + 1, "form": probe.form.index,
                             "why": probe.why or "plan", "answer": ""})
        return request

    # -- control probes (webrace.dynabot.evidence) ----------------------------------------------

    def _control_probe(self, claim: Claim) -> Probe | None:
        """The claim's probe with each typed-in required argument replaced by a value that cannot
        match; None when no argument was typed in (a choice among options has no nonsense value)."""
        probe = claim.probe
        example = self.service.examples[probe.example]
        assignment, told = dict(probe.assignment), []
        for argument in example.arguments:
            name = probe.arguments.get(argument.name)
            sent = assignment.get(name) if name else None
            if not argument.required or argument.iterator or not isinstance(sent, str) or not sent.strip():
                continue
            assignment[name] = made = nonsense(sent, self.random, self._fits(argument, sent, probe.values(example)))
            told.append(f"{argument.name}={made[:40]!r}")
        if not told:
            return None
        return replace(probe, assignment=assignment, control=True,
                       why="control: " + ", ".join(told) + " (a value that cannot match)")

    def _fits(self, argument: Any, sent: str, values: dict[str, str]):
        """What a control value for ``argument`` must be: an instance of its type, when the value
        sent is one; else (a sequence sent as a FASTA record) anything: its shape is kept."""
        recognizer = self.service.recognizer()
        if argument.type not in recognizer.types and argument.type not in ("string", "integer", "float"):
            return lambda value: True
        if not recognizer.is_instance(argument.type, sent, values):
            return lambda value: True
        return lambda value: recognizer.is_instance(argument.type, value, {**values, argument.name: value})

    def _control(self, source: Source) -> list:
        """The claim's control probe request; or, when it cannot be sent, the claim decided
        without it (its items; nothing when it is blocked)."""
        claim = source.claim
        assert claim is not None  # noqa: S101 - for the type checker: called with a claim only
        control = self._control_probe(claim)
        if control is None:
            claim.control = claim.probe
            return self._backed(source, claim, Evidence(True, "no typed-in value to replace: the result type alone "
                                                               "backs it"))
        claim.control = control
        if not self._may_post(control.form.method, control.form.action):
            self._blocked(source, f"its control probe would go over the site's POST cap ({self.max_posts})")
            return []
        request = self._probe_request(source, control)
        if request is None:
            self._blocked(source, "its control probe could not be built")
            return []
        return [request]

    def _decide(self, source: Source, markup: str, what: str) -> list:
        """The control probe's answer (``markup``; ``what`` it was): the claim backed (its items)
        or blocked (the next probes)."""
        claim = source.claim
        assert claim is not None and claim.control is not None  # noqa: S101 - called for a control's answer only
        source.pending.clear()  # the rest of the control's chain
        control_values = claim.control.values(self.service.examples[claim.control.example])
        evidence = judge(self.service, claim.vertex, Answer(claim.markup, claim.values),
                         Answer(markup, control_values), self.max_extracted)
        self._told(source, f"control ({what}): {'backs the claim' if evidence.backed else 'blocks the claim'}: "
                           f"{evidence.reason}")
        if evidence.backed:
            return self._backed(source, claim, evidence, markup)
        self._blocked(source, evidence.reason, tell=False)
        self._answer_words(source, claim.probe, claim.markup)
        return list(self.send_next(source))

    def _backed(self, source: Source, claim: Claim, evidence: Evidence, control_markup: str) -> list:
        probe = claim.probe
        example = self.service.examples[probe.example]
        masked = self._unechoed(claim.markup, claim.values)
        # a "result" the control's answer shows too is the page's own (a menu entry holding the
        # word): not an answer to the query, so it is not extracted
        chrome = self._unechoed(control_markup, claim.values)
        found = extract(self.service, claim.vertex, masked, text_of(masked), claim.values,
                        limit=self.max_extracted * EXTRACT_SLACK)
        extracted = [_shown_as_sent(r, masked, claim.markup)
                     for r in ([r for r in found if r["text"] not in chrome] or found)[:self.max_extracted]]
        control = None
        if claim.control is not None and claim.control.control:
            sent = claim.control.values(example)
            control = {name: sent[name] for name in probe.arguments if sent.get(name) != claim.values.get(name)}
        evidence_item = {"control": control, "reason": evidence.reason, "no_results": evidence.no_results}
        return [self.profile(source, probe, example, claim.states, claim.vertex.type, extracted, evidence_item),
                self.trace(source, "match")]

    def _blocked(self, source: Source, reason: str, tell: bool = True) -> None:
        source.claim = None
        source.pending.clear()
        source.blocked.append(reason)
        self.crawler.stats.inc_value("dynabot/claims_blocked")
        if tell:
            self._told(source, f"claim not backed: {reason}")

    def _unechoed(self, markup: str, values: dict[str, str]) -> str:
        """The answer with the probe's values masked where a reader does not see them as text
        (links' URLs, the search box): those echo the query, they are no results."""
        echoes = [values[name] for name in self.echo_arguments if values.get(name)]
        return mask_in_tags(markup, echoes) if echoes else markup

    def _probe_kwargs(self, source: Source, probe: Probe, path: list, submitted: Form | None, hops: int) -> dict:
        return {"callback": self.parse_probe, "errback": self.probe_failed, "dont_filter": True,
                "meta": {"dynabot": "probe", "dont_retry": True, "handle_httpstatus_list": HTTP_ERRORS,
                         "download_maxsize": self.max_response},
                "priority": source.priority,
                "cb_kwargs": {"source": source, "probe": probe, "path": path, "submitted": submitted, "hops": hops}}

    async def parse_probe(self, response: Response, source: Source, probe: Probe, path: list,
                          submitted: Form | None, hops: int):
        if source.done:
            return []
        example = self.service.examples[probe.example]
        values = probe.values(example)
        problem = (response.meta.get(browser.STATE) or {}).get("problem") if source.browser else None
        if problem and hops == 0:  # the browser could not fill or submit the form: not an answer
            source.skipped["unusable"] += 1
            self._told(source, f"not submitted in the browser: {problem}")
            if probe.control:
                self._blocked(source, f"its control probe could not be submitted in the browser: {problem}")
            return list(self.send_next(source))
        if source.browser and hops == 0 and (response.meta.get(browser.STATE) or {}).get("typed"):
            self._told(source, "typed into, not submitted: the page answers as one types")
        elif source.browser and hops == 0 and (response.meta.get(browser.STATE) or {}).get("submitter") == "Enter":
            self._told(source, "a search box outside any form: typed into, Enter pressed")
        markup, text, forms = self._read(response)
        if response.status >= 400:
            if probe.control:  # the service refused the nonsense value: what the claim is judged on
                return self._decide(source, markup, f"HTTP {response.status}")
            source.answered[f"HTTP {response.status}"] += 1
            self._told(source, f"HTTP {response.status}")
            self._refine(source, probe, example, markup)
            return list(self.send_next(source))
        step = self._step(source, path[-1][0], response.url, markup, text, forms, values, submitted)
        if step.kind == "result" and browser.FORMLESS in probe.form.attributes.split() and page_results_only(
                self.service, step.vertex, markup, source.page_markup, values, self.max_extracted):
            # a search box in no form whose "results" are the links the page showed before it
            # was typed into: a script filtering the page, not a search
            self.crawler.stats.inc_value("dynabot/formless_filters")
            self._told(source, "its only results are links the page showed before: a filter of the page, no answer")
            step = Step("none")
        if step.kind == "result" and not probe.control and page_results_only(
                self.service, step.vertex, markup, source.page_markup, values, self.max_extracted) and (
                request := self._render_answer(source, response, markup, values, probe, path, submitted, hops,
                                               "its only results are the site's own links")):
            # its "results" are the form page's own (a word of the site's menus sent to
            # Sphinx's search): what the scripts write is the answer
            source.pending.insert(0, (request, path))
            return list(self.send_next(source))
        if step.kind == "result":
            self._told(source, f"result ({step.vertex.name}) at {response.url}")
            if probe.control:
                return self._decide(source, markup, f"a {step.vertex.name} page")
            states = [*source.before, *({"vertex": vertex, "url": url} for vertex, url in path)]
            states.append({"vertex": step.vertex.name, "url": response.url,
                           **({"browser": True} if browser.STATE in response.meta else {})})
            source.pending.clear()  # the rest of this probe's pages: its answer is found
            source.claim = Claim(probe, states, step.vertex, markup, values)
            return list(self.send_next(source))
        follow = [(step.vertex.name, response.url)] if step.vertex else []
        wait = 0.0
        moved = onward(markup, response.url, response.status,
                       (response.headers.get("Location") or b"").decode("latin-1") or None)
        if step.kind == "none" and moved:  # a browser goes on by itself: stay at this vertex
            step = Step("links", links=moved.urls)
            follow = [(path[-1][0], response.url)]
            self._told(source, f"{moved.how} to {', '.join(moved.urls)}")
        if moved and moved.how == "refresh":  # a page that asks to be reloaded later is not read at once
            wait = min(moved.wait, self.max_wait)
        if step.vertex is not None and step.vertex.name == path[-1][0] and step.kind == "links":
            # the same "still running" page again: poll as a person would, waiting longer each time
            wait = max(wait, min(self.max_wait, POLL_WAIT * 2 ** min(hops, 4)))
        if step.kind == "form" and hops < self.max_hops and not self._may_submit(source, step):
            step = Step("none")  # an answer's form is submitted only if it is a query, within the POST cap
        if step.kind in ("form", "links") and hops >= self.max_hops:
            source.hop_limits += 1
            self._told(source, f"gave up after {hops} intermediate pages")
            if probe.control:
                return self._decide(source, markup, f"{hops} intermediate pages")
        elif step.kind == "form":
            form = step.forms[0]
            assignment, button = self._fill(form, example)
            self._told(source, f"intermediate form ({step.vertex.name}) submitted")
            request = form_request(form, assignment, button=button, **self._probe_kwargs(
                source, probe, [*path, *follow], form, hops + 1))
            source.submissions += 1
            source.pending.insert(0, (request, path))
        elif step.kind == "links":
            if step.vertex is not None:
                self._told(source, f"intermediate page ({step.vertex.name}): {', '.join(step.links)}")
            for offset, link in enumerate(step.links):
                request = scrapy.Request(link, **self._probe_kwargs(source, probe, [*path, *follow], None, hops + 1))
                source.pending.insert(offset, (request, path))
        elif (request := self._render_answer(source, response, markup, values, probe, path, submitted, hops)):
            source.pending.insert(0, (request, path))
        elif probe.control:  # neither a result nor a page on the way: the control's answer
            return self._decide(source, markup, "no result")
        else:
            source.answered["page"] += 1
            self._refine(source, probe, example, markup)
            self._answer_words(source, probe, markup)
        if wait > 0:
            from twisted.internet import reactor  # the installed one: importing it at the top would install one

            await maybe_deferred_to_future(deferLater(reactor, wait, lambda: None))
        return list(self.send_next(source))

    def _render_answer(self, source: Source, response: Response, markup: str, values: dict, probe: Probe,
                       path: list, submitted: Form | None, hops: int,
                       shows: str = "no results in its HTML") -> scrapy.Request | None:
        """The answer again, in the browser, when its results are still to be written by its
        scripts (``browser.built_by_scripts``: Sphinx's search page); None when it is not such
        an answer, or cannot be shown (told in the trace's reason)."""
        if browser.STATE in response.meta or response.request.method != "GET" or not isinstance(
                response, HtmlResponse):
            return None
        count = browser.built_by_scripts(markup[:MAX_MARKUP], [values.get(a) for a in probe.arguments],
                                         source.page_markup)
        if not count:
            return None
        what = f"the answer is built by scripts ({count} <script> elements, {shows})"
        if self.browser_off or source.browser_requests >= self.browser_budget:
            source.scripted = what + ("; browser mode " + self.browser_off if self.browser_off
                                      else f"; browser budget ({self.browser_budget}) spent")
            self._told(source, source.scripted)
            return None
        source.browser_requests += 1
        self._told(source, what + ": shown in the browser")
        kwargs = self._probe_kwargs(source, probe, path, submitted, hops)
        return browser.render_request(response.url, **kwargs)

    def _may_submit(self, source: Source, step: Step) -> bool:
        """Whether the form an answer shows (an intermediate HTMLform vertex) may be submitted:
        a query at that vertex (webrace.dynabot.sideeffects), within the site's POST cap."""
        form = step.forms[0]
        verdict = classify(form, post_query=step.vertex.post, allow=step.vertex.allow)
        if not verdict.query:
            self.crawler.stats.inc_value(f"dynabot/forms_left_alone/{verdict.kind}")
            self._told(source, f"its form {form.index} ({form.method} {form.action}) left alone: {verdict.reason}")
            return False
        if not self._may_post(form.method, form.action):
            self._told(source, f"its form {form.index} not submitted: the site's POST cap ({self.max_posts}) "
                               "is reached")
            return False
        return True

    def _step(self, source: Source, vertex: str, url: str, markup: str, text: str, forms: list[Form],
              values: dict[str, str], submitted: Form | None) -> Step:
        """What the answer means (analyzer.next_step), its echoes of the query set aside: a page
        that is a result only through the query repeated in its links or search box is none."""
        masked = self._unechoed(markup, values)
        if masked is markup:
            return next_step(self.service, vertex, url, markup, text, forms, values, submitted)
        step = next_step(self.service, vertex, url, masked, text_of(masked), forms, values, submitted)
        if step.kind == "result":
            return step
        raw = next_step(self.service, vertex, url, markup, text, forms, values, submitted)
        if raw.kind == "result":
            self.crawler.stats.inc_value("dynabot/echoes_only")
            self._told(source, "a result only through the query repeated in links or the search box: no result")
            return Step("none")
        return raw

    def _fill(self, form: Form, example) -> tuple[dict, Any]:
        """What to send with a form met on the way (a format page, a wizard's next step): the
        template's required arguments where fields named for them take them, else its defaults."""
        plan = plan_probes([form], self.service, 1, 1, self.use_hints)
        if plan and all(hint_score(a, p) > 0 or p.kind in ("textarea", "file")
                        for a in example.arguments if a.required and (p := _parameter(form, plan[0].arguments.get(
                            a.name))) is not None):
            return plan[0].assignment, plan[0].button
        return {}, submit_button(form)

    def _told(self, source: Source, what: str) -> None:
        if source.steps:
            step = source.steps[-1]
            step["answer"] = f"{step['answer']}; {what}" if step["answer"] else what

    def _answer_words(self, source: Source, probe: Probe, markup: str) -> None:
        """A probe that got no result (or a claim its control probe did not back): the words its
        answer shows that the start page does not, planned with the same form before the class's
        further values (webrace.dynabot.values), as many per source as the site's words."""
        room = self.site_words - source.answer_words
        if not self.use_hints or probe.control or room <= 0 or not self.echo_arguments:
            return
        known = [v for e in self.service.examples for a in e.arguments for v in (a.value, *a.also)]
        known += [v for p in source.plan for v in p.assignment.values() if isinstance(v, str)]
        planned = {p.key() for p in source.plan} | source.sent
        fresh = []
        for word in answer_words(markup[:MAX_MARKUP], source.page_markup, room, known):
            changed = with_value(probe, self.service, self.echo_arguments, word, "a word of an answer")
            if changed is not None and changed.key() not in planned:
                fresh.append(changed)
        if not fresh:
            return
        source.answer_words += len(fresh)
        at = source.next_probe  # before the class's further values for this form, else after its probes
        rest = source.plan[at:]
        same = [n for n, p in enumerate(rest) if p.form.index == probe.form.index]
        later = [n for n in same if NEXT_VALUE in rest[n].why]
        at += later[0] if later else (same[-1] + 1 if same else 0)
        source.plan[at:at] = fresh
        if source.steps:
            source.steps[-1]["words"] = [f.assignment.get(f.arguments.get(n)) for f in fresh
                                         for n in self.echo_arguments if f.arguments.get(n)][:10]

    def _refine(self, source: Source, probe: Probe, example, markup: str) -> None:
        """What the answer says, turned into the next probes (webrace.dynabot.answers)."""
        if not self.use_hints:
            return
        heard = said(markup, source.page_markup)
        if source.steps and heard:
            source.steps[-1]["heard"] = sorted(heard)[:20]
        fresh = [p for p in refinements(probe, example, self.service, heard) if p.key() not in source.sent]
        keys = {p.key() for p in fresh}
        source.refine = (fresh + [p for p in source.refine if p.key() not in keys])[:MAX_QUEUED]

    def probe_failed(self, failure: Failure):
        source: Source = failure.request.cb_kwargs["source"]
        if failure.check(IgnoreRequest):
            reason = failure.request.meta.get(IGNORED) or "ignored"
        else:
            reason = failure.type.__name__
            if "maxsize" in str(failure.value).lower() or "larger than" in str(failure.value).lower():
                reason = f"response over {self.max_response} bytes"
        source.skipped[reason] += 1
        if not failure.check(IgnoreRequest):  # not sent (robots.txt, exclusions) is no answer
            source.answered[reason] += 1
        self._told(source, f"not answered: {reason}")
        probe = failure.request.cb_kwargs.get("probe")
        if probe is not None and probe.control and source.claim is not None and not source.done:
            self._blocked(source, f"its control probe was not answered: {reason}")
        yield from self.send_next(source)

    @staticmethod
    def _text(markup: str) -> str:
        try:
            return lxml.html.fromstring(markup).text_content() if markup.strip() else ""
        except (ValueError, lxml.etree.ParserError):
            return markup

    def _read(self, response: Response) -> tuple[str, str, list[Form]]:
        if not isinstance(response, TextResponse):
            return "", "", []
        markup = response.text
        media = (response.headers.get("Content-Type") or b"").decode("latin-1").lower()
        if "html" not in media and "xml" not in media:
            return markup, markup, []
        return markup, self._text(markup), analyze_forms(response.body, response.url, response.encoding)


    # -- items -------------------------------------------------------------------------------------

    def profile(self, source: Source, probe: Probe, example: Any, states: list, result_type: str,
                extracted: list, evidence: dict | None = None) -> ServiceProfile:
        entries = form_data(probe.form, probe.assignment, button=probe.button)
        return ServiceProfile(
            kind="profile", source=source.url, service_class=self.service.name,
            form={"index": probe.form.index, "action": probe.form.action, "method": probe.form.method,
                  "enctype": probe.form.enctype},
            button={"name": probe.button.name, "value": probe.button.value} if probe.button else None,
            arguments=dict(probe.arguments),
            user_arguments=[name for name in probe.arguments if name in self.user_arguments],
            fields=[[name, value.content if isinstance(value, Upload) else value] for name, value in entries],
            states=states, result_type=result_type, extracted=extracted, empty=not extracted,
            probes=source.requests, evidence=evidence)

    def trace(self, source: Source, outcome: str, reason: str = "") -> ServiceTrace:
        source.done = True
        if outcome != "match" and source.scripted and source.scripted not in reason:
            reason = f"{reason}; {source.scripted}" if reason else source.scripted
        if source.blocked and outcome != "match":
            reason = (f"{len(source.blocked)} result page(s) that no control probe backed: "
                      + "; ".join(dict.fromkeys(source.blocked)) + "; " + reason)
        if source.left_alone and "left alone:" not in reason:
            reason += self._left_alone_note(source)
        item = ServiceTrace(
            kind="trace", source=source.url, outcome=outcome,
            forms=[{"index": f.index, "action": f.action, "method": f.method, "parameters": len(f.parameters),
                    "kept": f.index in source.kept_forms, "submissions": source.per_form.get(f.index, 0),
                    "left_alone": source.left_alone.get(f.index)}
                   for f in source.forms],
            parameters=sum(len(f.parameters) for f in source.forms), probes=source.requests,
            submissions=source.submissions, skipped=dict(source.skipped), steps=source.steps,
            seconds=round(time.monotonic() - source.started, 3), reason=reason.lstrip("; "))
        self.traces.append(dict(item))
        self.crawler.stats.inc_value(f"dynabot/outcome/{outcome}")
        return item

    def closed_report(self, spider: scrapy.Spider) -> None:
        if spider is not self:
            return
        figures = report(self.traces, pages=self.pages, statuses=self.page_statuses, types=self.page_types,
                         frontier=self.frontier)
        logger.info("%s", format_report(figures))
        try:
            folder = data_dir(self.crawler.settings)
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "last-dynabot.json").write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
        except OSError as exc:
            logger.warning("could not write last-dynabot.json: %s", exc)


def _shown_as_sent(result: dict, masked: str, markup: str) -> dict:
    """An extracted result with the query's echoes it was read through (masked, same length)
    put back as the answer has them: its link's URL as the server wrote it."""
    if masked is markup or MASK not in result["text"]:
        return result
    start = masked.find(result["text"])
    if start < 0:
        return result
    region, shown = masked[start:start + len(result["text"])], markup[start:start + len(result["text"])]

    def unmasked(value: str) -> str:
        at = region.find(value)
        return shown[at:at + len(value)] if at >= 0 else value

    return {"text": shown, "elements": {k: [unmasked(v) for v in vs] for k, vs in result["elements"].items()}}
