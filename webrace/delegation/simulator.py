"""A simulated Internet for IPMicra (seed 002, section IV), deterministic by seed.

Topology: the four registries of the paper's time, each region with four countries (an LIR
/12 block of the region's /8), each with ten organisations holding one IPv4 /16 block, a
third of them a second /16 from another country's LIR block (an organisation's addresses need
not sit under its LIR), and one IPv6 /32; the /16s are nested into /20 sub-blocks and leaf
ranges of 256 to 1,024 addresses (counts that are not powers of two become several CIDR
blocks, as in real RIR files), the /32s into /48s. All of it is written as delegated-extended
lines, one opaque-id per organisation, so a run exercises the parser.

Places, on a plane in km: region centres 6,000 to 11,000 km apart; countries within 2,500 km
of their region's centre (regions are continents); organisations within 300 km of their
country's centre; hosts and crawlers within 20 km of their organisation's. 5% of
organisations are hosted somewhere else in the world than their registry suggests (network
distance is not registry geography). Crawlers are spread over the regions round-robin, each in
its own organisation, at an address of one of its leaf ranges.

Latency (round trip, ms) from a crawler to a target: 0.5 + 1.5 ms per 100 km (fibre at two
thirds of c, routes 1.5 times the straight line) + 4 ms between organisations + 15 ms between
regions (transit), times log-normal noise: sigma 0.15 per (crawler, organisation) route and
0.05 per (crawler, host). Latency thus grows with topological distance (organisation, region)
and geographic distance. The table holds one row per (crawler, URL IP); probes read it
exactly, so the optimal crawler of an IP is the one with the smallest latency in the table.

Download time (the second crawl-time model, beside "latency stands for download time"): a
32 KB page over TCP as the short-flow models have it (Cardwell, Savage and Anderson): one
round trip for the handshake, then slow start from an initial window of 2 segments of
1,460 bytes, doubling each round (4 rounds for 23 segments), plus the expected
retransmission timeouts, segments times loss times a 1 s RTO (RFC 2988's minimum). Loss
is the target region's, as PingER measured it (N. America and Europe below 0.1%, Asia
around 0.5%, Latin America around 1%): it depends on where the target is, hardly on how far
the crawler is, so it does not favour any crawler.

URLs: hosts drawn by organisation popularity (Zipf, s=1: a few hosting organisations hold
many sites), a leaf range of the organisation uniformly (an IPv6 /48 15% of the time), an
address in it uniformly; URLs have IP literal hosts.
"""

from __future__ import annotations

import ipaddress
import itertools
import math
import random
from dataclasses import dataclass, field

from webrace.delegation.delegator import Crawler, Delegator
from webrace.delegation.hierarchy import Hierarchy, IPAddress, target_ip
from webrace.delegation.probing import TableProber

# The four registries of the paper's time (AFRINIC began in 2005): registry, the region's /8,
# its IPv6 /12, country codes, centre (km on a plane; continents 6,000-11,000 km apart).
REGIONS = [
    ("arin", 23, "2600::/12", ["US", "CA", "PR", "BM"], (0.0, 0.0)),
    ("ripencc", 62, "2a00::/12", ["DE", "FR", "GB", "SE"], (6500.0, 1500.0)),
    ("apnic", 103, "2400::/12", ["JP", "AU", "IN", "SG"], (9000.0, -6000.0)),
    ("lacnic", 177, "2800::/12", ["BR", "AR", "CL", "MX"], (2000.0, -7000.0)),
]
COUNTRY_SPREAD_KM = 2500  # a region is continent-sized: its countries up to ~5,000 km apart
ORGS_PER_COUNTRY = 10
ANOMALOUS_ORGS = 0.05
SECOND_BLOCK = 1 / 3
IPV6_URLS = 0.15
PATH_NOISE = 0.15  # log-normal sigma of a route: one draw per (crawler, organisation)
HOST_NOISE = 0.05  # and of a host on it: one draw per (crawler, IP)
LEAF_SIZES = [256, 512, 768, 1024]
LOSS = {"arin": 0.0005, "ripencc": 0.0005, "apnic": 0.005, "lacnic": 0.01}  # packet loss by the target's region
PAGE_BYTES, MSS, INITIAL_WINDOW, RTO_MS = 32 * 1024, 1460, 2, 1000.0
DATE = "20240101"


@dataclass
class Place:
    region: int
    org: str
    xy: tuple[float, float]


@dataclass
class Organisation:
    id: str
    region: int
    xy: tuple[float, float]
    leaves4: list[ipaddress.IPv4Network] = field(default_factory=list)
    leaves6: list[ipaddress.IPv6Network] = field(default_factory=list)


@dataclass
class Simulation:
    """What a run needs: the hierarchy as RIR lines, the crawlers, the latency table (one
    (crawler, ip, ms) row per crawler and URL IP), the URLs in crawl order, and the optimal
    crawler of every URL IP."""

    rir_lines: list[str]
    crawlers: list[Crawler]
    latency_rows: list[tuple[str, str, float]]
    urls: list[str]
    optimal: dict[str, str]
    seed: int
    loss: dict[str, float] = field(default_factory=dict)  # per URL IP: packet loss on the way to it

    def latency(self) -> dict[tuple[str, str], float]:
        return {(crawler_id, ip): ms for crawler_id, ip, ms in self.latency_rows}


def simulate(crawlers: int, urls: int, seed: int, capacity: int | None = None) -> Simulation:
    """A topology, ``crawlers`` crawlers (spread over the regions round-robin, each in its
    own organisation) of the given capacity, and ``urls`` URLs."""
    rng = random.Random(seed)
    lines: list[str] = []
    orgs = _topology(rng, lines)
    crawler_list, places = _crawlers(rng, orgs, crawlers, capacity)
    url_list, url_places = _urls(rng, orgs, urls)
    rows, optimal, paths = [], {}, {}
    for ip, place in url_places.items():
        best = None
        for crawler in crawler_list:
            path = paths.setdefault((crawler.id, place.org), rng.lognormvariate(0, PATH_NOISE))
            ms = round(_latency(places[crawler.id], place) * path * rng.lognormvariate(0, HOST_NOISE), 3)
            rows.append((crawler.id, ip, ms))
            if best is None or ms < best[0]:
                best = (ms, crawler.id)
        optimal[ip] = best[1]
    header = [f"2|sim|{DATE}|{len(lines)}|19830101|{DATE}|+0000", "# simulated delegated-extended data, seed "
              f"{seed}", *(f"{reg}|*|{kind}|*|0|summary" for reg, *_ in REGIONS for kind in ("ipv4", "ipv6"))]
    loss = {ip: LOSS[REGIONS[place.region][0]] for ip, place in url_places.items()}
    return Simulation(header + lines, crawler_list, rows, url_list, optimal, seed, loss)


def _topology(rng: random.Random, lines: list[str]) -> list[Organisation]:
    orgs = []
    for r, (registry, octet, block6, countries, centre) in enumerate(REGIONS):
        lines.append(f"{registry}|ZZ|ipv4|{octet}.0.0.0|{1 << 24}|{DATE}|allocated|{registry}-iana")
        lines.append(f"{registry}|ZZ|ipv6|{block6.replace('/', '|')}|{DATE}|allocated|{registry}-iana")
        # each country's /12 LIR block: a /16 for each of its organisations, the rest spare for
        # second blocks of organisations from other countries
        slots = [[ipaddress.IPv4Network(f"{octet}.{c * 16 + k}.0.0/16") for k in range(16)]
                 for c in range(len(countries))]
        spare = {c: slots[c][ORGS_PER_COUNTRY:] for c in range(len(countries))}
        next6 = ipaddress.IPv6Network(block6).network_address
        for c, cc in enumerate(countries):
            lines.append(f"{registry}|{cc}|ipv4|{octet}.{c * 16}.0.0|{1 << 20}|{DATE}|allocated|{registry}-lir-{cc}")
            country_xy = _around(rng, centre, COUNTRY_SPREAD_KM)
            for k in range(ORGS_PER_COUNTRY):
                org_id = f"{registry}-org-{cc}-{k}"
                region, xy = r, _around(rng, country_xy, 300)
                if rng.random() < ANOMALOUS_ORGS:
                    region = rng.randrange(len(REGIONS))
                    xy = _around(rng, _around(rng, REGIONS[region][4], COUNTRY_SPREAD_KM), 300)
                org = Organisation(org_id, region, xy)
                blocks = [slots[c][k]]
                others = [o for o in spare if o != c and spare[o]]
                if rng.random() < SECOND_BLOCK and others:
                    blocks.append(spare[rng.choice(others)].pop())
                for block in blocks:
                    _org_block(rng, lines, registry, cc, org, block)
                net6 = ipaddress.IPv6Network(f"{next6}/32")
                next6 += 1 << 96
                lines.append(f"{registry}|{cc}|ipv6|{net6.network_address}|32|{DATE}|allocated|{org_id}")
                for leaf in rng.sample(list(itertools.islice(net6.subnets(new_prefix=48), 64)), rng.randint(1, 3)):
                    lines.append(f"{registry}|{cc}|ipv6|{leaf.network_address}|48|{DATE}|assigned|{org_id}")
                    org.leaves6.append(leaf)
                orgs.append(org)
    return orgs


def _org_block(rng: random.Random, lines: list[str], registry: str, cc: str, org: Organisation,
               block: ipaddress.IPv4Network) -> None:
    """A /16 with 2-4 /20 sub-blocks, each with 2-4 leaf ranges at /22 boundaries."""
    lines.append(f"{registry}|{cc}|ipv4|{block.network_address}|{block.num_addresses}|{DATE}|allocated|{org.id}")
    for sub in rng.sample(list(block.subnets(new_prefix=20)), rng.randint(2, 4)):
        lines.append(f"{registry}|{cc}|ipv4|{sub.network_address}|{sub.num_addresses}|{DATE}|assigned|{org.id}")
        for slot in rng.sample(list(sub.subnets(new_prefix=22)), rng.randint(2, 4)):
            size = rng.choice(LEAF_SIZES)
            lines.append(f"{registry}|{cc}|ipv4|{slot.network_address}|{size}|{DATE}|assigned|{org.id}")
            org.leaves4.extend(ipaddress.summarize_address_range(slot.network_address,
                                                                 slot.network_address + size - 1))


def _crawlers(rng: random.Random, orgs: list[Organisation], count: int,
              capacity: int | None) -> tuple[list[Crawler], dict[str, Place]]:
    regions = list(range(len(REGIONS)))
    rng.shuffle(regions)
    crawlers, places, used = [], {}, set()
    for n in range(count):
        region = regions[n % len(regions)]
        org = rng.choice([o for o in orgs if o.id.startswith(REGIONS[region][0] + "-") and o.id not in used])
        used.add(org.id)
        ip = _host(rng, rng.choice(org.leaves4))
        crawler_id = f"c{n + 1:02d}"
        crawlers.append(Crawler(crawler_id, ip, capacity))
        places[crawler_id] = Place(org.region, org.id, _around(rng, org.xy, 20))
    return crawlers, places


def _urls(rng: random.Random, orgs: list[Organisation], count: int) -> tuple[list[str], dict[str, Place]]:
    ranked = orgs[:]
    rng.shuffle(ranked)
    weights = [1 / (rank + 1) for rank in range(len(ranked))]
    urls, places = [], {}
    for n in range(count):
        org = rng.choices(ranked, weights)[0]
        leaves = org.leaves6 if rng.random() < IPV6_URLS else org.leaves4
        ip = _host(rng, rng.choice(leaves))
        places.setdefault(str(ip), Place(org.region, org.id, _around(rng, org.xy, 20)))
        urls.append(f"http://[{ip}]/p{n}.html" if ip.version == 6 else f"http://{ip}/p{n}.html")
    return urls, places


def _host(rng: random.Random, network: ipaddress.IPv4Network | ipaddress.IPv6Network) -> IPAddress:
    span = min(network.num_addresses - 2, 1 << 16)
    return network.network_address + rng.randint(1, span)


def _around(rng: random.Random, xy: tuple[float, float], radius: float) -> tuple[float, float]:
    angle, distance = rng.uniform(0, 2 * math.pi), radius * math.sqrt(rng.random())
    return xy[0] + distance * math.cos(angle), xy[1] + distance * math.sin(angle)


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


def _metrics(sim: Simulation, assignment: dict[str, str], probes: list[int]) -> dict:
    total, makespan = crawl_time(sim, assignment)
    download, download_makespan = crawl_time(sim, assignment, "download")
    optimal = sum(sim.optimal[str(target_ip(url))] == crawler_id for url, crawler_id in assignment.items())
    loads: dict[str, int] = {}
    for crawler_id in assignment.values():
        loads[crawler_id] = loads.get(crawler_id, 0) + 1
    return {
        "urls": len(assignment),
        "optimal_share": optimal / max(len(assignment), 1),
        "probes_per_url": sum(probes) / max(len(probes), 1),
        "probes_last_50": sum(probes[-50:]) / max(len(probes[-50:]), 1),
        "probes": probes,
        "crawl_time_ms": total,
        "makespan_ms": makespan,
        "download_ms": download,
        "download_makespan_ms": download_makespan,
        "max_load": max(loads.values(), default=0),
        "assignment": assignment,
    }


def run_simulation(sim: Simulation, threshold_ms: float = 50.0, variance_ms: float = 25.0,
                   lookahead: int | None = 1) -> dict:
    """Delegate the simulation's URLs in order with IPMicra; metrics (``optimal_share``,
    ``probes_per_url``, ``probes_last_50``, ``probes`` per URL, ``crawl_time_ms``,
    ``makespan_ms``, ``max_load``, ``reasons``, ``assignment``)."""
    hierarchy = Hierarchy()
    hierarchy.add_rir(sim.rir_lines)
    delegator = Delegator(hierarchy, TableProber(sim.latency_rows), threshold_ms=threshold_ms, variance_ms=variance_ms,
                          lookahead=lookahead)
    for crawler in sim.crawlers:
        delegator.register(crawler)
    decisions = [delegator.delegate(url) for url in sim.urls]
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
    """The first location-aware extension (section II): every URL probed from every crawler."""
    latency = sim.latency()
    ids = [c.id for c in sim.crawlers]
    assignment = {url: min(ids, key=lambda c: latency[c, str(target_ip(url))]) for url in sim.urls}
    return _metrics(sim, assignment, [len(ids)] * len(sim.urls))
