"""Benchmark: distributed workers (seed 000 section 7.3), baseline and candidate in one run.

1. Latency-bound, like the real web: a generated site whose server waits ~50 ms before
   every response. One worker against two worker processes on the same round (Redis mode,
   `scrapy urd schedule` + `scrapy crawl urd`). Goal: two workers >= 1.8x the pages/s of one.
2. The cost of Redis: the same site without added latency, crawled by the embedded mode and
   by one Redis-mode worker. Goal (issue 23): Redis mode >= 0.9x the embedded pages/s. On a
   small machine one such crawl varies by 10% or more from run to run (the worker, the site
   server and Redis share the cores), so this pair runs ``--pairs`` times (default 3),
   embedded and Redis alternating, and the goal is judged on the median of the pairs' ratios.

    pip install -e '.[bench]' && python bench/workers.py [--pages 2000] [--page-kb 10] [--baseline REV]

Each configuration runs twice in the same run: with the code of ``--baseline`` (default:
the last commit before the round engine of issue 18, extracted with ``git archive`` and put
first on PYTHONPATH) and with this tree (the candidate); the ratio candidate/baseline is
printed per configuration. The goals are judged on the candidate.

Pages/s is pages over the span between the first and the last page fetched (startup
excluded). Needs a Redis on 127.0.0.1:6379 (its keys go under a prefix of their own and are
removed). Writes pages done over time to bench/workers.png.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import redis

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from politeness import baseline_code  # noqa: E402 - sibling scripts, not a package
from recrawl import SiteServer, plot_pages_done  # noqa: E402

REDIS_URL = "redis://127.0.0.1:6379/0"
BASELINE_REV = "baf83f6"  # before the round engine (issue 18)


@dataclass
class Result:
    name: str
    code: str  # "baseline" or "candidate"
    pages: int
    span: float  # seconds from the first page fetched to the last
    fetched_twice: int
    times: list[float] = field(default_factory=list)

    @property
    def pages_per_s(self) -> float:
        return self.pages / self.span if self.span else 0.0


def scrapy_env(data: Path, redis_prefix: str | None, code: Path | None = None) -> dict[str, str]:
    env = {**os.environ, "SCRAPY_SETTINGS_MODULE": "webrace.settings", "WEBRACE_DATA_DIR": str(data)}
    if code is not None:  # another revision's packages first on the path
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(code), os.environ.get("PYTHONPATH")]))
    env.pop("REDIS_URL", None)
    if redis_prefix:
        env.update(REDIS_URL=REDIS_URL, WEBRACE_REDIS_PREFIX=redis_prefix)
    return env


def crawl_settings(concurrency: int) -> list[str]:
    values = {
        "DOWNLOAD_DELAY": "0", "CONCURRENT_REQUESTS": str(concurrency),
        "CONCURRENT_REQUESTS_PER_DOMAIN": str(concurrency), "WEBRACE_MAX_LEASED": str(concurrency),
        "WEBRACE_HOST_CONCURRENCY": str(concurrency), "WEBRACE_DELAY_FACTOR": "0",
        "WEBRACE_IDLE_CLOSE": "2", "LOG_LEVEL": "WARNING",
        "TELNETCONSOLE_ENABLED": "False", "REMOTE_CONTROL_ENABLED": "False",
    }
    return [a for k, v in values.items() for a in ("-s", f"{k}={v}")]


def run(name: str, server: SiteServer, workers: int, redis_mode: bool, concurrency: int,
        code: Path | None) -> Result:
    prefix = f"webrace-bench-{uuid.uuid4().hex[:8]}:" if redis_mode else None
    with tempfile.TemporaryDirectory(prefix="webrace-bench-") as tmp:
        root = Path(tmp)
        control = scrapy_env(root / "control", prefix, code)
        (root / "urds.xml").write_text(f'<urd id="w" owner="bench"><uri timing="86400000">{server.url}</uri>'
                                       '<depth level="2"/></urd>\n')
        subprocess.run([sys.executable, "-m", "scrapy", "urd", "add", "urds.xml"], cwd=root, env=control,
                       check=True, capture_output=True)
        if redis_mode:
            subprocess.run([sys.executable, "-m", "scrapy", "urd", "schedule"], cwd=root, env=control,
                           check=True, capture_output=True)
        server.control("/_control/reset")
        procs, outs = [], []
        for n in range(workers):
            out = root / f"pages-{n}.jsonl"
            env = control if not redis_mode else scrapy_env(root / f"worker-{n}", prefix, code)
            # the workers of one crawl share one body store (a shared mount in real life; a worker
            # whose store is another is refused): the meta-info in Redis names bodies stored there
            env = {**env, "WEBRACE_OBJECTS_DIR": str(root / "objects")} if redis_mode else env
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "scrapy", "crawl", "urd", "-O", str(out), *crawl_settings(concurrency)],
                cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            outs.append(out)
        for proc in procs:
            if proc.wait(timeout=1800):
                raise RuntimeError(f"{name}: a worker exited with {proc.returncode}")
        stats = server.control("/_control/stats")
        items = [json.loads(line) for out in outs for line in out.read_text().splitlines()]
        if prefix:
            client = redis.Redis.from_url(REDIS_URL)
            keys = list(client.scan_iter(match=f"{prefix}*"))
            if keys:
                client.delete(*keys)
    stamps = sorted(datetime.fromisoformat(i["fetched_at"].replace("Z", "+00:00")).timestamp() for i in items)
    span = stamps[-1] - stamps[0]
    # the server counts robots.txt too: one per worker
    twice = stats["responses_200"] - workers - len({i["url"] for i in items})
    result = Result(name, "baseline" if code else "candidate", len(items), span, twice,
                    [t - stamps[0] for t in stamps])
    print(f"  {name:<22} {result.code:<9} {result.pages:>6} pages {result.span:>7.2f} s "
          f"{result.pages_per_s:>8.1f} pages/s   fetched twice: {result.fetched_twice}", flush=True)
    return result


def plot(results: list[Result], path: Path) -> None:
    candidate = [r for r in results if r.code == "candidate"]
    panels = [(title, [(f"{r.name} ({r.pages_per_s:.0f} pages/s)", r.times) for r in group])
              for group, title in ((candidate[:2], "50 ms per response"), (candidate[2:], "raw loopback"))]
    plot_pages_done(panels, "WebRACE distributed mode: workers over Redis", "seconds since the first page", path)


CONFIGS = [  # (name, latency-bound site?, workers, Redis mode)
    ("1 worker (Redis)", True, 1, True),
    ("2 workers (Redis)", True, 2, True),
    ("embedded", False, 1, False),
    ("1 worker (Redis)", False, 1, True),
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=2000)
    parser.add_argument("--page-kb", type=int, default=10)
    parser.add_argument("--latency-ms", type=int, default=50)
    parser.add_argument("--concurrency", type=int, default=4,
                        help="requests per worker; 4 keeps one worker latency-bound on a 2-core machine "
                             "that also runs the site server and the second worker")
    parser.add_argument("--baseline", default=BASELINE_REV, help="revision whose code is the baseline")
    parser.add_argument("--pairs", type=int, default=3,
                        help="interleaved runs of the loopback pair (embedded, Redis worker), candidate only")
    parser.add_argument("--png", type=Path, default=HERE / "workers.png")
    args = parser.parse_args()
    results: dict[tuple[str, bool, str], Result] = {}
    extra: dict[str, list[Result]] = {}  # the loopback pair's further runs (candidate)
    with tempfile.TemporaryDirectory(prefix="webrace-bench-code-") as tmp:
        code = {"baseline": baseline_code(Path(tmp), args.baseline), "candidate": None}
        for latency_bound in (True, False):
            latency = args.latency_ms if latency_bound else 0
            print(f"Site of {args.pages} pages of ~{args.page_kb} KB, {latency} ms per response:")
            server = SiteServer(args.pages, args.page_kb, latency, 0)
            try:
                for name, bound, workers, redis_mode in CONFIGS:
                    if bound != latency_bound:
                        continue
                    for who in ("baseline", "candidate"):  # interleaved: the same machine state for both
                        results[(name, bound, who)] = run(name, server, workers, redis_mode, args.concurrency,
                                                          code[who])
                if not latency_bound:
                    for _ in range(max(args.pairs, 1) - 1):  # more pairs of the candidate, interleaved
                        for name, _, workers, redis_mode in CONFIGS[2:]:
                            extra.setdefault(name, []).append(
                                run(name, server, workers, redis_mode, args.concurrency, None))
            finally:
                server.stop()
    print()
    print(f"  {'configuration':<34} {'baseline':>10} {'candidate':>10}  ratio (pages/s)")
    for name, bound, _, _ in CONFIGS:
        b, c = results[(name, bound, "baseline")], results[(name, bound, "candidate")]
        label = f"{name}, {'latency-bound' if bound else 'loopback'}"
        ratio = c.pages_per_s / b.pages_per_s if b.pages_per_s else 0.0
        print(f"  {label:<34} {b.pages_per_s:>10.1f} {c.pages_per_s:>10.1f}  {ratio:.2f}x")
    cand = [results[(n, bnd, "candidate")] for n, bnd, _, _ in CONFIGS]
    scale = cand[1].pages_per_s / cand[0].pages_per_s
    ratios = [r.pages_per_s / e.pages_per_s
              for e, r in zip([cand[2], *extra.get(CONFIGS[2][0], [])], [cand[3], *extra.get(CONFIGS[3][0], [])],
                              strict=True)]
    cost = statistics.median(ratios)
    twice = sum(r.fetched_twice for r in [*results.values(), *(r for rs in extra.values() for r in rs)]
                if r.code == "candidate")
    print()
    print(f"  {'PASS' if scale >= 1.8 else 'FAIL'}  two workers: {scale:.2f}x one worker (goal >= 1.8x)")
    print(f"  {'PASS' if cost >= 0.9 else 'FAIL'}  Redis mode: {cost:.2f}x the embedded mode, the median of "
          f"{len(ratios)} interleaved pairs ({', '.join(f'{r:.2f}x' for r in ratios)}; goal >= 0.9x)")
    print(f"  {'PASS' if not twice else 'FAIL'}  no page fetched twice in a round ({twice})")
    plot(cand, args.png)
    return 0 if scale >= 1.8 and cost >= 0.9 and not twice else 1


if __name__ == "__main__":
    sys.exit(main())
