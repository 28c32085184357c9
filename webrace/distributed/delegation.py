"""IPMicra in the distributed mode (``WEBRACE_DELEGATION``): every worker has its own queue
in each round, and a page waits in the queue of the worker its host's IP is delegated to.

Each worker registers itself (``WEBRACE_WORKER_ID``, ``WEBRACE_WORKER_IP``) and keeps a
:class:`~webrace.delegation.Delegator` over the hierarchy of ``WEBRACE_DELEGATION_RIR`` (and
``WEBRACE_DELEGATION_SUBNETS``). Delegations are shared: the first worker to decide a subnet
writes it (``HSETNX``), the others adopt it, so a subnet has one crawler for everybody.

Keys, under the prefix: ``delegation:workers`` (hash worker id -> JSON ``{ip, capacity,
seen}``, ``seen`` refreshed while the worker runs), ``delegation:subnets`` (hash CIDR ->
worker id), ``delegation:rtt`` (hash ``worker|ip`` -> ms, what workers measured),
``delegation:probe:<worker>`` (probe requests waiting for that worker), ``delegation:knowledge``
(a stream of every probe result any worker's coordinator paid for), ``delegation:addresses``
(hash address -> the worker it was given to) and ``delegation:load`` (hash worker -> addresses
given to it: what ``WEBRACE_WORKER_CAPACITY`` bounds, claimed atomically by :data:`CLAIM`).

Knowledge is shared: each probe a worker's coordinator makes (``{by, crawler, ip, ms}``) is
added to the ``delegation:knowledge`` stream, and before deciding, every worker reads what the
others added since it last looked into its own :class:`~webrace.delegation.Knowledge`; so a
probe one worker paid for serves every worker's later decisions in the same subnet,
organisation and around it, and nobody probes that pair again. The stream keeps the last
``KNOWLEDGE_MAXLEN`` results (a worker that joins late learns from those).

Probes: with ``WEBRACE_DELEGATION_LATENCY`` (a ``crawler,ip,ms`` CSV) they read the table,
as ``scrapy ipmicra delegate`` does; without it they are measured: before a page's links
are offered, the addresses whose subnet nobody has yet are measured by this worker (a timed
TCP connect, in a thread) and by every other running worker, asked through Redis
(``delegation:probe:<worker>`` lists; each worker answers them between pages, in a
thread) and answering in ``delegation:rtt`` (hash ``worker|ip`` -> ms); a worker that does
not answer within ``WEBRACE_DELEGATION_PROBE_TIMEOUT`` counts as far. DNS answers are
cached per worker, resolved through Scrapy's resolver before a page's links are offered;
``WEBRACE_DELEGATION_HOSTS`` pins hosts to addresses. Pages whose host cannot be resolved,
and the start pages `scrapy urd schedule` offers, wait in the shared queue, which every
worker takes from after its own.
A worker that stops (no ``seen`` for ``WEBRACE_LEASE_TIMEOUT``) has its queue taken over.
"""

from __future__ import annotations

import json
import logging
import math
import os
import socket
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any
from urllib.parse import urlsplit

import redis

from webrace.delegation import (
    CapacityError,
    Crawler,
    DelegationError,
    Delegator,
    Hierarchy,
    ProbeError,
    RirError,
    TableProber,
    TcpProber,
    Unreachable,
    target_ip,
)
from webrace.delegation.tables import InputError, read_latency

logger = logging.getLogger(__name__)

HEARTBEAT_S = 1.0
KNOWLEDGE_MAXLEN = 200_000  # probe results the shared stream keeps (about 100 bytes each)
KNOWLEDGE_BATCH = 1_000  # results read from it in one round trip


def worker_id(settings: Any) -> str:
    return settings.get("WEBRACE_WORKER_ID") or f"{socket.gethostname()}-{os.getpid()}"


class SharedMeasurements:
    """Probes answered from measurements: this worker's own (TCP connects made before the
    links are offered), the others' as they stored them in Redis."""

    def __init__(self, client: redis.Redis, key: str, me: str) -> None:
        self.client, self.key, self.me = client, key, me
        self.local: dict[tuple[str, str], float] = {}

    def probe(self, crawler_id: str, ip: Any) -> float:
        field = f"{crawler_id}|{ip}"
        found = self.local.get((crawler_id, str(ip)))
        if found is None:
            raw = self.client.hget(self.key, field)
            if raw is None:
                raise Unreachable(f"no measurement of {crawler_id} to {ip}")
            found = float(raw)
        return found

    def record(self, ip: str, ms: float) -> None:
        self.local[(self.me, ip)] = ms
        self.client.hset(self.key, f"{self.me}|{ip}", f"{ms:.3f}")


class SharedKnowledge:
    """Probe results shared between workers' coordinators through a Redis stream: what this
    one paid for is added (:meth:`publish`), what the others paid for is read into its
    knowledge (:meth:`pull`)."""

    def __init__(self, client: redis.Redis, key: str, me: str, delegator: Delegator) -> None:
        self.client, self.key, self.me, self.delegator = client, key, me, delegator
        self.last = "0-0"  # the last entry read
        self.learned = 0  # results of other workers taken in
        self.skipped = 0  # malformed entries passed over

    def publish(self, ip: Any, results: dict[str, float]) -> None:
        """Add one decision's probe results (crawler -> ms, ``inf``: unreachable)."""
        if not results:
            return
        pipe = self.client.pipeline(transaction=False)
        for crawler_id, ms in results.items():
            pipe.xadd(self.key, {"by": self.me, "crawler": crawler_id, "ip": str(ip), "ms": repr(float(ms))},
                      maxlen=KNOWLEDGE_MAXLEN, approximate=True)
        pipe.execute()

    def pull(self, most: int = 50 * KNOWLEDGE_BATCH) -> int:
        """Read the results added since the last look (at most ``most``) into the knowledge;
        this worker's own are skipped (it kept them when it probed). The number taken in."""
        knowledge = self.delegator.knowledge
        taken = 0
        for _ in range(max(1, most // KNOWLEDGE_BATCH)):
            found = self.client.xread({self.key: self.last}, count=KNOWLEDGE_BATCH)
            entries = found[0][1] if found else []
            for entry_id, fields in entries:
                self.last = _text(entry_id)
                fields = {_text(k): _text(v) for k, v in fields.items()}
                if fields.get("by") == self.me:
                    continue
                try:
                    ms = float(fields["ms"])
                    if not ms >= 0:
                        raise ValueError(f"latency {ms}")
                    knowledge.observe(fields["crawler"], target_ip(fields["ip"]), ms)
                except (KeyError, ValueError) as exc:
                    self.skipped += 1
                    logger.warning("ignored a malformed shared probe result %s: %s", entry_id, exc)
                    continue
                taken += 1
            if len(entries) < KNOWLEDGE_BATCH:
                break
        self.learned += taken
        return taken


class RedisDelegation:
    def __init__(self, client: redis.Redis, key_prefix: str, settings: Any) -> None:
        self.client = client
        self.me = worker_id(settings)
        my_ip = settings.get("WEBRACE_WORKER_IP")
        if not my_ip:
            raise DelegationError("WEBRACE_DELEGATION needs WEBRACE_WORKER_IP: the address this worker crawls from")
        capacity = settings.get("WEBRACE_WORKER_CAPACITY")
        try:
            capacity = int(capacity) if capacity not in (None, "") else None
        except (TypeError, ValueError):
            raise DelegationError(f"WEBRACE_WORKER_CAPACITY={capacity!r}: a whole number of addresses") from None
        self.crawler = Crawler(self.me, my_ip, capacity)
        self.keys = {name: f"{key_prefix}delegation:{name}"
                     for name in ("workers", "subnets", "rtt", "probe", "knowledge", "addresses", "load")}
        self._claim = client.register_script(CLAIM)
        self.over_capacity = 0  # addresses left to the shared queue: every worker was full
        self.probe_timeout = settings.getfloat("WEBRACE_DELEGATION_PROBE_TIMEOUT", 2.0)
        self.stale_s = settings.getfloat("WEBRACE_LEASE_TIMEOUT")
        hierarchy = Hierarchy()
        rir = settings.getlist("WEBRACE_DELEGATION_RIR")
        if not rir:
            raise DelegationError("WEBRACE_DELEGATION needs WEBRACE_DELEGATION_RIR: RIR delegated-extended files")
        latency = settings.get("WEBRACE_DELEGATION_LATENCY")
        try:
            for path in rir:
                hierarchy.add_rir(path)
            if settings.get("WEBRACE_DELEGATION_SUBNETS"):
                with open(settings["WEBRACE_DELEGATION_SUBNETS"], encoding="utf-8") as handle:
                    for line in handle:
                        if line.split("#", 1)[0].strip():
                            hierarchy.add_subnet(line.split("#", 1)[0].strip())
            rows = read_latency(latency) if latency else None
        except (RirError, InputError, OSError, ValueError) as exc:
            raise DelegationError(f"WEBRACE_DELEGATION: {getattr(exc, 'strerror', None) or exc}") from None
        self.hierarchy = hierarchy
        self.measured = None if latency else SharedMeasurements(client, self.keys["rtt"], self.me)
        prober = TableProber(rows) if rows is not None else self.measured
        # a routed page is in its worker's queue at once: pages never move to make room
        self.delegator = Delegator(hierarchy, prober, threshold_ms=settings.getfloat("WEBRACE_DELEGATION_THRESHOLD_MS"),
                                   strategy=settings.get("WEBRACE_DELEGATION_STRATEGY") or "knowledge", movable=False)
        self.shared = SharedKnowledge(client, self.keys["knowledge"], self.me, self.delegator)
        self.pins = {host.lower(): str(target_ip(ip)) for host, ip in
                     (settings.getdict("WEBRACE_DELEGATION_HOSTS") or {}).items()}
        self.dns: dict[str, str | None] = {}
        self._beat = 0.0
        self._synced = 0.0
        self._workers_seen: dict[str, float] = {}
        self._refused: set[str] = set()  # workers whose entry was malformed (warned once)

    # -- workers ---------------------------------------------------------------------------

    def register(self) -> None:
        self.heartbeat(force=True)
        self.sync_workers(force=True)

    def heartbeat(self, force: bool = False) -> None:
        now = time.time()
        if force or now - self._beat >= HEARTBEAT_S:
            self._beat = now
            self.client.hset(self.keys["workers"], self.me, json.dumps(
                {"ip": str(self.crawler.ip), "capacity": self.crawler.capacity, "seen": now}))

    def sync_workers(self, force: bool = False) -> None:
        """Learn the registered workers (and when each was last seen). On the hot path (every
        page's links) a full read happens when a worker joined or once per heartbeat."""
        now = time.time()
        if not force and now - self._synced < HEARTBEAT_S and \
                self.client.hlen(self.keys["workers"]) == len(self._workers_seen):
            return
        self._synced = now
        for raw_id, raw in self.client.hgetall(self.keys["workers"]).items():
            wid = _text(raw_id)
            self._workers_seen[wid] = 0.0  # counted even if malformed: the cheap check above stays cheap
            try:
                info = json.loads(raw)
                self._workers_seen[wid] = float(info.get("seen") or 0)
                if wid not in self.delegator.crawlers:
                    self.delegator.register(Crawler(wid, info["ip"], info.get("capacity")))
            except (DelegationError, ValueError, TypeError, KeyError, AttributeError) as exc:
                if wid not in self._refused:
                    self._refused.add(wid)
                    logger.warning("worker %s cannot take part in delegation: %s", wid, exc)

    def stopped_workers(self) -> tuple[str, ...]:
        """Workers not seen for the lease timeout: their queues are everybody's."""
        now = time.time()
        return tuple(w for w, seen in self._workers_seen.items() if w != self.me and now - seen > self.stale_s)

    # -- routing -----------------------------------------------------------------------------

    def hosts_to_resolve(self, urls: Iterable[str]) -> list[str]:
        hosts = {(urlsplit(url).hostname or "").lower() for url in urls}
        return sorted(h for h in hosts if h and h not in self.dns and h not in self.pins and not _literal(h))

    def address(self, url: str) -> str | None:
        host = (urlsplit(url).hostname or "").lower()
        if not host:
            return None
        if host in self.pins:
            return self.pins[host]
        if _literal(host):
            return str(target_ip(host))
        return self.dns.get(host)

    def route(self, urls: list[str]) -> list[str | None]:
        """The worker each URL is delegated to (None: the shared queue). An address is given
        to one worker (``delegation:addresses``) and counts once against its capacity
        (``delegation:load``, claimed atomically: two coordinators never overfill a worker).
        An address goes to its subnet's worker while that one has room, else stays where it
        was given, else is decided (among the workers with room); where every worker is
        full it waits in the shared queue, counted in :attr:`over_capacity`."""
        self.sync_workers()
        addresses = [self.address(url) for url in urls]
        if addresses:
            self.shared.pull()
        ips = sorted(set(filter(None, addresses)))
        subnets = {ip: self.hierarchy.smallest(target_ip(ip)) for ip in ips}
        cidrs = sorted({str(s.network) for s in subnets.values() if s is not None})
        shared = {c: _text(w) for c, w in zip(cidrs, self.client.hmget(self.keys["subnets"], cidrs), strict=True)
                  if w is not None} if cidrs else {}
        given = {ip: _text(w) for ip, w in zip(ips, self.client.hmget(self.keys["addresses"], ips), strict=True)
                 if w is not None} if ips else {}
        found: dict[str, str | None] = {}
        for ip in ips:
            found[ip] = self._route_address(ip, subnets[ip], shared, given.get(ip))
        return [found[ip] if ip is not None else None for ip in addresses]

    def _route_address(self, ip: str, subnet: Any, shared: dict[str, str], given: str | None) -> str | None:
        owner = shared.get(str(subnet.network)) if subnet is not None else None
        if owner is not None and owner in self.delegator.crawlers:
            self.delegator.adopt(subnet, owner)
            got = self.claim(ip, owner, move=given is not None)
            if got is not None:
                return got
        elif given is not None:
            return given
        self.delegator.set_loads(self.loads())
        for _ in range(len(self.delegator.crawlers) + 1):  # a claim fails only on a worker filled meanwhile
            try:
                decision = self.delegator.delegate(ip)
            except (DelegationError, ProbeError) as exc:
                held = self._held(ip)
                if held is not None:  # another coordinator gave it meanwhile
                    return held
                if isinstance(exc, CapacityError):
                    self.over_capacity += 1
                    if math.log10(self.over_capacity).is_integer():  # the 1st, 10th, 100th...: a log that stays short
                        logger.warning("%d addresses left to the shared queue: %s", self.over_capacity, exc)
                logger.debug("not delegated, left to the shared queue: %s (%s)", ip, exc)
                return None
            self.shared.publish(ip, dict(decision.results))
            got = self.claim(ip, decision.crawler)
            if got is None:
                self.delegator.forget(ip)
                self.delegator.set_loads(self.loads())
                continue
            if subnet is not None and str(subnet.network) not in shared:
                key = str(subnet.network)
                chosen = self.delegator.owner(subnet) or got
                if not self.client.hsetnx(self.keys["subnets"], key, chosen):
                    winner = _text(self.client.hget(self.keys["subnets"], key) or b"")
                    if winner in self.delegator.crawlers:
                        self.delegator.adopt(subnet, winner)
                        chosen = winner
                shared[key] = chosen
            return got
        return self._held(ip)

    def _held(self, ip: str) -> str | None:
        """The worker another coordinator gave ``ip`` to while this one found no room (None:
        nobody; the loads this one read came first, so no later claim of it can succeed)."""
        held = self.client.hget(self.keys["addresses"], ip)
        return _text(held) if held is not None else None

    def claim(self, ip: str, worker: str, move: bool = False) -> str | None:
        """Give ``ip`` to ``worker`` if it has room (``move``: even if another worker has it,
        which then has one fewer); the worker that has it now (None: nobody, ``worker`` was full)."""
        capacity = self.delegator.crawlers[worker].capacity
        got = self._claim(keys=[self.keys["addresses"], self.keys["load"]],
                          args=[ip, worker, -1 if capacity is None else int(capacity), int(move)])
        return _text(got) if got is not None else None

    def loads(self) -> dict[str, int]:
        """Worker -> the addresses given to it, by every worker's coordinator."""
        return {_text(w): int(n) for w, n in self.client.hgetall(self.keys["load"]).items()}

    async def prepare(self, urls: list[str], call: Callable[..., Awaitable[Any]]) -> None:
        """Before a page's links are offered: resolve their new hosts (Scrapy's resolver,
        so its cache and the configured resolver apply) and, without a latency table, have
        the addresses that need a decision measured: by this worker (a TCP connect, in a
        thread) and by the other running workers (asked through Redis, answered within
        ``WEBRACE_DELEGATION_PROBE_TIMEOUT``; a worker that does not answer counts as far).
        ``call`` runs a function in the worker's Redis thread (where :meth:`route` runs too),
        so no Redis round trip waits on the reactor; Twisted's Deferreds are awaited as
        futures, as the reactor (asyncio's or another) wants."""
        from scrapy.utils.defer import maybe_deferred_to_future
        from twisted.internet import reactor, task, threads
        from twisted.internet.defer import DeferredList

        hosts = self.hosts_to_resolve(urls)
        if hosts:
            results = await maybe_deferred_to_future(DeferredList([reactor.resolve(h) for h in hosts],
                                                                  consumeErrors=True))
            for host, (ok, answer) in zip(hosts, results, strict=True):
                self.dns[host] = answer if ok else None
        if self.measured is None:
            return
        asked, mine = await call(self._ask_undecided, urls)
        if mine:
            await maybe_deferred_to_future(threads.deferToThread(self._measure, mine))
        deadline = time.monotonic() + self.probe_timeout
        while asked and time.monotonic() < deadline:
            asked = await call(self._unanswered, asked)
            if asked:
                await maybe_deferred_to_future(task.deferLater(reactor, 0.05, lambda: None))

    def _ask_undecided(self, urls: list[str]) -> tuple[list[str], list[tuple[str, int]]]:
        """(Redis thread) The fields the other workers will answer in, and the addresses this
        worker measures itself: those of ``urls`` whose subnet nobody has yet."""
        targets = self.undecided(urls)
        if not targets:
            return [], []
        return self.ask(targets), [(ip, port) for ip, port in targets if (self.me, ip) not in self.measured.local]

    def _unanswered(self, asked: list[str]) -> list[str]:
        """(Redis thread) The fields of ``asked`` still without an answer."""
        return [field for field, present in zip(asked, self.client.hmget(self.keys["rtt"], asked), strict=True)
                if present is None]

    def undecided(self, urls: Iterable[str]) -> list[tuple[str, int]]:
        """(address, port) of the URLs whose subnet no worker has been given yet."""
        ports: dict[str, int] = {}
        for url in urls:
            ip = self.address(url)
            if ip is not None and ip not in ports:
                parts = urlsplit(url)
                ports[ip] = parts.port or (443 if parts.scheme == "https" else 80)
        subnets = {ip: self.hierarchy.smallest(target_ip(ip)) for ip in ports}
        cidrs = sorted({str(s.network) for s in subnets.values() if s is not None})
        taken = {c for c, owner in zip(cidrs, self.client.hmget(self.keys["subnets"], cidrs), strict=True)
                 if owner is not None} if cidrs else set()
        return [(ip, port) for ip, port in ports.items()
                if subnets[ip] is None or str(subnets[ip].network) not in taken]

    def ask(self, targets: list[tuple[str, int]]) -> list[str]:
        """Ask every other running worker to measure its round trip to ``targets``; the
        ``worker|ip`` fields of ``delegation:rtt`` that will hold the answers."""
        self.sync_workers()
        stopped = set(self.stopped_workers())
        fields = []
        pipe = self.client.pipeline(transaction=False)
        for worker in self.delegator.crawlers:
            if worker == self.me or worker in stopped:
                continue
            wanted = [(ip, port) for ip, port in targets if not self.client.hexists(self.keys["rtt"], f"{worker}|{ip}")]
            for ip, port in wanted:
                pipe.rpush(f"{self.keys['probe']}:{worker}", json.dumps({"ip": ip, "port": port}))
                fields.append(f"{worker}|{ip}")
        pipe.execute()
        return fields

    def serve_probes(self, most: int = 16) -> int:
        """Answer the other workers' probe requests (blocking TCP connects: run it in a
        thread); the number answered."""
        raw = self.client.lpop(f"{self.keys['probe']}:{self.me}", most) or []
        targets = []
        for item in raw:
            try:
                request = json.loads(item)
                targets.append((str(target_ip(request["ip"])), int(request["port"])))
            except (ValueError, KeyError, TypeError):
                logger.warning("ignored a malformed probe request: %r", item)
        if targets and self.measured is not None:
            self._measure(targets)
        return len(targets)

    def _measure(self, targets: list[tuple[str, int]]) -> None:
        for ip, port in targets:
            try:
                ms = TcpProber(port=port, timeout=3.0, crawler_id=self.me).probe(self.me, target_ip(ip))
            except Unreachable:
                ms = float("inf")
            self.measured.record(ip, ms)

    def report(self, url: str, ms: float) -> None:
        """Calibration: this worker fetched ``url`` in ``ms``; slow fetches may re-delegate."""
        ip = self.address(url)
        if ip is None:
            return
        try:
            decision = self.delegator.report_fetch(self.me, ip, ms)
        except DelegationError:
            return
        if decision is not None:
            self.shared.publish(ip, dict(decision.results))
        if decision is not None and decision.subnet is not None:
            self.client.hset(self.keys["subnets"], str(decision.subnet.network), decision.crawler)
            logger.info("IPMicra: %s re-delegated to %s after slow fetches", decision.subnet.network,
                        decision.crawler)


# KEYS: addresses (ip -> worker), load (worker -> addresses); ARGV: ip, worker, capacity (-1: none),
# move (1: take it from the worker that has it). Returns the worker that has the address now.
CLAIM = """
local held = redis.call('HGET', KEYS[1], ARGV[1])
if held == ARGV[2] then return held end
if held and ARGV[4] ~= '1' then return held end
local capacity = tonumber(ARGV[3])
if capacity >= 0 and tonumber(redis.call('HGET', KEYS[2], ARGV[2]) or '0') >= capacity then return held end
if held then redis.call('HINCRBY', KEYS[2], held, -1) end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('HINCRBY', KEYS[2], ARGV[2], 1)
return ARGV[2]
"""


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _literal(host: str) -> bool:
    try:
        target_ip(host.strip("[]"))
    except ValueError:
        return False
    return True
