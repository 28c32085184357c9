"""Benchmark: crawl vs. conditional re-crawl (WebRACE, seed 000 section 7.1 / seed 003 Fig. 7).

A generated site (``bench/site_server.py``: 2,000 pages of about 70 KB, with ETags and
Last-Modified) is served on 127.0.0.1 twice in one run: once raw, once behind a simulated
wide-area link (a delay before every response and a per-connection bandwidth cap). On each,
the real ``scrapy crawl urd`` runs three times: the first crawl (nothing cached), a re-crawl
of the unchanged site, and a re-crawl after 10% of the pages changed. The first crawl is
the baseline the re-crawls are measured against, in the same run.

    pip install -e '.[bench]' && python bench/recrawl.py [--pages 2000] [--png bench/recrawl.png]

Prints pages/s, bytes received and the ratios first/re-crawl, checks the goals (re-crawl of
the unchanged site >= 10x faster than the first crawl behind the link, >= 2x raw; bytes
received on re-crawl <= 2% of the first crawl) and draws pages done over time (Fig. 6).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import urllib.request
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
CRAWLS = ("first crawl", "re-crawl, unchanged", "re-crawl, 10% changed")


@dataclass
class Crawl:
    name: str
    pages: int
    seconds: float  # Scrapy's elapsed_time_seconds: engine start to close
    bytes_received: int  # downloader/response_bytes: headers and bodies, as on the wire
    not_modified: int
    new_versions: int
    times: list[float] = field(default_factory=list)  # seconds from start at which each page was done

    @property
    def pages_per_s(self) -> float:
        return self.pages / self.seconds if self.seconds else 0.0


class SiteServer:
    """``bench/site_server.py`` in a subprocess, for the length of one link setting."""

    def __init__(self, pages: int, page_kb: int, latency_ms: int, rate: int, extra: tuple[str, ...] = ()) -> None:
        args = [sys.executable, str(HERE / "site_server.py"), "--pages", str(pages), "--page-kb", str(page_kb),
                *extra]
        if latency_ms:
            args += ["--latency-ms", str(latency_ms)]
        if rate:
            args += ["--rate", str(rate)]
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline().strip()
        if not line.startswith("READY "):
            self.proc.kill()
            raise RuntimeError(f"site server did not start: {line!r}")
        self.url = line.split(" ", 1)[1]

    def control(self, path: str) -> dict:
        with urllib.request.urlopen(self.url + path.lstrip("/"), timeout=30) as response:  # noqa: S310 - 127.0.0.1
            return json.load(response)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)


class Workdir:
    """A directory with its own WEBRACE_DATA_DIR, where `scrapy` runs as a user runs it."""

    def __init__(self, root: Path, concurrency: int) -> None:
        self.root = root
        self.env = {**os.environ, "SCRAPY_SETTINGS_MODULE": "webrace.settings",
                    "WEBRACE_DATA_DIR": str(root / "data")}
        self.settings = {
            "DOWNLOAD_DELAY": "0",  # our own server: no politeness delay needed
            "CONCURRENT_REQUESTS": str(concurrency),
            "CONCURRENT_REQUESTS_PER_DOMAIN": str(concurrency),
            "WEBRACE_HOST_CONCURRENCY": str(concurrency),
            "WEBRACE_DELAY_FACTOR": "0",  # this bench measures the re-crawl, not the pacing (bench/politeness.py)
            "LOG_LEVEL": "WARNING",
            "TELNETCONSOLE_ENABLED": "False",
            "REMOTE_CONTROL_ENABLED": "False",
        }

    def scrapy(self, *args: str) -> None:
        done = subprocess.run([sys.executable, "-m", "scrapy", *args], cwd=self.root, env=self.env,
                              capture_output=True, text=True)
        if done.returncode:
            raise RuntimeError(f"scrapy {' '.join(args)} failed:\n{done.stderr[-3000:]}")

    def crawl(self, name: str) -> Crawl:
        out = self.root / "pages.jsonl"
        out.unlink(missing_ok=True)
        sets = [a for k, v in self.settings.items() for a in ("-s", f"{k}={v}")]
        self.scrapy("crawl", "urd", "-O", str(out), *sets)
        stats = json.loads((self.root / "data" / "last-crawl.json").read_text())["stats"]
        items = [json.loads(line) for line in out.read_text().splitlines()]
        start = datetime.fromisoformat(stats["start_time"])
        times = sorted((datetime.fromisoformat(i["fetched_at"].replace("Z", "+00:00")) - start).total_seconds()
                       for i in items)
        return Crawl(name, len(items), stats["elapsed_time_seconds"], stats.get("downloader/response_bytes", 0),
                     sum(1 for i in items if i["not_modified"]), sum(1 for i in items if i["new_version"]), times)


def run_link(label: str, args: argparse.Namespace, latency_ms: int, rate: int) -> list[Crawl]:
    server = SiteServer(args.pages, args.page_kb, latency_ms, rate)
    try:
        with tempfile.TemporaryDirectory(prefix="webrace-bench-") as tmp:
            work = Workdir(Path(tmp), args.concurrency)
            (work.root / "urds.xml").write_text(
                f'<urd id="bench" owner="bench"><uri timing="86400000">{server.url}</uri>'
                '<depth level="2"/></urd>\n'
            )
            work.scrapy("urd", "add", "urds.xml")
            crawls = []
            for n, name in enumerate(CRAWLS):
                if n:
                    work.scrapy("urd", "due", "--all")
                if n == 2:
                    changed = server.control(f"/_control/change?fraction={args.change}&round=1")["changed"]
                    print(f"  [{label}] changed {len(changed)} pages", flush=True)
                crawl = work.crawl(name)
                print(f"  [{label}] {name}: {crawl.pages} pages in {crawl.seconds:.1f} s", flush=True)
                crawls.append(crawl)
            return crawls
    finally:
        server.stop()


def report(label: str, crawls: list[Crawl]) -> None:
    first = crawls[0]
    print(f"\n{label}")
    print(f"  {'crawl':<24}{'pages':>7}{'seconds':>9}{'pages/s':>9}{'bytes received':>16}"
          f"{'304s':>6}{'new versions':>14}{'time ratio':>12}{'bytes %':>9}")
    for c in crawls:
        ratio = first.seconds / c.seconds if c.seconds else 0.0
        share = 100.0 * c.bytes_received / first.bytes_received if first.bytes_received else 0.0
        print(f"  {c.name:<24}{c.pages:>7}{c.seconds:>9.2f}{c.pages_per_s:>9.1f}{c.bytes_received:>16,}"
              f"{c.not_modified:>6}{c.new_versions:>14}{ratio:>11.1f}x{share:>8.2f}%")


def check_goals(results: dict[str, list[Crawl]]) -> bool:
    goals = []
    for label, minimum in (("raw", 2.0), ("wan", 10.0)):
        first, again = results[label][0], results[label][1]
        speedup = first.seconds / again.seconds
        goals.append((f"{label}: unchanged re-crawl {speedup:.1f}x faster than the first crawl (goal >= {minimum:g}x)",
                      speedup >= minimum))
        share = 100.0 * again.bytes_received / first.bytes_received
        goals.append((f"{label}: unchanged re-crawl received {share:.2f}% of the first crawl's bytes (goal <= 2%)",
                      share <= 2.0))
    print()
    for text, ok in goals:
        print(f"  {'PASS' if ok else 'FAIL'}  {text}")
    return all(ok for _, ok in goals)


def plot_pages_done(panels: list[tuple[str, list[tuple[str, list[float]]]]], title: str, xlabel: str,
                    path: Path) -> None:
    """Pages done over time (the seed's Figure 6): one panel per ``(title, [(label, times)])``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), 4.5), squeeze=False)
    for ax, (panel_title, lines) in zip(axes[0], panels, strict=True):
        for label, times in lines:
            ax.plot([0.0, *times], range(len(times) + 1), label=label)
        ax.set_title(panel_title)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("pages done")
        ax.grid(alpha=0.3)
        ax.legend(loc="lower right")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"\nWrote {path}")


def plot(results: dict[str, list[Crawl]], titles: dict[str, str], path: Path) -> None:
    panels = [(titles[label], [(f"{c.name} ({c.seconds:.1f} s)", c.times) for c in crawls])
              for label, crawls in results.items()]
    plot_pages_done(panels, "WebRACE: crawl vs. conditional re-crawl (pages done over time)",
                    "seconds since the crawl started", path)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=2000)
    parser.add_argument("--page-kb", type=int, default=70, help="page size, the seed's 70 KB")
    parser.add_argument("--latency-ms", type=int, default=50, help="simulated link: delay per response")
    parser.add_argument("--rate", type=int, default=128_000, help="simulated link: bytes/s per connection")
    parser.add_argument("--concurrency", type=int, default=8,
                        help="CONCURRENT_REQUESTS(_PER_DOMAIN); 8 is Scrapy's default per domain")
    parser.add_argument("--change", type=float, default=0.1, help="fraction of pages changed before crawl 3")
    parser.add_argument("--png", type=Path, default=HERE / "recrawl.png")
    args = parser.parse_args()
    titles = {"raw": "raw (127.0.0.1)",
              "wan": f"simulated link ({args.latency_ms} ms, {args.rate // 1000} kB/s per connection)"}
    results = {}
    for label, latency, rate in (("raw", 0, 0), ("wan", args.latency_ms, args.rate)):
        print(f"Crawling {args.pages} pages of ~{args.page_kb} KB, {titles[label]}", flush=True)
        results[label] = run_link(label, args, latency, rate)
    for label, crawls in results.items():
        report(titles[label], crawls)
    ok = check_goals(results)
    plot(results, titles, args.png)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
