"""Benchmark: politeness, the per-host pacing against what it costs the crawl.

The candidate is this tree's code with its default settings: one request at a time per
host, and after each answer the host rests WEBRACE_DELAY_FACTOR times that answer's
download time. The baseline is the code of the last commit before that pacing (``--baseline
REV``, extracted with ``git archive`` and put first on PYTHONPATH) with its defaults:
DOWNLOAD_DELAY 0.5 s, two requests per host. Each crawls, in the same run, three servers on
127.0.0.1:

1. slow link: ``bench/site_server.py`` (200 pages of 70 KB, 100 ms before each answer, 100 KB/s
   per connection), first crawl then re-crawl of the unchanged site. Goals for the candidate:
   re-crawl >= 5x faster than its first crawl, and <= 2% of its bytes received.
2. fast server: nginx serving the Python documentation (530 pages), a first crawl from
   ``/index.html`` at depth 20. Goal: candidate >= 0.8x the pages/s of a plain Scrapy
   CrawlSpider with Scrapy's own default settings, crawling the same pages.
3. slow server: ``bench/site_server.py`` with 300 ms before each answer. Goal: the server is
   busy with the candidate's requests at most 1 / (1 + WEBRACE_DELAY_FACTOR) of the time,
   each answer counted with the rest that follows it (first start to last start: the bound
   docs/explanation/manners.md promises); the share up to the last answer's end is printed too.

    pip install -e '.[bench]' && python bench/politeness.py [--png bench/politeness.png] [--quick]

Pauses and busy time are measured from the servers' own logs (when each request started and
ended), not from the crawler's stats. A pause is the time from the end of a host's latest
answer to the start of its next request (0 when requests overlap). Prints a table and the
goals (exit status 1 when a candidate goal is not met) and draws, per part, pages done and
pauses over time. ``--quick`` is a smoke run on smaller sites (about 5 minutes). nginx and
the documentation come from ``apt-get install nginx-light python3-doc``, run here if missing.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
DOCS = Path("/usr/share/doc/python3-doc/html")  # a symlink chain to /usr/share/doc/python3.X/html
COMMON = {"LOG_LEVEL": "WARNING", "TELNETCONSOLE_ENABLED": "False"}
BASELINE_REV = "ae6aca5"  # the last commit before per-host pacing (DOWNLOAD_DELAY 0.5 s, 2 per host)
CRAWLERS = ("baseline", "candidate")  # baseline: that commit's code and defaults; candidate: this tree's
PROGRESS_EVERY = 20.0  # seconds between progress lines while a crawl runs
CRAWL_TIMEOUT = 3600.0


@dataclass(frozen=True)
class Sizes:
    slow_link_pages: int
    docs_depth: int
    slow_server_pages: int


FULL = Sizes(slow_link_pages=200, docs_depth=20, slow_server_pages=60)
QUICK = Sizes(slow_link_pages=40, docs_depth=1, slow_server_pages=30)


# ---------------------------------------------------------------------------------------------
# What the servers saw.
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Hit:
    """One request as the server logged it; wall-clock seconds."""

    host: str
    path: str
    start: float
    end: float
    status: int


def read_hits(log: Path, since: float, until: float) -> list[Hit]:
    """The requests that started in [since, until]. Lines carry ``start`` (site_server.py) or
    ``took`` (nginx: ``$msec`` is the end, ``$request_time`` the duration)."""
    hits = []
    for line in log.read_text().splitlines() if log.exists() else []:
        entry = json.loads(line)
        start = entry["start"] if "start" in entry else entry["end"] - entry["took"]
        if since <= start <= until:
            hits.append(Hit(entry["host"] or "", entry["path"], start, entry["end"], int(entry["status"])))
    return sorted(hits, key=lambda hit: hit.start)


def pauses(hits: list[Hit]) -> dict[str, list[tuple[float, float]]]:
    """Per host, (start of a request, its pause): from the end of the host's latest answer to
    this start, 0 when it overlaps an answer still under way."""
    latest_end: dict[str, float] = {}
    found: dict[str, list[tuple[float, float]]] = {}
    for hit in hits:
        if hit.host in latest_end:
            found.setdefault(hit.host, []).append((hit.start, max(0.0, hit.start - latest_end[hit.host])))
        latest_end[hit.host] = max(latest_end.get(hit.host, hit.end), hit.end)
    return found


def busy_share(hits: list[Hit]) -> float:
    """Time the server spent on our requests over the span from the first start to the last end."""
    if not hits:
        return 0.0
    span = max(hit.end for hit in hits) - hits[0].start
    return sum(hit.end - hit.start for hit in hits) / span if span > 0 else 0.0


def paired_busy_share(hits: list[Hit]) -> float:
    """The same over the span from the first start to the last start: each request counted with
    the pause after it. ``busy_share`` counts n answers but only n - 1 pauses, so one request at a
    time resting exactly ``factor`` x each answer reads n / (n + (n - 1) factor), above 1 / (1 + factor)."""
    if len(hits) < 2:
        return 0.0
    span = hits[-1].start - hits[0].start
    return sum(hit.end - hit.start for hit in hits[:-1]) / span if span > 0 else 0.0


# ---------------------------------------------------------------------------------------------
# The servers: bench/site_server.py and nginx, each a subprocess logging every request.
# ---------------------------------------------------------------------------------------------


@dataclass
class Server:
    url: str
    log: Path
    proc: subprocess.Popen


@contextmanager
def site_server(log: Path, pages: int, page_kb: int, latency_ms: int, rate: int = 0) -> Iterator[Server]:
    args = [sys.executable, str(HERE / "site_server.py"), "--pages", str(pages), "--page-kb", str(page_kb),
            "--latency-ms", str(latency_ms), "--rate", str(rate), "--log", str(log)]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline().strip()
        if not line.startswith("READY "):
            raise RuntimeError(f"site server did not start: {line!r}")
        yield Server(line.split(" ", 1)[1], log, proc)
    finally:
        stop(proc)


NGINX_CONF = """daemon off;
worker_processes 1;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log warn;
events {{ worker_connections 512; }}
http {{
    types {{ text/html html; text/plain txt py; text/css css; application/javascript js; image/png png; }}
    default_type application/octet-stream;
    log_format bench escape=json
        '{{"path":"$request_uri","host":"$host","end":$msec,"took":$request_time,"status":$status}}';
    access_log {tmp}/access.jsonl bench;
    client_body_temp_path {tmp}/body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
    server {{
        listen 127.0.0.1:{port};
        root {root};
    }}
}}
"""


def ensure_nginx_and_docs() -> Path:
    """nginx and the Python documentation, installed with apt-get when missing (as root)."""
    if shutil.which("nginx") is None or not (DOCS / "index.html").exists():
        if os.geteuid() != 0:
            raise SystemExit("politeness.py: needs nginx and the Python docs: "
                             "sudo apt-get install -y nginx-light python3-doc")
        print("Installing nginx-light and python3-doc with apt-get", flush=True)
        subprocess.run(["apt-get", "install", "-y", "nginx-light", "python3-doc"], check=True,
                       env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"}, stdout=subprocess.DEVNULL)
    return DOCS.resolve()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def nginx(tmp: Path, root: Path) -> Iterator[Server]:
    tmp.mkdir()
    port = free_port()
    (tmp / "nginx.conf").write_text(NGINX_CONF.format(tmp=tmp, port=port, root=root))
    proc = subprocess.Popen(["nginx", "-p", str(tmp), "-e", str(tmp / "error.log"), "-c", str(tmp / "nginx.conf")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_for_port(port, proc)
        yield Server(f"http://127.0.0.1:{port}/", tmp / "access.jsonl", proc)
    finally:
        stop(proc)


def wait_for_port(port: int, proc: subprocess.Popen, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"nginx exited at start: {proc.stderr.read()[-2000:]}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nginx did not listen on 127.0.0.1:{port} within {timeout:g} s")


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


# ---------------------------------------------------------------------------------------------
# The crawlers: WebRACE (`scrapy crawl urd`) and a plain Scrapy CrawlSpider.
# ---------------------------------------------------------------------------------------------


@dataclass
class Crawl:
    part: str
    name: str
    pages: int
    seconds: float  # Scrapy's elapsed_time_seconds: engine start to close
    bytes_received: int  # downloader/response_bytes
    started: float  # wall clock of the engine's start
    hits: list[Hit]  # what the server logged for this crawl
    stats: dict

    @property
    def pages_per_s(self) -> float:
        return self.pages / self.seconds if self.seconds else 0.0

    @property
    def done(self) -> list[float]:
        """Seconds from the crawl's start at which each page's answer ended (robots.txt aside)."""
        return sorted(hit.end - self.started for hit in self.hits if hit.path != "/robots.txt")


def run_watched(label: str, args: list[str], cwd: Path, env: dict[str, str], log: Path) -> tuple[float, float]:
    """Run a crawl; every PROGRESS_EVERY seconds print how many requests the server has seen."""
    launched = time.time()
    with (cwd / "crawl.log").open("w") as err:
        proc = subprocess.Popen(args, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=err)
        while True:
            try:
                proc.wait(timeout=PROGRESS_EVERY)
                break
            except subprocess.TimeoutExpired:
                if time.time() - launched > CRAWL_TIMEOUT:
                    stop(proc)
                    raise RuntimeError(f"{label}: still running after {CRAWL_TIMEOUT:g} s") from None
                seen = len(read_hits(log, launched, time.time()))
                print(f"    {label}: {seen} requests after {time.time() - launched:.0f} s", flush=True)
    if proc.returncode:
        raise RuntimeError(f"{label} failed:\n{(cwd / 'crawl.log').read_text()[-3000:]}")
    return launched, time.time()


def stats_start(stats: dict) -> float:
    started = datetime.fromisoformat(str(stats["start_time"]))
    return (started if started.tzinfo else started.replace(tzinfo=UTC)).timestamp()


class Workdir:
    """One WebRACE user: a directory with its own WEBRACE_DATA_DIR and one URD, crawled with
    ``scrapy crawl urd`` as a user runs it, with these settings on the command line."""

    def __init__(self, root: Path, seed: str, depth: int, settings: dict[str, str], code: Path | None) -> None:
        root.mkdir()
        self.root, self.settings = root, settings
        self.env = {**os.environ, "SCRAPY_SETTINGS_MODULE": "webrace.settings", "WEBRACE_DATA_DIR": str(root / "data")}
        if code is not None:  # another revision's packages first on the path
            self.env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(code), os.environ.get("PYTHONPATH")]))
        (root / "urds.xml").write_text(f'<urd id="bench" owner="bench"><uri timing="86400000">{seed}</uri>'
                                       f'<depth level="{depth}"/><scope>host</scope></urd>\n')
        self.scrapy("urd", "add", "urds.xml")

    def scrapy(self, *args: str) -> None:
        done = subprocess.run([sys.executable, "-m", "scrapy", *args], cwd=self.root, env=self.env,
                              capture_output=True, text=True)
        if done.returncode:
            raise RuntimeError(f"scrapy {' '.join(args)} failed:\n{done.stderr[-3000:]}")

    def crawl(self, part: str, name: str, server: Server) -> Crawl:
        out = self.root / "pages.jsonl"
        sets = [a for k, v in self.settings.items() for a in ("-s", f"{k}={v}")]
        args = [sys.executable, "-m", "scrapy", "crawl", "urd", "-O", str(out), *sets]
        launched, ended = run_watched(f"{part}, {name}", args, self.root, self.env, server.log)
        stats = json.loads((self.root / "data" / "last-crawl.json").read_text())["stats"]
        pages = sum(1 for line in out.read_text().splitlines() if '"owners"' in line)
        return finished(Crawl(part, name, pages, stats["elapsed_time_seconds"],
                              stats.get("downloader/response_bytes", 0), stats_start(stats),
                              read_hits(server.log, launched, ended), stats))


PLAIN_SCRAPY = """\
import json, sys
from scrapy.crawler import CrawlerProcess
from scrapy.linkextractors import LinkExtractor
from scrapy.spiders import CrawlSpider, Rule

class Docs(CrawlSpider):
    name = "docs"
    allowed_domains = ["127.0.0.1"]
    start_urls = [sys.argv[1]]
    rules = [Rule(LinkExtractor(), callback="parse_page", follow=True)]

    def parse_page(self, response):
        yield {"url": response.url}

# Scrapy's defaults but its remote control (a job file under ~/.local/state/scrapy: nothing the
# crawl's politeness depends on, written outside the run's directory)
settings = {"LOG_LEVEL": "WARNING", "TELNETCONSOLE_ENABLED": False, "REMOTE_CONTROL_ENABLED": False,
            "FEEDS": {"items.jsonl": {"format": "jsonlines"}}}
if int(sys.argv[2]):
    settings["DEPTH_LIMIT"] = int(sys.argv[2])
process = CrawlerProcess(settings)
crawler = process.create_crawler(Docs)
process.crawl(crawler)
process.start()
with open("stats.json", "w") as out:
    json.dump(crawler.stats.get_stats(), out, default=str)
"""


def plain_scrapy(part: str, root: Path, seed: str, depth_limit: int, server: Server) -> Crawl:
    """A CrawlSpider with Scrapy's own defaults: no project settings reach it."""
    root.mkdir()
    (root / "docs_spider.py").write_text(PLAIN_SCRAPY)
    env = {k: v for k, v in os.environ.items() if k != "SCRAPY_SETTINGS_MODULE"}
    args = [sys.executable, "docs_spider.py", seed, str(depth_limit)]
    launched, ended = run_watched(f"{part}, plain Scrapy", args, root, env, server.log)
    stats = json.loads((root / "stats.json").read_text())
    return finished(Crawl(part, "plain Scrapy (reference)", stats.get("response_received_count", 0),
                          stats["elapsed_time_seconds"], stats.get("downloader/response_bytes", 0),
                          stats_start(stats), read_hits(server.log, launched, ended), stats))


def finished(crawl: Crawl) -> Crawl:
    """Print the crawl's figures as a progress line, with the crawler's own pacing stats if any."""
    own = {k.split("/")[1]: v for k, v in crawl.stats.items() if k.startswith("pacing/") and k.endswith("/delay_mean")}
    gaps = [p for series in pauses(crawl.hits).values() for _, p in series]
    print(f"  {crawl.part}, {crawl.name}: {crawl.pages} pages in {crawl.seconds:.1f} s "
          f"({crawl.pages_per_s:.1f} pages/s, {crawl.bytes_received:,} bytes); server log: {len(crawl.hits)} "
          f"requests, mean pause {mean(gaps):.3f} s, busy {busy_share(crawl.hits):.2f}"
          + "".join(f"; crawler's delay_mean {host} {value:.3f} s" for host, value in own.items()), flush=True)
    return crawl


def mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


# ---------------------------------------------------------------------------------------------
# The three parts.
# ---------------------------------------------------------------------------------------------


def baseline_code(tmp: Path, rev: str) -> Path:
    """The packages of revision ``rev`` of this repository, extracted under ``tmp``."""
    target = tmp / f"baseline-{rev}"
    if not target.exists():
        target.mkdir()
        archive = subprocess.run(["git", "-C", str(HERE.parent), "archive", rev, "webrace", "rules", "scd"],
                                 capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", str(target)], input=archive.stdout, check=True)
    return target


def code_for(who: str, tmp: Path, rev: str) -> Path | None:
    return baseline_code(tmp, rev) if who == "baseline" else None


def slow_link(tmp: Path, sizes: Sizes, rev: str) -> list[Crawl]:
    part = "slow link"
    print(f"\n1. {part}: {sizes.slow_link_pages} pages of 70 KB, 100 ms per answer, 100 KB/s", flush=True)
    crawls = []
    with site_server(tmp / "slow-link.jsonl", sizes.slow_link_pages, 70, 100, 100_000) as server:
        for who in CRAWLERS:
            work = Workdir(tmp / f"slow-link-{who}", server.url, 2, COMMON, code_for(who, tmp, rev))
            crawls.append(work.crawl(part, f"{who}, first crawl", server))
            work.scrapy("urd", "due", "--all")
            crawls.append(work.crawl(part, f"{who}, re-crawl", server))
    return crawls


def fast_server(tmp: Path, sizes: Sizes, rev: str) -> list[Crawl]:
    part = "fast server"
    root = ensure_nginx_and_docs()
    print(f"\n2. {part}: nginx serving {root}, from /index.html at depth {sizes.docs_depth}", flush=True)
    with nginx(tmp / "nginx", root) as server:
        seed = server.url + "index.html"
        # Scrapy's default has no depth limit; set it only when the depth leaves pages out.
        depth_limit = sizes.docs_depth if sizes.docs_depth < FULL.docs_depth else 0
        crawls = [plain_scrapy(part, tmp / "fast-scrapy", seed, depth_limit, server)]
        for who in CRAWLERS:
            work = Workdir(tmp / f"fast-{who}", seed, sizes.docs_depth, COMMON, code_for(who, tmp, rev))
            crawls.append(work.crawl(part, f"{who}, first crawl", server))
    report_page_sets(crawls)
    return crawls


def report_page_sets(crawls: list[Crawl]) -> None:
    """The crawls should fetch the same pages; say so, or say how they differ. (Scrapy fetches its
    start page twice: a start request is not recorded by the duplicate filter.)"""
    sets = {c.name: [h.path for h in c.hits if h.path != "/robots.txt"] for c in crawls}
    reference = set(sets[crawls[0].name])
    for name, paths in sets.items():
        extra, missing = sorted(set(paths) - reference), sorted(reference - set(paths))
        same = "" if not extra and not missing else (f"; not fetched by plain Scrapy: {len(extra)} {extra[:3]}, "
                                                     f"only by it: {len(missing)} {missing[:3]}")
        print(f"  {name}: {len(paths)} requests for {len(set(paths))} distinct pages{same}", flush=True)


def slow_server(tmp: Path, sizes: Sizes, rev: str) -> list[Crawl]:
    part = "slow server"
    print(f"\n3. {part}: {sizes.slow_server_pages} pages of 20 KB, 300 ms per answer", flush=True)
    crawls = []
    with site_server(tmp / "slow-server.jsonl", sizes.slow_server_pages, 20, 300) as server:
        for who in CRAWLERS:
            work = Workdir(tmp / f"slow-server-{who}", server.url, 2, COMMON, code_for(who, tmp, rev))
            crawls.append(work.crawl(part, f"{who}, first crawl", server))
    return crawls


# ---------------------------------------------------------------------------------------------
# Goals, table, figure.
# ---------------------------------------------------------------------------------------------


@dataclass
class Row:
    crawl: Crawl
    ratio: str = ""
    goal: bool | None = None  # None: no goal for this crawl


def delay_factor() -> float:
    """The default WEBRACE_DELAY_FACTOR of the project's settings."""
    from webrace.settings import WEBRACE_DELAY_FACTOR

    return float(WEBRACE_DELAY_FACTOR)


def judge_slow_link(crawls: list[Crawl], goals: list[str]) -> list[Row]:
    rows = []
    for first, again in zip(crawls[::2], crawls[1::2], strict=True):
        speedup = first.seconds / again.seconds if again.seconds else 0.0
        share = 100.0 * again.bytes_received / first.bytes_received if first.bytes_received else 0.0
        ok = speedup >= 5.0 and share <= 2.0
        is_candidate = again.name.startswith("candidate")
        goals.append(f"{verdict(ok, is_candidate)}  slow link, {again.name}: {speedup:.1f}x faster than the first "
                     f"crawl (goal >= 5x), {share:.2f}% of its bytes (goal <= 2%)")
        rows += [Row(first), Row(again, f"{speedup:.1f}x, {share:.2f}% B", ok if is_candidate else None)]
    return rows


def judge_fast_server(crawls: list[Crawl], goals: list[str]) -> list[Row]:
    reference, rows = crawls[0], [Row(crawls[0], "1.00x")]
    for crawl in crawls[1:]:
        ratio = crawl.pages_per_s / reference.pages_per_s if reference.pages_per_s else 0.0
        ok, is_candidate = ratio >= 0.8, crawl.name.startswith("candidate")
        goals.append(f"{verdict(ok, is_candidate)}  fast server, {crawl.name}: {crawl.pages_per_s:.1f} pages/s, "
                     f"{ratio:.2f}x plain Scrapy's {reference.pages_per_s:.1f} (goal >= 0.8x)")
        rows.append(Row(crawl, f"{ratio:.2f}x", ok if is_candidate else None))
    return rows


def judge_slow_server(crawls: list[Crawl], goals: list[str]) -> list[Row]:
    factor, rows = delay_factor(), []
    limit = 1.0 / (1.0 + factor)
    for crawl in crawls:
        share, is_candidate = paired_busy_share(crawl.hits), crawl.name.startswith("candidate")
        ok = share <= limit
        goals.append(f"{verdict(ok, is_candidate)}  slow server, {crawl.name}: server busy {share:.3f} of the time, "
                     f"each answer with the rest after it (goal <= 1/(1+{factor:g}) = {limit:.3f}); "
                     f"{busy_share(crawl.hits):.3f} up to the last answer's end")
        rows.append(Row(crawl, f"busy {share:.3f}", ok if is_candidate else None))
    return rows


def verdict(ok: bool, counts: bool) -> str:
    """PASS/FAIL for the candidate; the baseline's figures are printed as information."""
    return ("PASS" if ok else "FAIL") if counts else "info"


JUDGES: dict[str, Callable[[list[Crawl], list[str]], list[Row]]] = {
    "slow link": judge_slow_link, "fast server": judge_fast_server, "slow server": judge_slow_server,
}


def print_table(rows: list[Row]) -> None:
    print(f"\n{'part':<13}{'crawl':<28}{'pages':>6}{'seconds':>9}{'pages/s':>9}{'bytes':>13}"
          f"{'mean pause':>11}  {'ratio':<20}{'goal met':<8}")
    for row in rows:
        c = row.crawl
        gaps = [p for series in pauses(c.hits).values() for _, p in series]
        goal = "" if row.goal is None else ("yes" if row.goal else "no")
        print(f"{c.part:<13}{c.name:<28}{c.pages:>6}{c.seconds:>9.1f}{c.pages_per_s:>9.1f}{c.bytes_received:>13,}"
              f"{mean(gaps):>10.3f}s  {row.ratio:<20}{goal:<8}")


def plot(results: dict[str, list[Crawl]], path: Path) -> None:
    """Per part: pages done over time, and each host's pauses over time (from the server log)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(results), 2, figsize=(13, 4.2 * len(results)), squeeze=False)
    for (done_ax, pause_ax), (part, crawls) in zip(axes, results.items(), strict=True):
        for crawl in crawls:
            done = crawl.done
            line, = done_ax.plot([0.0, *done], range(len(done) + 1), label=f"{crawl.name} ({crawl.seconds:.1f} s)")
            for host, series in pauses(crawl.hits).items():
                label = crawl.name if len(pauses(crawl.hits)) == 1 else f"{crawl.name}, {host}"
                pause_ax.plot([t - crawl.started for t, _ in series], [p for _, p in series], ".", ms=3,
                              color=line.get_color(), label=label)
        done_ax.set(title=f"{part}: pages done", xlabel="seconds since the crawl started",
                    ylabel="pages answered (server log)")
        pause_ax.set(title=f"{part}: pause before each request (server log)",
                     xlabel="seconds since the crawl started", ylabel="pause (s)")
        for ax in (done_ax, pause_ax):
            ax.grid(alpha=0.3)
            ax.legend(fontsize=8)
    fig.suptitle("WebRACE politeness: old pacing (baseline) vs. pacing by download time (candidate)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    print(f"\nWrote {path}")


PARTS: dict[str, Callable[[Path, Sizes, str], list[Crawl]]] = {
    "slow link": slow_link, "fast server": fast_server, "slow server": slow_server,
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--png", type=Path, default=HERE / "politeness.png")
    parser.add_argument("--quick", action="store_true",
                        help=f"smoke run: {QUICK.slow_link_pages} pages slow link, docs at depth {QUICK.docs_depth}, "
                             f"{QUICK.slow_server_pages} pages slow server")
    parser.add_argument("--part", action="append", choices=list(PARTS), help="run only this part (repeatable)")
    parser.add_argument("--baseline", default=BASELINE_REV, help=f"revision whose code is the baseline "
                                                                f"(default {BASELINE_REV})")
    args = parser.parse_args()
    sizes = QUICK if args.quick else FULL
    started = time.monotonic()
    results: dict[str, list[Crawl]] = {}
    with tempfile.TemporaryDirectory(prefix="webrace-bench-politeness-") as tmp:
        for part, run in PARTS.items():
            if not args.part or part in args.part:
                results[part] = run(Path(tmp), sizes, args.baseline)
    goals: list[str] = []
    rows = [row for part, crawls in results.items() for row in JUDGES[part](crawls, goals)]
    print_table(rows)
    print()
    for line in goals:
        print(f"  {line}")
    print(f"\n{time.monotonic() - started:.0f} s in all")
    plot(results, args.png)
    return 0 if all(row.goal is not False for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
