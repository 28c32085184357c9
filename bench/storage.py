"""Benchmark: what a stored page costs in Redis, and the crawl's pages/s (issue 22), baseline
and candidate in one run.

Distributed mode (`scrapy urd schedule` + `scrapy crawl urd` workers on one Redis): a generated
site (bench/site_server.py), one URD of depth 2, crawled by one worker and by two, with the
code of ``--baseline`` (default: the last commit before bodies left Redis, extracted with
``git archive`` and put first on PYTHONPATH) and with this tree. After each crawl the round is
closed (its queues expire) and every key of the run's own prefix that does not expire is
measured with Redis's ``MEMORY USAGE``: that is what the stored pages keep in Redis. The
candidate's bodies go to a directory both workers share (``WEBRACE_OBJECTS_DIR``); its size
on disk is printed too.

    pip install -e '.[bench]' && python bench/storage.py [--pages 1000] [--page-kb 10] [--baseline REV]

Goals (candidate): at most 500 Redis bytes per stored page, pages/s at least 0.9x the
baseline's. Needs a Redis on 127.0.0.1:6379 (keys under a prefix of their own, removed).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import uuid
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import redis

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from politeness import baseline_code  # noqa: E402 - sibling scripts, not a package
from recrawl import SiteServer  # noqa: E402
from workers import REDIS_URL, crawl_settings, scrapy_env  # noqa: E402

BASELINE_REV = "2914c69"  # bodies and meta-info XML in Redis


@dataclass
class Result:
    code: str
    workers: int
    pages: int
    span: float
    redis_bytes: int  # keys that do not expire, after the round closed
    queue_bytes: int  # the closed round's keys (they expire)
    disk_bytes: int  # the shared body directory (candidate)

    @property
    def pages_per_s(self) -> float:
        return self.pages / self.span if self.span else 0.0

    @property
    def per_page(self) -> float:
        return self.redis_bytes / self.pages if self.pages else 0.0


def measure(client: redis.Redis, prefix: str) -> tuple[int, int]:
    lasting = expiring = 0
    for key in client.scan_iter(match=f"{prefix}*", count=1000):
        size = client.memory_usage(key, samples=0) or 0
        if client.ttl(key) == -1:
            lasting += size
        else:
            expiring += size
    return lasting, expiring


def du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.exists() else 0


def run(server: SiteServer, workers: int, code: Path | None, concurrency: int) -> Result:
    prefix = f"webrace-bench-{uuid.uuid4().hex[:8]}:"
    client = redis.Redis.from_url(REDIS_URL)
    with tempfile.TemporaryDirectory(prefix="webrace-bench-") as tmp:
        root = Path(tmp)
        shared = root / "shared-objects"

        def env(name: str) -> dict[str, str]:
            return {**scrapy_env(root / name, prefix, code), "WEBRACE_OBJECTS_DIR": str(shared)}

        (root / "urds.xml").write_text(f'<urd id="w" owner="bench"><uri timing="86400000">{server.url}</uri>'
                                       '<depth level="2"/></urd>\n')
        for command in (["urd", "add", "urds.xml"], ["urd", "schedule"]):
            subprocess.run([sys.executable, "-m", "scrapy", *command], cwd=root, env=env("control"), check=True,
                           capture_output=True)
        server.control("/_control/reset")
        before, _ = measure(client, prefix)
        procs, outs = [], []
        for n in range(workers):
            out = root / f"pages-{n}.jsonl"
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "scrapy", "crawl", "urd", "-O", str(out), *crawl_settings(concurrency)],
                cwd=root, env=env(f"worker-{n}"), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
            outs.append(out)
        for proc in procs:
            _, err = proc.communicate(timeout=1800)
            if proc.returncode:
                raise RuntimeError(f"a worker exited with {proc.returncode}: {err[-2000:]}")
        subprocess.run([sys.executable, "-m", "scrapy", "urd", "schedule"], cwd=root, env=env("control"),
                       check=True, capture_output=True)  # closes the finished round
        lasting, expiring = measure(client, prefix)
        disk = du(shared) + sum(du(root / f"worker-{n}" / "objects") for n in range(workers))
        items = [json.loads(line) for out in outs for line in out.read_text().splitlines()]
        keys = list(client.scan_iter(match=f"{prefix}*"))
        if keys:
            client.delete(*keys)
    stamps = sorted(datetime.fromisoformat(i["fetched_at"].replace("Z", "+00:00")).timestamp() for i in items)
    result = Result("baseline" if code else "candidate", workers, len(items), stamps[-1] - stamps[0],
                    lasting - before, expiring, disk)
    print(f"  {result.code:<9} {workers} worker(s) {result.pages:>6} pages {result.pages_per_s:>7.1f} pages/s   "
          f"Redis {result.per_page:>6.0f} B/page (+{expiring / max(result.pages, 1):.0f} B/page of expiring "
          f"queues)   bodies on disk {disk / max(result.pages, 1):>6.0f} B/page", flush=True)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=1000)
    parser.add_argument("--page-kb", type=int, default=10)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--baseline", default=BASELINE_REV, help="revision whose code is the baseline")
    args = parser.parse_args()
    results: dict[tuple[int, str], Result] = {}
    with tempfile.TemporaryDirectory(prefix="webrace-bench-code-") as tmp:
        code = {"baseline": baseline_code(Path(tmp), args.baseline), "candidate": None}
        print(f"Site of {args.pages} pages of ~{args.page_kb} KB, distributed mode:")
        server = SiteServer(args.pages, args.page_kb, 0, 0)
        try:
            for workers in (1, 2):
                for who in ("baseline", "candidate"):  # interleaved: the same machine state for both
                    results[(workers, who)] = run(server, workers, code[who], args.concurrency)
        finally:
            server.stop()
    print()
    print(f"  {'workers':<8} {'Redis B/page':>24} {'pages/s':>24}")
    print(f"  {'':<8} {'baseline':>8} {'candidate':>9} {'ratio':>5} {'baseline':>8} {'candidate':>9} {'ratio':>5}")
    ok = True
    for workers in (1, 2):
        b, c = results[(workers, "baseline")], results[(workers, "candidate")]
        print(f"  {workers:<8} {b.per_page:>8.0f} {c.per_page:>9.0f} {c.per_page / b.per_page:>5.2f} "
              f"{b.pages_per_s:>8.1f} {c.pages_per_s:>9.1f} {c.pages_per_s / b.pages_per_s:>5.2f}")
        ok &= c.per_page <= 500 and c.pages_per_s >= 0.9 * b.pages_per_s
    worst = max(results[(w, "candidate")].per_page for w in (1, 2))
    speed = min(results[(w, "candidate")].pages_per_s / results[(w, "baseline")].pages_per_s for w in (1, 2))
    print()
    print(f"  {'PASS' if worst <= 500 else 'FAIL'}  Redis bytes per stored page: {worst:.0f} (goal <= 500)")
    print(f"  {'PASS' if speed >= 0.9 else 'FAIL'}  pages/s: {speed:.2f}x the baseline (goal >= 0.9x)")
    return 0 if ok else 1


if __name__ == "__main__":
    os.environ.pop("REDIS_URL", None)
    sys.exit(main())
