"""A simulated Internet for IPMicra (seed 002, section IV), deterministic by seed, in a range of
shapes (:class:`World`; the defaults are the worlds the seed's setups were first run on).

Topology: ``regions`` registries (the four of the paper's time, then AFRINIC, then made-up
ones), each with ``countries`` countries; ``orgs`` organisations spread over the countries
(some countries busier than others). With ``top_blocks`` each region's /8 and each country's
LIR block are in the files, as parents of the organisations' blocks; without, as in real
delegated files, the organisations' blocks are the roots and only their registry and country
code relate them. An organisation holds a block of 2 to 16 /20s (``non_cidr``: address counts
that are not powers of two, e.g. 3 x 4,096, which the parser turns into several CIDR blocks),
a share of them a second block in another country's LIR block, and one IPv6 /32 with one to
three /48s. Each block is nested ``depth`` levels deep: 2 to 4 (``children``) ranges inside
each range, the last level being the leaf ranges hosts live in (again not CIDR-aligned counts
unless ``non_cidr`` is off). All of it is written as delegated-extended lines, one opaque-id
per organisation, so a run exercises the parser.

Places, on a plane in km: region centres 4,000 to 11,000 km apart; countries within 2,500 km
of their region's centre (regions are continents); organisations within 300 km of their
country's centre; hosts and crawlers within 20 km of their organisation's. A share
(``anomalous``, 5%) of organisations is hosted somewhere else in the world than their registry
suggests (network distance is not registry geography). Crawlers are spread over the regions
round-robin (``crowded``: that share of them in one region), each in its own organisation when
there are enough, at an address of one of its leaf ranges.

Latency (round trip, ms) from a crawler to a target: 0.5 + 1.5 ms per 100 km (fibre at two
thirds of c, routes 1.5 times the straight line) + 4 ms between organisations + 15 ms between
regions (transit), times log-normal noise: sigma ``path_noise`` (0.15) per (crawler,
organisation) route and ``host_noise`` (0.05) per (crawler, host). Latency thus grows with
topological distance (organisation, region) and geographic distance. The table holds one row
per (crawler, URL IP); probes read it exactly, so the nearest crawler of an IP is the one with
the smallest latency in the table.

Worlds where latency is not a function of geography alone (all off by default): ``asymmetry``,
the sigma of a log-normal factor per ordered pair of countries (the crawler's, the target's;
drawn for A -> B and B -> A apart: routes are asymmetric, peering deals are not geography);
``slow_links``, the share of ordered pairs of countries of one region whose traffic takes a
detour (30 to 80 ms more: a slow link inside a region); ``probe_noise``, the sigma of a
log-normal error on every probe (the table stays the truth a delegation is judged by: a probe
is one noisy measurement of it). ``spread`` places crawlers in countries of their own (no two
in one country while a country of their region has none), so every crawler is the nearest
for a few countries only and must be learnt country by country. These draws come from a
stream of their own: a world without them is the same as before they existed.

Download time (the second crawl-time model, beside "latency stands for download time"): a
32 KB page over TCP as the short-flow models have it (Cardwell, Savage and Anderson): one
round trip for the handshake, then slow start from an initial window of 2 segments of
1,460 bytes, doubling each round (4 rounds for 23 segments), plus the expected
retransmission timeouts, segments times loss times a 1 s RTO (RFC 2988's minimum). Loss
is the target region's, as PingER measured it (N. America and Europe below 0.1%, Asia
around 0.5%, Latin America around 1%): it depends on where the target is, hardly on how far
the crawler is, so it does not favour any crawler.

URLs: hosts drawn by organisation popularity (Zipf with exponent ``zipf``; 0: every
organisation alike, so few URLs each when there are many), a leaf range of the organisation
uniformly (an IPv6 /48 15% of the time), an address in it uniformly; a URL is on a host
already drawn for its organisation with probability 1 - 1/``pages_per_host``. URLs have IP
literal hosts.

The reference for a delegation is the best assignment within capacity
(:func:`webrace.delegation.optimum.best_assignment` over the latency table).
"""

# ruff: noqa: S311 - a simulation: seeded random worlds to be reproducible, no secret is drawn

from __future__ import annotations

import ipaddress
import itertools
import math
import random
from dataclasses import dataclass, field, replace

import numpy as np

from webrace.delegation.delegator import KNOWLEDGE, Crawler, Delegator
from webrace.delegation.hierarchy import Hierarchy, IPAddress, target_ip
from webrace.delegation.optimum import best_assignment
from webrace.delegation.probing import TableProber

# Registries: name, the region's /8, its IPv6 /12, country codes, centre (km on a plane).
# The first four are the paper's time's (AFRINIC began in 2005); regions past five are made up.
REGIONS = [
    ("arin", 23, "2600::/12", ["US", "CA", "PR", "BM"], (0.0, 0.0)),
    ("ripencc", 62, "2a00::/12", ["DE", "FR", "GB", "SE"], (6500.0, 1500.0)),
    ("apnic", 103, "2400::/12", ["JP", "AU", "IN", "SG"], (9000.0, -6000.0)),
    ("lacnic", 177, "2800::/12", ["BR", "AR", "CL", "MX"], (2000.0, -7000.0)),
    ("afrinic", 41, "2c00::/12", ["ZA", "NG", "KE", "EG"], (5500.0, -4500.0)),
]
SPARE_OCTETS = [5, 31, 45, 80, 90, 109, 130, 150, 190, 200]
COUNTRY_SPREAD_KM = 2500  # a region is continent-sized: its countries up to ~5,000 km apart
UNIT = 4096  # organisations' blocks are counted in /20s
BLOCK_UNITS = (2, 3, 4, 6, 8, 12, 16)
CIDR_BLOCK_UNITS = (2, 4, 8, 16)
LOSS = {"arin": 0.0005, "ripencc": 0.0005, "apnic": 0.005, "lacnic": 0.01, "afrinic": 0.01}  # by target region
DEFAULT_LOSS = 0.005
PAGE_BYTES, MSS, INITIAL_WINDOW, RTO_MS = 32 * 1024, 1460, 2, 1000.0
DATE = "20240101"


@dataclass(frozen=True)
class World:
    """The shape of a simulated Internet (see the module's docstring)."""

    regions: int = 4
    countries: int = 4  # per region
    orgs: int = 160
    depth: int = 2  # levels of ranges inside an organisation's block, leaf ranges last
    children: tuple[int, int] = (2, 4)  # ranges inside a range, at least and at most
    non_cidr: bool = True
    top_blocks: bool = True  # the regions' /8s and the LIRs' blocks are in the files
    second_block: float = 1 / 3
    anomalous: float = 0.05
    zipf: float = 1.0
    pages_per_host: float = 1.0
    ipv6: float = 0.15
    path_noise: float = 0.15
    host_noise: float = 0.05
    crowded: float = 0.0  # share of the crawlers placed in one region
    spread: bool = False  # crawlers in countries of their own
    asymmetry: float = 0.0  # sigma of a log-normal factor per ordered (crawler's, target's) pair of countries
    slow_links: float = 0.0  # share of ordered pairs of countries of one region with a slow route between them
    probe_noise: float = 0.0  # sigma of a log-normal error on every probe

    def with_(self, **changes: object) -> World:
        return replace(self, **changes)

    def describe(self) -> str:
        default = World()
        parts = [f"{self.orgs} orgs", f"{self.regions} regions", f"depth {self.depth}"]
        for name in ("countries", "children", "non_cidr", "top_blocks", "second_block", "anomalous", "zipf",
                     "pages_per_host", "ipv6", "path_noise", "host_noise", "crowded", "spread", "asymmetry",
                     "slow_links", "probe_noise"):
            value = getattr(self, name)
            if value != getattr(default, name):
                parts.append(f"{name} {value:g}" if isinstance(value, float) else f"{name} {value}")
        return ", ".join(parts)


@dataclass
class Place:
    region: int
    org: str
    xy: tuple[float, float]
    country: object = None  # (registry index, country index) where it really is; None: unknown


@dataclass
class Organisation:
    id: str
    region: int
    country: int
    xy: tuple[float, float]
    leaves4: list[ipaddress.IPv4Network] = field(default_factory=list)
    leaves6: list[ipaddress.IPv6Network] = field(default_factory=list)
    place: object = None  # (registry index, country index) where it really is
    home: int = 0  # the registry it is in (``region`` is where it is hosted)


@dataclass
class Region:
    registry: str
    octet: int
    block6: str
    countries: list[str]
    xy: tuple[float, float]


@dataclass
class Simulation:
    """What a run needs: the hierarchy as RIR lines, the crawlers, the latency table (one
    (crawler, ip, ms) row per crawler and URL IP), the URLs in crawl order, and the nearest
    crawler of every URL IP."""

    rir_lines: list[str]
    crawlers: list[Crawler]
    latency_rows: list[tuple[str, str, float]]
    urls: list[str]
    optimal: dict[str, str]
    seed: int
    loss: dict[str, float] = field(default_factory=dict)  # per URL IP: packet loss on the way to it
    world: World = field(default_factory=World)
    _best: dict[str, str] | None = field(default=None, repr=False)
    _hierarchy: Hierarchy | None = field(default=None, repr=False)

    def hierarchy(self) -> Hierarchy:
        """The hierarchy of the RIR lines (built once; delegators only read it)."""
        if self._hierarchy is None:
            self._hierarchy = Hierarchy()
            self._hierarchy.add_rir(self.rir_lines)
        return self._hierarchy

    def prober(self) -> TableProber:
        """What probes read: the table, or the table with the world's ``probe_noise``."""
        if self.world.probe_noise > 0:
            return NoisyProber(self.latency_rows, self.world.probe_noise, self.seed)
        return TableProber(self.latency_rows)

    def latency(self) -> dict[tuple[str, str], float]:
        return {(crawler_id, ip): ms for crawler_id, ip, ms in self.latency_rows}

    def cost_matrix(self) -> np.ndarray:
        """Latency (ms) of every URL (rows, in crawl order) from every crawler (columns)."""
        latency = self.latency()
        ids = [c.id for c in self.crawlers]
        return np.array([[latency[c, str(target_ip(url))] for c in ids] for url in self.urls])

    def best(self) -> dict[str, str]:
        """The best assignment within capacity: URL -> crawler, total latency minimal."""
        if self._best is None:
            columns = best_assignment(self.cost_matrix(), [c.capacity for c in self.crawlers])
            self._best = {url: self.crawlers[j].id for url, j in zip(self.urls, columns, strict=True)}
        return self._best


def simulate(crawlers: int, urls: int, seed: int, capacity: int | None = None,
             world: World | None = None) -> Simulation:
    """A world of the given shape, ``crawlers`` crawlers of the given capacity, and ``urls`` URLs."""
    world = world or World()
    if world.regions < 1 or world.countries < 1 or world.orgs < 1 or world.depth < 1:
        raise ValueError(f"a world needs at least one region, country, organisation and level: {world}")
    rng = random.Random(seed)
    lines: list[str] = []
    regions = _regions(rng, world.regions)
    orgs = _topology(rng, world, regions, lines)
    crawler_list, places = _crawlers(rng, world, orgs, crawlers, capacity)
    url_list, url_places = _urls(rng, world, orgs, urls)
    rows, optimal, paths = [], {}, {}
    links = _Links(world, seed)
    for ip, place in url_places.items():
        best = None
        for crawler in crawler_list:
            path = paths.setdefault((crawler.id, place.org), rng.lognormvariate(0, world.path_noise))
            ms = _latency(places[crawler.id], place) * path * rng.lognormvariate(0, world.host_noise)
            ms = round(links.apply(places[crawler.id], place, ms), 3)
            rows.append((crawler.id, ip, ms))
            if best is None or ms < best[0]:
                best = (ms, crawler.id)
        optimal[ip] = best[1]
    header = [f"2|sim|{DATE}|{len(lines)}|19830101|{DATE}|+0000", "# simulated delegated-extended data, seed "
              f"{seed}", *(f"{r.registry}|*|{kind}|*|0|summary" for r in regions for kind in ("ipv4", "ipv6"))]
    loss = {ip: LOSS.get(regions[place.region].registry, DEFAULT_LOSS) for ip, place in url_places.items()}
    return Simulation(header + lines, crawler_list, rows, url_list, optimal, seed, loss, world)


def _regions(rng: random.Random, count: int) -> list[Region]:
    regions = [Region(name, octet, block6, list(ccs), xy) for name, octet, block6, ccs, xy in REGIONS[:count]]
    for n in range(len(regions), count):
        if n - len(REGIONS) >= len(SPARE_OCTETS):
            raise ValueError(f"at most {len(REGIONS) + len(SPARE_OCTETS)} regions")
        for _ in range(1000):  # a centre at least 4,000 km from the others
            xy = (rng.uniform(-4000, 14000), rng.uniform(-11000, 5000))
            if all(math.dist(xy, r.xy) >= 4000 for r in regions):
                break
        regions.append(Region(f"rir{n + 1}", SPARE_OCTETS[n - len(REGIONS)], f"3{n:x}00::/12", [], xy))
    return regions


def _topology(rng: random.Random, world: World, regions: list[Region], lines: list[str]) -> list[Organisation]:
    bits = max(1, math.ceil(math.log2(world.countries)))  # each country's LIR block: a 1/2**bits of the /8
    lir_units = (1 << (24 - bits)) // UNIT
    weights = [rng.lognormvariate(0, 0.5) for _ in range(world.regions * world.countries)]
    homes = rng.choices(range(len(weights)), weights, k=world.orgs)  # (region, country) of each organisation
    cursor = [0] * len(weights)
    orgs: list[Organisation] = []
    next6 = {r: ipaddress.IPv6Network(region.block6).network_address for r, region in enumerate(regions)}
    for r, region in enumerate(regions):
        if world.top_blocks:
            lines.append(f"{region.registry}|ZZ|ipv4|{region.octet}.0.0.0|{1 << 24}|{DATE}|allocated|"
                         f"{region.registry}-iana")
            lines.append(f"{region.registry}|ZZ|ipv6|{region.block6.replace('/', '|')}|{DATE}|allocated|"
                         f"{region.registry}-iana")
        centres = []
        for c in range(world.countries):
            start = ipaddress.IPv4Address(f"{region.octet}.0.0.0") + c * lir_units * UNIT
            if world.top_blocks:
                lines.append(f"{region.registry}|{_cc(region, c)}|ipv4|{start}|{lir_units * UNIT}|{DATE}|allocated|"
                             f"{region.registry}-lir-{_cc(region, c)}")
            centres.append(_around(rng, region.xy, COUNTRY_SPREAD_KM))
        for k, home in enumerate(homes):
            if home // world.countries != r:
                continue
            c = home % world.countries
            org = Organisation(f"{region.registry}-org-{_cc(region, c)}-{k}", r, c, _around(rng, centres[c], 300))
            org.place, org.home = (r, c), r
            if rng.random() < world.anomalous:
                org.region = rng.randrange(len(regions))
                org.place = ("elsewhere", org.id)
                org.xy = _around(rng, _around(rng, regions[org.region].xy, COUNTRY_SPREAD_KM), 300)
            blocks = [c]
            if world.countries > 1 and rng.random() < world.second_block:
                blocks.append(rng.choice([o for o in range(world.countries) if o != c]))
            for b in blocks:
                slot = r * world.countries + b
                sizes = BLOCK_UNITS if world.non_cidr else CIDR_BLOCK_UNITS
                for units in (rng.choice(sizes), sizes[0]):  # a busy LIR block hands out small blocks
                    offset = cursor[slot] + rng.randint(0, 2)
                    if not world.non_cidr:
                        offset = -(-offset // units) * units  # a CIDR block starts at a multiple of its size
                    if offset + units <= lir_units:
                        break
                else:
                    raise ValueError(f"too many organisations for {world.countries} countries a region: "
                                     f"{region.registry}'s LIR block {b} is full")
                cursor[slot] = offset + units
                start = ipaddress.IPv4Address(f"{region.octet}.0.0.0") + (b * lir_units + offset) * UNIT
                line = f"{region.registry}|{_cc(region, c)}|ipv4|{{}}|{{}}|{DATE}|{{}}|{org.id}"
                lines.append(line.format(start, units * UNIT, "allocated"))
                _nest(rng, world, lines, line, org, int(start), units * UNIT, 1)
            net6 = ipaddress.IPv6Network(f"{next6[r]}/32")
            next6[r] += 1 << 96
            lines.append(f"{region.registry}|{_cc(region, c)}|ipv6|{net6.network_address}|32|{DATE}|allocated|{org.id}")
            for leaf in rng.sample(list(itertools.islice(net6.subnets(new_prefix=48), 64)), rng.randint(1, 3)):
                lines.append(f"{region.registry}|{_cc(region, c)}|ipv6|{leaf.network_address}|48|{DATE}|assigned|"
                             f"{org.id}")
                org.leaves6.append(leaf)
            orgs.append(org)
    return orgs


def _cc(region: Region, country: int) -> str:
    return region.countries[country] if country < len(region.countries) else f"{region.registry[0].upper()}{country}"


def _nest(rng: random.Random, world: World, lines: list[str], line: str, org: Organisation, start: int, count: int,
          level: int) -> None:
    """Ranges inside the range [start, start + count): ``children`` of them, each in its own
    share of the range, down to ``depth`` levels; the last level's ranges are leaves. A range
    is m x 2**j addresses at a multiple of 2**j, m from 1 to 7 (3, 5, 6, 7: not a CIDR block,
    but two or three, as in RIR files) unless ``non_cidr`` is off."""
    k = rng.randint(*world.children)
    if count // k < 64:  # too small to split: a leaf
        org.leaves4.extend(ipaddress.summarize_address_range(ipaddress.IPv4Address(start),
                                                             ipaddress.IPv4Address(start + count - 1)))
        return
    share = count // k
    for n in range(k):
        target = share * rng.uniform(0.35, 0.95)
        grain = 1 << max(4, int(math.log2(target / 4))) if world.non_cidr else 1 << int(math.log2(target))
        first = -(-(start + n * share) // grain) * grain  # aligned, inside its share
        room = (start + (n + 1) * share - first) // grain
        m = min(room, max(1, min(7, int(target // grain)))) if world.non_cidr else min(room, 1)
        if m < 1:
            continue
        size = m * grain
        first += rng.randint(0, room - m) * grain
        lines.append(line.format(ipaddress.IPv4Address(first), size, "assigned"))
        if level < world.depth:
            _nest(rng, world, lines, line, org, first, size, level + 1)
        else:
            org.leaves4.extend(ipaddress.summarize_address_range(ipaddress.IPv4Address(first),
                                                                 ipaddress.IPv4Address(first + size - 1)))


def _crawlers(rng: random.Random, world: World, orgs: list[Organisation], count: int,
              capacity: int | None) -> tuple[list[Crawler], dict[str, Place]]:
    regions = sorted({o.id.split("-org-")[0] for o in orgs})
    rng.shuffle(regions)
    crowded = round(world.crowded * count)
    crawlers, places, used = [], {}, set()
    countries: dict[tuple[int, int], int] = {}  # (registry, country) -> crawlers placed there
    for n in range(count):
        registry = regions[0] if n < crowded else regions[(n - crowded) % len(regions)]
        mine = [o for o in orgs if o.id.startswith(registry + "-org-")]
        free = [o for o in mine if o.id not in used] or mine
        if world.spread:  # the countries of the region with the fewest crawlers
            fewest = min(countries.get((o.home, o.country), 0) for o in free)
            free = [o for o in free if countries.get((o.home, o.country), 0) == fewest]
        org = rng.choice(free)
        used.add(org.id)
        countries[org.home, org.country] = countries.get((org.home, org.country), 0) + 1
        ip = _host(rng, rng.choice(org.leaves4))
        crawler_id = f"c{n + 1:02d}"
        crawlers.append(Crawler(crawler_id, ip, capacity))
        places[crawler_id] = Place(org.region, org.id, _around(rng, org.xy, 20), org.place)
    return crawlers, places


def _urls(rng: random.Random, world: World, orgs: list[Organisation], count: int) -> tuple[list[str], dict[str, Place]]:
    ranked = orgs[:]
    rng.shuffle(ranked)
    weights = [1 / (rank + 1) ** world.zipf for rank in range(len(ranked))]
    urls, places, hosts = [], {}, {}
    for n in range(count):
        org = rng.choices(ranked, weights)[0]
        known = hosts.setdefault(org.id, [])
        if known and rng.random() > 1 / world.pages_per_host:
            ip = rng.choice(known)
        else:
            leaves = org.leaves6 if org.leaves6 and rng.random() < world.ipv6 else org.leaves4
            ip = _host(rng, rng.choice(leaves))
            known.append(ip)
        places.setdefault(str(ip), Place(org.region, org.id, _around(rng, org.xy, 20), org.place))
        urls.append(f"http://[{ip}]/p{n}.html" if ip.version == 6 else f"http://{ip}/p{n}.html")
    return urls, places


def _host(rng: random.Random, network: ipaddress.IPv4Network | ipaddress.IPv6Network) -> IPAddress:
    if network.num_addresses <= 2:
        return network.network_address
    span = min(network.num_addresses - 2, 1 << 16)
    return network.network_address + rng.randint(1, span)


def _around(rng: random.Random, xy: tuple[float, float], radius: float) -> tuple[float, float]:
    angle, distance = rng.uniform(0, 2 * math.pi), radius * math.sqrt(rng.random())
    return xy[0] + distance * math.cos(angle), xy[1] + distance * math.sin(angle)


class _Links:
    """What a world's routes between countries add to geography (``asymmetry``, ``slow_links``),
    drawn pair by pair from a stream of their own, the first time a pair is met."""

    def __init__(self, world: World, seed: int) -> None:
        self.world = world
        self.rng = random.Random(f"{seed}/links")
        self.factor: dict[tuple[object, object], tuple[float, float]] = {}

    def apply(self, crawler: Place, target: Place, ms: float) -> float:
        world = self.world
        if not (world.asymmetry or world.slow_links) or crawler.country is None or target.country is None:
            return ms
        key = (crawler.country, target.country)
        found = self.factor.get(key)
        if found is None:
            scale = self.rng.lognormvariate(0, world.asymmetry) if world.asymmetry else 1.0
            same_region = crawler.country[0] == target.country[0] and crawler.country != target.country
            slow = self.rng.uniform(30, 80) if same_region and self.rng.random() < world.slow_links else 0.0
            found = self.factor[key] = (scale, slow)
        return ms * found[0] + found[1]


class NoisyProber(TableProber):
    """A latency table read through noise: every probe is the table's latency times a
    log-normal error of sigma ``noise`` (deterministic by ``seed``)."""

    def __init__(self, rows: list[tuple[str, str, float]], noise: float, seed: int) -> None:
        super().__init__(rows)
        self.noise = noise
        self.rng = random.Random(f"{seed}/probes")

    def probe(self, crawler_id: str, ip: IPAddress) -> float:
        return super().probe(crawler_id, ip) * self.rng.lognormvariate(0, self.noise)


def _latency(a: Place, b: Place) -> float:
    ms = 0.5 + 1.5 * math.dist(a.xy, b.xy) / 100
    if a.org != b.org:
        ms += 4
    if a.region != b.region:
        ms += 15
    return ms


# -- running ------------------------------------------------------------------------------


def download_ms(rtt_ms: float, loss: float = 0.0, size: int = PAGE_BYTES) -> float:
    """Time to fetch a page of ``size`` bytes over a fresh TCP connection with round trip
    ``rtt_ms`` and packet loss ``loss``: handshake, slow-start rounds, expected timeouts."""
    segments = -(-size // MSS)
    rounds, window, sent = 0, INITIAL_WINDOW, 0
    while sent < segments:
        sent += window
        window *= 2
        rounds += 1
    return (1 + rounds) * rtt_ms + segments * loss * max(RTO_MS, 4 * rtt_ms)


def crawl_time(sim: Simulation, assignment: dict[str, str], model: str = "latency") -> tuple[float, float]:
    """(total, makespan) in ms for ``assignment`` (URL -> crawler): the total is the sum over
    URLs of the latency from the assigned crawler to the URL's IP (the paper's global cost,
    with latency standing for download time), or with ``model="download"`` of the page's
    :func:`download_ms`; the makespan is the largest such sum of any one crawler (crawlers
    work in parallel, each fetching its pages one after the other)."""
    latency = sim.latency()
    per_crawler: dict[str, float] = {}
    for url, crawler_id in assignment.items():
        ip = str(target_ip(url))
        ms = latency[crawler_id, ip]
        if model == "download":
            ms = download_ms(ms, sim.loss.get(ip, 0.0))
        per_crawler[crawler_id] = per_crawler.get(crawler_id, 0.0) + ms
    return sum(per_crawler.values()), max(per_crawler.values(), default=0.0)


def nearest_share(sim: Simulation, assignment: dict[str, str]) -> float:
    """The share of URLs assigned to a nearest crawler (the smallest latency to the URL's IP)."""
    latency = sim.latency()
    ids = [c.id for c in sim.crawlers]
    nearest = 0
    for url, crawler_id in assignment.items():
        ip = str(target_ip(url))
        nearest += latency[crawler_id, ip] <= min(latency[c, ip] for c in ids)
    return nearest / max(len(assignment), 1)


def _metrics(sim: Simulation, assignment: dict[str, str], probes: list[int]) -> dict:
    total, makespan = crawl_time(sim, assignment)
    download, download_makespan = crawl_time(sim, assignment, "download")
    best = sim.best()
    optimum, _ = crawl_time(sim, best)
    loads: dict[str, int] = {}
    for crawler_id in assignment.values():
        loads[crawler_id] = loads.get(crawler_id, 0) + 1
    tail = probes[len(probes) - max(1, len(probes) // 10):] if probes else []
    share = nearest_share(sim, assignment)
    return {
        "urls": len(assignment),
        "optimal_share": share,  # the seed's "optimal crawler": the nearest one
        "nearest_share": share,
        "probes_per_url": sum(probes) / max(len(probes), 1),
        "probes_last_50": sum(probes[-50:]) / max(len(probes[-50:]), 1),
        "probes_last_10pct": sum(tail) / max(len(tail), 1),
        "probes": probes,
        "crawl_time_ms": total,
        "makespan_ms": makespan,
        "download_ms": download,
        "download_makespan_ms": download_makespan,
        "optimum_ms": optimum,
        "latency_ratio": total / optimum if optimum else 1.0,
        "optimum_nearest_share": nearest_share(sim, best),
        "max_load": max(loads.values(), default=0),
        "over_capacity": sum(max(0, loads.get(c.id, 0) - c.capacity) for c in sim.crawlers
                             if c.capacity is not None),
        "assignment": assignment,
    }


def run_simulation(sim: Simulation, threshold_ms: float = 50.0, variance_ms: float = 25.0,
                   lookahead: int | None = 1, strategy: str = KNOWLEDGE, jitter: int = 0, **options: float) -> dict:
    """Delegate the simulation's URLs in order with IPMicra; metrics (``nearest_share``,
    ``probes_per_url``, ``probes_last_10pct``, ``probes`` per URL, ``crawl_time_ms``,
    ``latency_ratio`` to the best assignment within capacity, ``max_load``, ``reasons``,
    ``assignment``). ``strategy="search"`` is the seed's procedure (the baseline). The URLs are
    a batch: the delegator's ``horizon`` is their number unless ``options`` say otherwise.
    ``jitter`` (k > 0): every reading of the simulated clock is off by up to a millisecond,
    drawn from seed k, as a real clock's are: the measurements' drift terms move by about
    1e-12, enough to turn near-ties, so runs with different ``k`` show how far one run's
    figures are from what the method does on the world."""
    now = [0.0]  # simulated time: one second a URL
    noise = random.Random(f"jitter/{jitter}") if jitter else None
    options.setdefault("horizon", len(sim.urls))
    delegator = Delegator(sim.hierarchy(), sim.prober(), threshold_ms=threshold_ms,
                          variance_ms=variance_ms, lookahead=lookahead, strategy=strategy,
                          clock=(lambda: now[0] + noise.random() * 1e-3) if noise else (lambda: now[0]),
                          **options)
    for crawler in sim.crawlers:
        delegator.register(crawler)
    decisions = []
    for url in sim.urls:
        decisions.append(delegator.delegate(url))
        now[0] += 1.0
    # balancing may have moved earlier pages: read where each one ended up
    assignment = {url: delegator.assigned(url) for url in sim.urls}
    metrics = _metrics(sim, assignment, [d.probes for d in decisions])
    metrics["reasons"] = dict(sorted((k.removeprefix("delegation/"), v) for k, v in delegator.stats.items()))
    metrics["loads"] = {c.id: delegator.load(c.id) for c in sim.crawlers}
    return metrics


def run_random(sim: Simulation, seed: int = 0) -> dict:
    """The location-unaware baseline (UCYMicra): each URL to a crawler drawn at random."""
    rng = random.Random(seed)
    ids = [c.id for c in sim.crawlers]
    return _metrics(sim, {url: rng.choice(ids) for url in sim.urls}, [0] * len(sim.urls))


def run_probe_all(sim: Simulation) -> dict:
    """The first location-aware extension (section II): every URL probed from every crawler
    and given to the nearest (capacities not looked at)."""
    latency = sim.latency()
    ids = [c.id for c in sim.crawlers]
    assignment = {url: min(ids, key=lambda c: latency[c, str(target_ip(url))]) for url in sim.urls}
    return _metrics(sim, assignment, [len(ids)] * len(sim.urls))
