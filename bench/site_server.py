"""A generated web site with honest HTTP validators, for benchmarking conditional re-crawls.

Run ``python bench/site_server.py [options]``; it prints ``READY http://127.0.0.1:PORT/`` on
stdout once listening and serves until SIGTERM or SIGINT. ``--selftest`` checks itself instead.

The site: ``/`` links to hubs ``/hub/<i>.html``, each hub links to its leaves
``/page/<j>.html``; root + hubs + leaves == ``--pages``, all within depth 2 of ``/``. Every page
carries a strong ETag and a Last-Modified, and answers ``If-None-Match`` / ``If-Modified-Since``
with 304. ``/_control/change`` edits a fraction of the leaves between crawls; ``/_control/stats``
counts what the crawler cost the server. ``--latency-ms`` and ``--rate`` imitate a wide-area link.
``--log FILE`` appends one JSON line per site request (path, host, wall-clock start and end, status,
body bytes, aborted), from which a benchmark reads the crawler's pauses and the server's busy time.
"""

from __future__ import annotations

import argparse
import calendar
import json
import math
import re
import socket
import sys
import tempfile
import time
import zlib
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from email.utils import formatdate, parsedate_to_datetime
from http.client import HTTPConnection, HTTPResponse
from pathlib import Path
from random import Random
from urllib.parse import urlsplit

from twisted.internet import reactor, threads
from twisted.internet.error import CannotListenError
from twisted.internet.interfaces import IDelayedCall, IListeningPort
from twisted.logger import (
    FilteringLogObserver,
    LogLevel,
    LogLevelFilterPredicate,
    globalLogBeginner,
    textFileLogObserver,
)
from twisted.python.failure import Failure
from twisted.web.resource import Resource
from twisted.web.server import NOT_DONE_YET, Request, Site

# Version-0 pages look last edited some time in January 2024 (spread per page); fixed rather than
# taken from the clock so that a restarted server with the same options sends the same headers.
BASE_TIME = 1_704_067_200
BASE_SPREAD_S = 30 * 86_400
PARAGRAPH_POOL = 1024  # distinct paragraphs per seed; pages are drawn from these
BODY_CACHE_PAGES = 512  # rendered bodies kept; rendering one costs ~0.2 ms, so this only saves CPU
CHANGE_SHARE = 5  # a change rewrites 1/CHANGE_SHARE of a page's paragraphs
ROBOTS_TXT = b"User-agent: *\nAllow: /\n"
PAGE_PATH = re.compile(r"/(hub|page)/(0|[1-9][0-9]*)\.html")

COMMON_WORDS = (
    "the of and to in a is that for it as was with be by on not he this are or his from at which but "
    "have an they you were her she there been one all we their has would when if so no will can more "
    "about said what out up into only other new some could time these two may first then do any like "
    "my now over such our man me even most made after also did many before must through back years "
    "where much your way well down should because each just those people how too little state good "
    "very make world still own see men work long get here between both life being under never day same "
    "another know while last might us great old year off come since against go came right used take "
    "three network crawler server page archive record index search link document content update"
).split()
SYLLABLES = "ka ro mi tel an vor de si lu pra nen ost qui bal ter fo gri um sel dar ive ent ho".split()


# ---------------------------------------------------------------------------------------------
# The site: pure Python, no Twisted, so it can be rendered and timed on its own.
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SiteSpec:
    pages: int = 2000
    page_kb: float = 70.0
    seed: int = 1
    hubs: int | None = None  # None: ceil(sqrt(pages)); capped at pages - 1

    @property
    def hub_count(self) -> int:
        wanted = math.ceil(math.sqrt(self.pages)) if self.hubs is None else max(1, self.hubs)
        return min(wanted, self.pages - 1)

    @property
    def leaf_count(self) -> int:
        return self.pages - 1 - self.hub_count

    def hub_leaves(self, hub: int) -> range:
        """Leaves are split into contiguous, near-equal blocks so that neighbours share a hub."""
        hubs, leaves = self.hub_count, self.leaf_count
        return range(hub * leaves // hubs, (hub + 1) * leaves // hubs)

    def hub_of(self, leaf: int) -> int:
        hubs, leaves = self.hub_count, self.leaf_count
        hub = leaf * hubs // leaves
        while leaf not in self.hub_leaves(hub):  # integer rounding may be one block off
            hub += 1 if leaf >= self.hub_leaves(hub).stop else -1
        return hub


def build_vocabulary(rng: Random, size: int = 3000) -> tuple[list[str], list[float]]:
    """Common words first, invented ones after, with Zipf weights so the text reads like prose."""
    words = list(COMMON_WORDS)
    seen = set(words)
    while len(words) < size:
        word = "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4)))
        if word not in seen:
            seen.add(word)
            words.append(word)
    cumulative, total = [], 0.0
    for rank in range(len(words)):
        total += 1.0 / (rank + 1)
        cumulative.append(total)
    return words, cumulative


def build_paragraphs(rng: Random, words: list[str], cumulative: list[float], count: int) -> list[str]:
    """Paragraphs are made once per seed; pages are sequences of them, which keeps rendering cheap."""
    paragraphs = []
    for _ in range(count):
        sentences = []
        for _ in range(rng.randint(3, 7)):
            sentence = rng.choices(words, cum_weights=cumulative, k=rng.randint(6, 18))
            sentences.append(" ".join(sentence).capitalize() + ".")
        paragraphs.append("<p>" + " ".join(sentences) + "</p>\n")
    return paragraphs


class GeneratedSite:
    """Page bodies and validators for a SiteSpec, plus the versions that /_control/change bumps."""

    def __init__(self, spec: SiteSpec, clock: Callable[[], float] = time.time) -> None:
        self.spec = spec
        self.clock = clock
        rng = Random(f"{spec.seed}:text")
        self.words, self.cumulative = build_vocabulary(rng)
        self.paragraphs = build_paragraphs(rng, self.words, self.cumulative, PARAGRAPH_POOL)
        self.versions: dict[str, int] = {}
        self.modified: dict[str, int] = {}  # Last-Modified of pages changed since start
        self.rounds = 0
        self._cache: OrderedDict[tuple[str, int], bytes] = OrderedDict()
        # Part of every ETag, so two servers with different options never share a validator.
        self._site_tag = f"{hash_text(repr(spec)) & 0xFFFFFF:06x}"

    def paths(self) -> list[str]:
        hubs = [f"/hub/{i}.html" for i in range(self.spec.hub_count)]
        return ["/", *hubs, *(f"/page/{j}.html" for j in range(self.spec.leaf_count))]

    def exists(self, path: str) -> bool:
        if path == "/":
            return True
        match = PAGE_PATH.fullmatch(path)
        if match is None:
            return False
        limit = self.spec.hub_count if match[1] == "hub" else self.spec.leaf_count
        return int(match[2]) < limit

    def version(self, path: str) -> int:
        return self.versions.get(path, 0)

    def etag(self, path: str) -> str:
        name = "root" if path == "/" else path.strip("/").replace("/", "-").removesuffix(".html")
        return f'"{self._site_tag}-{name}-v{self.version(path)}"'

    def last_modified(self, path: str) -> int:
        return self.modified.get(path, BASE_TIME + hash_text(f"{self.spec.seed}:{path}") % BASE_SPREAD_S)

    def body(self, path: str) -> bytes:
        key = (path, self.version(path))
        body = self._cache.get(key)
        if body is None:
            body = self.render(path, key[1])
            self._cache[key] = body
            if len(self._cache) > BODY_CACHE_PAGES:
                self._cache.popitem(last=False)
        else:
            self._cache.move_to_end(key)
        return body

    def change(self, fraction: float, round_: int | None = None) -> tuple[int, list[str]]:
        """Bump a deterministic sample of leaves; the sample depends on the seed and the round."""
        self.rounds += 1
        round_ = self.rounds if round_ is None else round_
        leaves = self.spec.leaf_count
        chosen = Random(f"{self.spec.seed}:change:{round_}").sample(range(leaves), round(fraction * leaves))
        changed = [f"/page/{j}.html" for j in sorted(chosen)]
        now = int(self.clock())
        for path in changed:
            # Dated at the change (not at a fixed base) so that a client which sends the time of its
            # last fetch as If-Modified-Since still sees the change; strictly later than before.
            self.modified[path] = max(self.last_modified(path) + 1, now)
            self.versions[path] = self.version(path) + 1
        return round_, changed

    def render(self, path: str, version: int) -> bytes:
        title = self._title(path)
        head = (
            f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n<title>{title}</title>\n'
            f"</head>\n<body>\n<nav>{self._nav(path)}</nav>\n<h1>{title}</h1>\n"
            f'<p class="revision">Revision {version} of {path}</p>\n<article>\n'
        )
        tail = '</article>\n<footer><a href="/">Home</a></footer>\n</body>\n</html>\n'
        budget = int(self.spec.page_kb * 1024) - len(head) - len(tail)
        article = "".join(self.paragraphs[i] for i in self._paragraph_ids(path, version, budget))
        return (head + article + tail).encode("utf-8")

    def _title(self, path: str) -> str:
        if path == "/":
            return "Generated Site"
        rng = Random(f"{self.spec.seed}:title:{path}")
        return " ".join(rng.choices(self.words, cum_weights=self.cumulative, k=4)).title()

    def links(self, path: str) -> list[tuple[str, str]]:
        """The (href, text) pairs of a page's navigation: the site's whole link structure."""
        links = [("/", "Home")]
        match = PAGE_PATH.fullmatch(path)
        if path == "/":
            links += [(f"/hub/{i}.html", f"Section {i}") for i in range(self.spec.hub_count)]
        elif match[1] == "hub":
            hub = int(match[2])
            links += [(f"/hub/{i}.html", f"Section {i}") for i in (hub - 1, hub + 1) if 0 <= i < self.spec.hub_count]
            links += [(f"/page/{j}.html", f"Article {j}") for j in self.spec.hub_leaves(hub)]
        else:
            leaf = int(match[2])
            links.append((f"/hub/{self.spec.hub_of(leaf)}.html", "Section"))
            neighbours = (leaf - 1, leaf + 1, leaf + 2)
            links += [(f"/page/{j}.html", f"Article {j}") for j in neighbours if 0 <= j < self.spec.leaf_count]
        return links

    def _nav(self, path: str) -> str:
        return "\n".join(f'<a href="{href}">{text}</a>' for href, text in self.links(path))

    def _paragraph_ids(self, path: str, version: int, budget: int) -> list[int]:
        """Version 0 fills the budget; each later version rewrites a share of the paragraphs, the
        way an edited article keeps most of its text."""
        rng = Random(f"{self.spec.seed}:body:{path}")
        ids, size = [], 0
        while size < budget or not ids:
            ids.append(rng.randrange(len(self.paragraphs)))
            size += len(self.paragraphs[ids[-1]])
        for v in range(1, version + 1):
            rng = Random(f"{self.spec.seed}:body:{path}:{v}")
            for slot in rng.sample(range(len(ids)), max(1, len(ids) // CHANGE_SHARE)):
                ids[slot] = rng.randrange(len(self.paragraphs))
        return ids


def hash_text(text: str) -> int:
    """A hash stable across runs (str hash is salted per process)."""
    return zlib.crc32(text.encode("utf-8"))


# ---------------------------------------------------------------------------------------------
# Conditional requests (RFC 9110 section 13), as pure functions.
# ---------------------------------------------------------------------------------------------


def http_date(timestamp: int) -> str:
    return formatdate(timestamp, usegmt=True)


def parse_http_date(value: str) -> int | None:
    """Seconds since the epoch, or None for anything that is not an HTTP-date (to be ignored)."""
    try:
        parsed = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    return calendar.timegm(parsed.utctimetuple())


def etag_matches(if_none_match: str, etag: str) -> bool:
    """If-None-Match uses the weak comparison: W/"x" matches "x"."""
    if if_none_match.strip() == "*":
        return True
    candidates = (tag.strip().removeprefix("W/") for tag in if_none_match.split(","))
    return etag.removeprefix("W/") in candidates


def is_not_modified(if_none_match: str | None, if_modified_since: str | None, etag: str, modified: int) -> bool:
    if if_none_match is not None:  # it takes precedence: If-Modified-Since is then not evaluated
        return etag_matches(if_none_match, etag)
    if if_modified_since is None:
        return False
    since = parse_http_date(if_modified_since)
    return since is not None and since >= modified


# ---------------------------------------------------------------------------------------------
# Twisted: the link imitation and the resource.
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LinkProfile:
    latency_s: float = 0.0  # before the first byte of every site response
    rate: float = 0.0  # body bytes per second per connection; 0 = unlimited
    chunk: int = 8192


@dataclass
class Counters:
    requests: int = 0
    responses_200: int = 0
    responses_304: int = 0
    responses_404: int = 0
    conditional_requests: int = 0  # carried If-None-Match or If-Modified-Since
    body_bytes_sent: int = 0
    aborted: int = 0  # client went away before the response was complete

    def reset(self) -> None:
        # In place, because transfers still under way hold this object and count into it.
        for field in fields(self):
            setattr(self, field.name, 0)


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes = b""


class Transfer:
    """Sends one reply after the link's latency, pacing the body at the link's rate, and stops as
    soon as the client disconnects."""

    def __init__(self, request: Request, reply: Reply, link: LinkProfile, counters: Counters) -> None:
        self.request, self.reply, self.link, self.counters = request, reply, link, counters
        self.pending: IDelayedCall | None = None
        self.sent = 0  # body bytes written for this reply
        request.notifyFinish().addErrback(self._connection_lost)

    def start(self) -> None:
        if self.link.latency_s > 0:
            self.pending = reactor.callLater(self.link.latency_s, self._send_headers)
        else:
            self._send_headers()

    def _send_headers(self) -> None:
        self.pending = None
        self.request.setResponseCode(self.reply.status)
        for name, value in self.reply.headers.items():
            self.request.setHeader(name, value)
        if not self.reply.body or self.request.method == b"HEAD":
            self.request.finish()
        elif self.link.rate > 0:
            self.request.write(b"")  # headers now; the body follows at the link's pace
            self._pace(0, time.monotonic())
        else:
            self._write(self.reply.body)
            self.request.finish()

    def _pace(self, offset: int, started: float) -> None:
        """A chunk goes out when the bytes up to its end would have arrived; scheduling against
        the start (not the previous chunk) keeps timer lateness from adding up."""
        end = min(offset + self.link.chunk, len(self.reply.body))
        due = started + end / self.link.rate - time.monotonic()
        self.pending = reactor.callLater(max(0.0, due), self._send_chunk, offset, end, started)

    def _send_chunk(self, offset: int, end: int, started: float) -> None:
        self.pending = None
        self._write(self.reply.body[offset:end])
        if end < len(self.reply.body):
            self._pace(end, started)
        else:
            self.request.finish()

    def _write(self, data: bytes) -> None:
        self.request.write(data)
        self.sent += len(data)
        self.counters.body_bytes_sent += len(data)

    def _connection_lost(self, failure: Failure) -> None:
        self.counters.aborted += 1
        if self.pending is not None and self.pending.active():
            self.pending.cancel()


class RequestLog:
    """``--log FILE``: one JSON line per site request, written when its reply is finished or the
    client went away. Times are wall-clock (``time.time()``) so that they line up with a crawler's."""

    def __init__(self, path: Path) -> None:
        self.file = path.open("a", buffering=1, encoding="utf-8")  # line-buffered: readable mid-run

    def watch(self, request: Request, transfer: Transfer, started: float) -> None:
        def write(result: object) -> None:  # returns None: a lost connection is logged, not raised
            self.file.write(json.dumps({
                "path": request.path.decode("latin-1"), "host": header(request, b"host"),
                "start": round(started, 6), "end": round(time.time(), 6), "status": transfer.reply.status,
                "bytes": transfer.sent, "aborted": isinstance(result, Failure),
            }) + "\n")

        request.notifyFinish().addBoth(write)


class SiteResource(Resource):
    isLeaf = True

    def __init__(
        self, site: GeneratedSite, link: LinkProfile, cache_control: str, log: RequestLog | None = None
    ) -> None:
        super().__init__()
        self.site, self.link, self.cache_control, self.log = site, link, cache_control, log
        self.counters = Counters()

    def render_GET(self, request: Request) -> bytes | int:
        started = time.time()
        path = request.path.decode("latin-1")
        if path.startswith("/_control/"):
            return self._control(path, request)
        self.counters.requests += 1
        reply = self._reply(path, request)
        key = f"responses_{reply.status}"
        setattr(self.counters, key, getattr(self.counters, key) + 1)
        transfer = Transfer(request, reply, self.link, self.counters)
        if self.log is not None:
            self.log.watch(request, transfer, started)
        transfer.start()
        return NOT_DONE_YET

    render_HEAD = render_GET

    def _reply(self, path: str, request: Request) -> Reply:
        if path == "/robots.txt":
            return Reply(200, {"Content-Type": "text/plain", "Content-Length": str(len(ROBOTS_TXT))}, ROBOTS_TXT)
        if not self.site.exists(path):
            return Reply(404, {"Content-Type": "text/plain", "Content-Length": "10"}, b"Not found\n")
        etag, modified = self.site.etag(path), self.site.last_modified(path)
        headers = {"ETag": etag, "Last-Modified": http_date(modified)}
        if self.cache_control:
            headers["Cache-Control"] = self.cache_control
        if_none_match, if_modified_since = header(request, b"if-none-match"), header(request, b"if-modified-since")
        if if_none_match is not None or if_modified_since is not None:
            self.counters.conditional_requests += 1
        if is_not_modified(if_none_match, if_modified_since, etag, modified):
            return Reply(304, headers)
        body = self.site.body(path)
        headers |= {"Content-Type": "text/html; charset=utf-8", "Content-Length": str(len(body))}
        return Reply(200, headers, body)

    def _control(self, path: str, request: Request) -> bytes:
        """Answered at once, never delayed or counted: the benchmark's own bookkeeping."""
        request.setHeader("Content-Type", "application/json")
        request.setHeader("Cache-Control", "no-store")
        if path == "/_control/stats":
            return json_bytes(asdict(self.counters))
        if path == "/_control/reset":
            self.counters.reset()
            return json_bytes({"reset": True})
        if path == "/_control/change":
            return self._change(request)
        request.setResponseCode(404)
        return json_bytes({"error": f"unknown control path {path}"})

    def _change(self, request: Request) -> bytes:
        try:
            fraction = float(query(request, b"fraction", "0.1"))
            round_text = query(request, b"round", None)
            round_ = None if round_text is None else int(round_text)
            if not 0.0 <= fraction <= 1.0:
                raise ValueError(f"fraction must be between 0 and 1, got {fraction}")
        except ValueError as error:
            request.setResponseCode(400)
            return json_bytes({"error": str(error)})
        round_, changed = self.site.change(fraction, round_)
        return json_bytes({"round": round_, "changed": changed})


def header(request: Request, name: bytes) -> str | None:
    value = request.getHeader(name)
    return None if value is None else value.decode("latin-1")


def query(request: Request, name: bytes, default: str | None) -> str | None:
    values = request.args.get(name)
    return values[0].decode("utf-8") if values else default


def json_bytes(value: object) -> bytes:
    return json.dumps(value).encode("utf-8") + b"\n"


class QuietSite(Site):
    """No access log: a crawl makes thousands of requests, and stdout belongs to the READY line."""

    noisy = False

    def log(self, request: Request) -> None:
        pass


def listen(resource: SiteResource, port: int = 0) -> IListeningPort:
    return reactor.listenTCP(port, QuietSite(resource), interface="127.0.0.1")


# ---------------------------------------------------------------------------------------------
# Self-test: a real server in the reactor, a stdlib client in a thread.
# ---------------------------------------------------------------------------------------------


class Client:
    """One keep-alive connection, so the checks also show that the server keeps it open."""

    def __init__(self, base: str) -> None:
        parts = urlsplit(base)
        self.conn = HTTPConnection(parts.hostname, parts.port, timeout=10)

    def get(self, path: str, **headers: str) -> tuple[HTTPResponse, bytes]:
        names = {key.replace("_", "-"): value for key, value in headers.items()}
        self.conn.request("GET", path, headers=names)
        response = self.conn.getresponse()
        return response, response.read()

    def json(self, path: str) -> dict:
        response, body = self.get(path)
        check(response.status == 200, f"{path} answered {response.status}")
        return json.loads(body)


def check(condition: bool, message: str) -> None:
    if not condition:
        raise AssertionError(message)


def check_structure(client: Client, spec: SiteSpec) -> None:
    """Follow links breadth-first to depth 2: every page must be found, and no control path."""
    seen, frontier, started = {"/"}, ["/"], time.perf_counter()
    for _depth in range(2):
        found = []
        for path in frontier:
            response, body = client.get(path)
            check(response.status == 200, f"{path} answered {response.status}")
            check(response.getheader("Content-Length") == str(len(body)), f"{path}: Content-Length is wrong")
            for href in re.findall(r'href="([^"]+)"', body.decode("utf-8")):
                check(not href.startswith("/_control"), f"{path} links to a control path")
                if href not in seen:
                    seen.add(href)
                    found.append(href)
        frontier = found
    check(len(seen) == spec.pages, f"found {len(seen)} pages within depth 2, expected {spec.pages}")
    print(f"  all {len(seen)} pages linked within depth 2, from / and the hubs ({time.perf_counter() - started:.2f} s)")


def check_validators(client: Client, path: str) -> tuple[str, str]:
    response, body = client.get(path)
    etag, modified = response.getheader("ETag"), response.getheader("Last-Modified")
    check(response.status == 200 and etag and modified, f"{path}: no 200 with validators")
    check(etag.startswith('"') and parse_http_date(modified) is not None, f"{path}: malformed validators")
    check(response.getheader("Content-Type") == "text/html; charset=utf-8", f"{path}: wrong Content-Type")
    cases = [
        ({"If-None-Match": etag}, 304),
        ({"If-None-Match": f'"nope", W/{etag}'}, 304),
        ({"If-None-Match": "*"}, 304),
        ({"If-Modified-Since": modified}, 304),
        ({"If-Modified-Since": http_date(parse_http_date(modified) - 1)}, 200),
        ({"If-Modified-Since": "not a date"}, 200),
        ({"If-None-Match": '"nope"', "If-Modified-Since": modified}, 200),  # If-None-Match wins
    ]
    for headers, status in cases:
        response, body = client.get(path, **headers)
        check(response.status == status, f"{path} with {headers}: {response.status}, expected {status}")
        if status == 304:
            check(body == b"" and response.getheader("ETag") == etag, f"{path}: 304 with body or without ETag")
    return etag, modified


def check_change(client: Client, spec: SiteSpec) -> None:
    leaves = [f"/page/{j}.html" for j in range(spec.leaf_count)]
    before = {path: client.get(path)[0].getheaders() for path in leaves}
    changed = set(client.json("/_control/change?fraction=0.1&round=1")["changed"])
    check(len(changed) == round(0.1 * spec.leaf_count), f"changed {len(changed)} pages")
    for path in leaves:
        old = dict(before[path])
        expected = 200 if path in changed else 304
        for validator in ({"If-None-Match": old["ETag"]}, {"If-Modified-Since": old["Last-Modified"]}):
            response, _ = client.get(path, **validator)
            check(response.status == expected, f"{path} {validator} after change: {response.status}, not {expected}")
        if path in changed:
            modified = parse_http_date(response.getheader("Last-Modified"))
            check(modified > parse_http_date(old["Last-Modified"]), f"{path}: Last-Modified did not move on")
    second = set(client.json("/_control/change?fraction=0.1&round=2")["changed"])
    check(not changed or second != changed, "rounds 1 and 2 changed the same pages")
    print(f"  change: {len(changed)} leaves changed; old ETag gives 200 for them, 304 for the rest")


def check_counters(client: Client) -> None:
    client.json("/_control/reset")
    response, body = client.get("/robots.txt")
    check(response.status == 200 and body == ROBOTS_TXT, "robots.txt is wrong")
    response, body = client.get("/")
    client.get("/", If_None_Match=response.getheader("ETag"))
    stats = client.json("/_control/stats")
    body_bytes = len(ROBOTS_TXT) + len(body)
    expected = {"requests": 3, "responses_200": 2, "responses_304": 1, "body_bytes_sent": body_bytes}
    check(all(stats[key] == value for key, value in expected.items()), f"stats {stats}, expected {expected}")


def check_slow_link(base: str, link: LinkProfile) -> None:
    client = Client(base)
    started = time.perf_counter()
    response, body = client.get("/")
    full = time.perf_counter() - started
    started = time.perf_counter()
    client.get("/", If_None_Match=response.getheader("ETag"))
    short = time.perf_counter() - started
    print(
        f"  link {link.latency_s * 1000:.0f} ms, {link.rate:.0f} B/s: 200 of {len(body)} B in {full:.3f} s "
        f"(ideal {link.latency_s + len(body) / link.rate:.3f} s), 304 in {short:.3f} s"
    )
    # A client that hangs up mid-body must not break the server.
    parts = urlsplit(base)
    with socket.create_connection((parts.hostname, parts.port)) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        sock.recv(1024)
    deadline = time.monotonic() + 5
    while client.json("/_control/stats")["aborted"] < 1:
        check(time.monotonic() < deadline, "the server did not notice the client hanging up")
        time.sleep(0.05)
    check(client.get("/")[0].status == 200, "the server stopped answering after a hang-up")


def check_log(path: Path, link: LinkProfile) -> None:
    """The slow link's requests are in its log, in order, each lasting at least the link's latency."""
    entries = [json.loads(line) for line in path.read_text().splitlines()]
    statuses = [(e["status"], e["aborted"]) for e in entries]
    check(statuses == [(200, False), (304, False), (200, True), (200, False)], f"log statuses {statuses}")
    check(all(e["end"] - e["start"] >= link.latency_s * 0.9 for e in entries), "a logged request was too short")
    check(entries[0]["bytes"] > 0 and entries[1]["bytes"] == 0, "logged body bytes are wrong")
    print(f"  log: {len(entries)} requests, the first {entries[0]['end'] - entries[0]['start']:.3f} s")


def run_checks(plain: str, slow: str, spec: SiteSpec, link: LinkProfile, log: Path) -> None:
    client = Client(plain)
    check_structure(client, spec)
    sock = client.conn.sock
    check_validators(client, "/")
    check_validators(client, GeneratedSite(spec).paths()[-1])
    check_change(client, spec)
    check_counters(client)
    check(client.conn.sock is sock, "the server closed a keep-alive connection")
    check(client.get("/page/999999.html")[0].status == 404, "a missing page was not a 404")
    check_slow_link(slow, link)
    check_log(log, link)


def time_generation(spec: SiteSpec) -> None:
    """Pages are rendered on request; this renders every one once to show what that costs."""
    started = time.perf_counter()
    site = GeneratedSite(spec)
    pool = time.perf_counter() - started
    total = sum(len(site.render(path, 0)) for path in site.paths())
    elapsed = time.perf_counter() - started
    print(
        f"generation: {spec.pages} pages, {total / 2**20:.1f} MiB ({total / spec.pages / 1024:.1f} KiB/page) "
        f"in {elapsed:.2f} s, of which vocabulary and paragraph pool {pool:.3f} s"
    )


def selftest(spec: SiteSpec, cache_control: str) -> int:
    time_generation(spec)
    site = GeneratedSite(spec)
    link = LinkProfile(latency_s=0.05, rate=128_000)
    plain = listen(SiteResource(site, LinkProfile(), cache_control)).getHost().port
    outcome: list[Failure | None] = []

    def finish(result: Failure | None) -> None:
        outcome.append(result)
        reactor.stop()

    with tempfile.TemporaryDirectory(prefix="site-server-selftest-") as tmp:
        log = Path(tmp) / "requests.jsonl"
        slow = listen(SiteResource(site, link, cache_control, RequestLog(log))).getHost().port
        work = threads.deferToThread(
            run_checks, f"http://127.0.0.1:{plain}/", f"http://127.0.0.1:{slow}/", spec, link, log
        )
        work.addBoth(finish)
        reactor.run()
    if isinstance(outcome[0], Failure):
        print(f"selftest FAILED: {outcome[0].getErrorMessage()}", file=sys.stderr)
        outcome[0].printTraceback(file=sys.stderr)
        return 1
    print("selftest ok")
    return 0


# ---------------------------------------------------------------------------------------------
# Command line.
# ---------------------------------------------------------------------------------------------


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {text}")
    return value


def non_negative(text: str) -> float:
    value = float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative, got {text}")
    return value


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default 0: a free one)")
    parser.add_argument("--pages", type=positive_int, default=2000, help="root + hubs + leaves (default 2000)")
    parser.add_argument("--page-kb", type=non_negative, default=70.0, help="page size in KiB (default 70)")
    parser.add_argument("--seed", type=int, default=1, help="makes text, titles and changed sets (default 1)")
    parser.add_argument("--hubs", type=int, default=None, help="hub pages (default ceil(sqrt(pages)), max pages-1)")
    parser.add_argument("--latency-ms", type=non_negative, default=0.0, help="delay before each response")
    parser.add_argument("--rate", type=non_negative, default=0.0, help="body bytes/s per connection (0: no cap)")
    parser.add_argument("--chunk-kb", type=positive_int, default=8, help="write size when --rate paces (default 8)")
    # max-age=0 makes every cache revalidate on each visit. Not no-cache: Scrapy's RFC2616Policy then
    # refetches without validators; nor nothing: the 2024 Last-Modified would look fresh for weeks.
    parser.add_argument(
        "--cache-control", default="max-age=0", help="Cache-Control on pages, '' for none (default max-age=0)"
    )
    parser.add_argument("--log", type=Path, default=None, help="append one JSON line per site request to this file")
    parser.add_argument("--selftest", action="store_true", help="check the server against itself, then exit")
    args = parser.parse_args(argv)
    if args.hubs is not None and args.hubs < 1:
        parser.error(f"--hubs must be at least 1, got {args.hubs}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # Twisted's warnings to stderr; stdout is left alone (not redirected into the log) for READY.
    warnings_only = LogLevelFilterPredicate(defaultLogLevel=LogLevel.warn)
    observer = FilteringLogObserver(textFileLogObserver(sys.stderr), [warnings_only])
    globalLogBeginner.beginLoggingTo([observer], redirectStandardIO=False)
    spec = SiteSpec(pages=args.pages, page_kb=args.page_kb, seed=args.seed, hubs=args.hubs)
    if args.selftest:
        return selftest(spec, args.cache_control)
    link = LinkProfile(latency_s=args.latency_ms / 1000, rate=args.rate, chunk=args.chunk_kb * 1024)
    log = None if args.log is None else RequestLog(args.log)
    resource = SiteResource(GeneratedSite(spec), link, args.cache_control, log)
    try:
        port = listen(resource, args.port).getHost().port
    except CannotListenError as error:
        print(f"site_server: cannot listen on 127.0.0.1:{args.port}: {error.socketError}", file=sys.stderr)
        return 2
    print(
        f"site_server: {spec.pages} pages = 1 root + {spec.hub_count} hubs + {spec.leaf_count} leaves, "
        f"~{spec.page_kb:g} KiB each, seed {spec.seed}",
        file=sys.stderr,
    )
    reactor.callWhenRunning(print, f"READY http://127.0.0.1:{port}/", flush=True)
    reactor.run()  # installs SIGINT/SIGTERM handlers that stop it
    return 0


if __name__ == "__main__":
    sys.exit(main())
