"""Benchmark: a page's cost against how many owners share it (issue 23).

One generated site of 200 pages (``bench/site_server.py``, every page within depth 2 of its
root) is served on 127.0.0.1; for each size (10, 1,000 and 10,000 URDs, each with 5 weighted
keywords, every one starting at the site's root with depth 2) a fresh data directory
registers the URDs and the real ``scrapy crawl urd`` crawls them once. Printed per size:
crawl time (Scrapy's elapsed time), pages/s, the crawl process's peak RSS (``wait4``), and
ACIs made. The same sizes run on the code of ``--rev`` (default ``HEAD``, extracted with
``git archive``: the code before the change) as the baseline, in the same run, at the sizes
``--baseline-sizes`` names. Then the start-up: ``--startup`` URDs (100,000) on the root,
depth 0, and the time from launching ``scrapy crawl urd`` to the site's first request.

    python bench/owners.py [--sizes 10,1000,10000] [--baseline-sizes 10,1000] [--png bench/owners.png]

Goals: pages/s at the largest size >= 0.5x the rate at the smallest, peak RSS at the
largest <= 2x the smallest's, start-up under 5 s. Exit status 1 when a goal is missed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from random import Random

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from politeness import baseline_code  # noqa: E402 - bench/ is not a package
from recrawl import SiteServer  # noqa: E402
from site_server import build_vocabulary  # noqa: E402

PAGES = 200
KEYWORDS = 5
CRAWL_TIMEOUT = 1800.0  # seconds: a crawl slower than this is reported as failed
COMMON = {
    "DOWNLOAD_DELAY": "0",  # our own server: no politeness delay needed
    "CONCURRENT_REQUESTS": "8",
    "CONCURRENT_REQUESTS_PER_DOMAIN": "8",
    "WEBRACE_HOST_CONCURRENCY": "8",
    "WEBRACE_DELAY_FACTOR": "0",
    "WEBRACE_DELIVERY": "False",
    "LOG_LEVEL": "WARNING",
    "TELNETCONSOLE_ENABLED": "False",
}
PAGES_ONLY = json.dumps({"pages.jsonl": {"format": "jsonlines", "overwrite": True,
                                         "item_classes": ["webrace.items.Page"]}})


@dataclass
class Run:
    who: str  # "baseline" or "candidate"
    urds: int
    seconds: float  # Scrapy's elapsed_time_seconds: engine start to close
    pages: int
    rss_mb: float  # the crawl process's peak resident set
    acis: int

    @property
    def pages_per_s(self) -> float:
        return self.pages / self.seconds if self.seconds else 0.0


class Server(SiteServer):
    """``bench/site_server.py`` in a subprocess, logging every request it answers."""

    def __init__(self, log: Path, page_kb: int) -> None:
        self.log = log
        super().__init__(PAGES, page_kb, 0, 0, ("--log", str(log)))

    def first_hit_after(self, since: float) -> float | None:
        """Wall-clock start of the first request the site saw at or after ``since``."""
        starts = [hit["start"] for hit in map(json.loads, self.log.read_text().splitlines()) if hit["start"] >= since]
        return min(starts, default=None)


def urds_xml(count: int, seed_url: str, depth: int, keywords: bool = True) -> str:
    """``count`` URDs of as many owners, each with ``KEYWORDS`` words of the site's vocabulary
    (invented, rarer words: a page is relevant to about a third of the owners, as in the issue)."""
    words, _ = build_vocabulary(Random("1:text"))  # the site's own (seed 1)
    pool = words[1500:]
    rng = Random(23)
    out = ["<urds>"]
    for n in range(count):
        kws = ""
        if keywords:
            chosen = rng.sample(pool, KEYWORDS)
            kws = "<keywords>" + "".join(f'<keyword key="{w}" weight="{rng.randint(1, 5)}"/>' for w in chosen) + \
                  "</keywords>"
        out.append(f'<urd id="u{n}" owner="owner{n}"><uri timing="86400000">{seed_url}</uri>{kws}'
                   f'<depth level="{depth}"/></urd>')
    out.append("</urds>\n")
    return "\n".join(out)


class Workdir:
    """A data directory of its own, where `scrapy` runs as a user runs it (on ``code``'s
    packages when given: the baseline)."""

    def __init__(self, root: Path, code: Path | None) -> None:
        root.mkdir(parents=True)
        self.root = root
        self.env = {**os.environ, "SCRAPY_SETTINGS_MODULE": "webrace.settings", "WEBRACE_DATA_DIR": str(root / "data")}
        if code is not None:
            self.env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(code), os.environ.get("PYTHONPATH")]))

    def scrapy(self, *args: str) -> None:
        done = subprocess.run([sys.executable, "-m", "scrapy", *args], cwd=self.root, env=self.env,
                              capture_output=True, text=True)
        if done.returncode:
            raise RuntimeError(f"scrapy {' '.join(args)} failed:\n{done.stderr[-3000:]}")

    def crawl(self) -> tuple[float, float]:
        """Run ``scrapy crawl urd``; return its launch time and peak RSS in MB."""
        sets = [a for k, v in COMMON.items() for a in ("-s", f"{k}={v}")]
        args = [sys.executable, "-m", "scrapy", "crawl", "urd", "-s", f"FEEDS={PAGES_ONLY}", *sets]
        launched = time.time()
        with (self.root / "crawl.log").open("w") as err:
            proc = subprocess.Popen(args, cwd=self.root, env=self.env, stdout=subprocess.DEVNULL, stderr=err)
            _, status, usage = os.wait4(proc.pid, 0)
            proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode:
            raise RuntimeError(f"crawl failed:\n{(self.root / 'crawl.log').read_text()[-3000:]}")
        return launched, usage.ru_maxrss / 1024

    def stats(self) -> dict:
        return json.loads((self.root / "data" / "last-crawl.json").read_text())["stats"]


def run_size(tmp: Path, server: Server, who: str, count: int, code: Path | None) -> Run:
    work = Workdir(tmp / f"{who}-{count}", code)
    (work.root / "urds.xml").write_text(urds_xml(count, server.url, 2))
    work.scrapy("urd", "add", "urds.xml")
    _, rss = work.crawl()
    stats = work.stats()
    pages = sum(1 for _ in (work.root / "pages.jsonl").open())
    run = Run(who, count, stats["elapsed_time_seconds"], pages, rss, int(stats.get("webrace/acis", 0)))
    print(f"  {who:9} {count:>6,} URDs: {run.seconds:7.1f} s  {run.pages} pages  {run.pages_per_s:6.1f} pages/s  "
          f"peak RSS {run.rss_mb:6.0f} MB  {run.acis:>9,} ACIs", flush=True)
    return run


def startup(tmp: Path, server: Server, count: int) -> tuple[float, float]:
    """Seconds from launching the crawl of ``count`` URDs to the site's first request, and the
    whole crawl's seconds."""
    work = Workdir(tmp / f"startup-{count}", None)
    (work.root / "urds.xml").write_text(urds_xml(count, server.url, 0))
    work.scrapy("urd", "add", "urds.xml")
    launched, _ = work.crawl()
    first = server.first_hit_after(launched)
    if first is None:
        raise RuntimeError("the start-up crawl made no request")
    return first - launched, work.stats()["elapsed_time_seconds"]


def table(runs: list[Run]) -> None:
    print("\n| code | URDs (owners) | crawl time | pages/s | peak RSS | ACIs |\n|---|---|---|---|---|---|")
    for r in runs:
        print(f"| {r.who} | {r.urds:,} | {r.seconds:.1f} s | {r.pages_per_s:.1f} | {r.rss_mb:.0f} MB | {r.acis:,} |")


def plot(runs: list[Run], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for who, style in (("baseline", "o--"), ("candidate", "s-")):
        mine = sorted((r for r in runs if r.who == who), key=lambda r: r.urds)
        if mine:
            left.plot([r.urds for r in mine], [r.pages_per_s for r in mine], style, label=who)
            right.plot([r.urds for r in mine], [r.rss_mb for r in mine], style, label=who)
    for ax, label in ((left, "pages/s"), (right, "peak RSS (MB)")):
        ax.set_xscale("log")
        ax.set_xlabel("URDs (owners) sharing the site")
        ax.set_ylabel(label)
        ax.grid(True, alpha=0.3)
        ax.legend()
    left.set_yscale("log")
    fig.suptitle(f"{PAGES}-page site, every URD at its root, {KEYWORDS} keywords each")
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10,1000,10000")
    parser.add_argument("--baseline-sizes", default="10,1000", help="sizes run on --rev too ('' for none)")
    parser.add_argument("--rev", default="HEAD", help="the baseline's revision")
    parser.add_argument("--startup", type=int, default=100_000, help="URDs of the start-up measure (0: skip)")
    parser.add_argument("--page-kb", type=int, default=10)
    parser.add_argument("--png", default=str(HERE / "owners.png"), help="'' for none")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s]
    base_sizes = [int(s) for s in args.baseline_sizes.split(",") if s]
    runs: list[Run] = []
    with tempfile.TemporaryDirectory(prefix="webrace-owners-") as name:
        tmp = Path(name)
        server = Server(tmp / "site.jsonl", args.page_kb)
        try:
            print(f"Site: {PAGES} pages of {args.page_kb} KB at {server.url}", flush=True)
            code = baseline_code(tmp, args.rev) if base_sizes else None
            for count in base_sizes:
                runs.append(run_size(tmp, server, "baseline", count, code))
            for count in sizes:
                runs.append(run_size(tmp, server, "candidate", count, None))
            started = startup(tmp, server, args.startup) if args.startup else None
        finally:
            server.stop()
    table(runs)
    ok = True
    mine = sorted((r for r in runs if r.who == "candidate"), key=lambda r: r.urds)
    if len(mine) >= 2:
        small, large = mine[0], mine[-1]
        rate, rss = large.pages_per_s / small.pages_per_s, large.rss_mb / small.rss_mb
        ok &= rate >= 0.5 and rss <= 2.0
        print(f"\npages/s at {large.urds:,} / at {small.urds:,}: {rate:.2f}x (goal >= 0.5x) "
              f"{'met' if rate >= 0.5 else 'MISSED'}")
        print(f"peak RSS at {large.urds:,} / at {small.urds:,}: {rss:.2f}x (goal <= 2x) "
              f"{'met' if rss <= 2 else 'MISSED'}")
    for r in mine:
        base = next((b for b in runs if b.who == "baseline" and b.urds == r.urds), None)
        if base is not None:
            print(f"at {r.urds:,} URDs: {r.pages_per_s / base.pages_per_s:.1f}x the baseline's pages/s, "
                  f"{r.rss_mb / base.rss_mb:.2f}x its RSS, ACIs {r.acis:,} (baseline {base.acis:,})")
    if started is not None:
        first, whole = started
        ok &= first < 5.0
        print(f"start-up with {args.startup:,} URDs: first request after {first:.2f} s (goal < 5 s) "
              f"{'met' if first < 5 else 'MISSED'}; that crawl took {whole:.1f} s")
    if args.png and runs:
        plot(runs, Path(args.png))
        print(f"wrote {args.png}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
