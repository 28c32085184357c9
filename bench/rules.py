"""Benchmark: the cost of Scout rules in the crawl, and of re-running them offline.

The generated site of ``bench/site_server.py`` (2,000 pages, ETags) is served on 127.0.0.1;
the real ``scrapy crawl urd`` crawls it twice in one run, each time from an empty data
directory: without rules (the baseline), then with the university example's template
(three ``RegExpRule``s and ``BreadthFirstSearch``, ``examples/university/template.xml``).
Then ``scrapy rules run`` re-runs the same rules over the stored versions, offline.

    pip install -e '.[bench]' && python bench/rules.py [--pages 2000] [--page-kb 70] [--latency-ms 0]

Prints pages/s of both crawls and their ratio (goal: with rules >= 0.8 x without), and the
offline re-run time against the crawl time.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from recrawl import SiteServer, Workdir  # noqa: E402

HERE = Path(__file__).resolve().parent
TEMPLATE = HERE.parent / "examples" / "university" / "template.xml"


def crawl(server: SiteServer, root: Path, concurrency: int, *extra: str) -> tuple[int, float, dict]:
    work = Workdir(root, concurrency)
    (root / "urds.xml").write_text(f'<urd id="bench" owner="bench"><uri timing="86400000">{server.url}</uri>'
                                   '<depth level="2"/></urd>\n')
    work.scrapy("urd", "add", "urds.xml")
    out = root / "items.jsonl"
    sets = [a for k, v in work.settings.items() for a in ("-s", f"{k}={v}")]
    work.scrapy("crawl", "urd", "-O", str(out), *sets, *extra)
    stats = json.loads((root / "data" / "last-crawl.json").read_text())["stats"]
    pages = sum(1 for line in out.read_text().splitlines() if '"owners"' in line)
    return pages, stats["elapsed_time_seconds"], stats


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=2000)
    parser.add_argument("--page-kb", type=int, default=70, help="page size, the seed's 70 KB")
    parser.add_argument("--latency-ms", type=int, default=0, help="simulated link: delay per response")
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()
    server = SiteServer(args.pages, args.page_kb, args.latency_ms, 0)
    try:
        with tempfile.TemporaryDirectory(prefix="webrace-bench-rules-") as tmp:
            base_root, rules_root = Path(tmp) / "plain", Path(tmp) / "rules"
            base_root.mkdir()
            rules_root.mkdir()
            print(f"site: {args.pages} pages of ~{args.page_kb} KB at {server.url} "
                  f"({args.latency_ms} ms per response), {args.concurrency} concurrent requests", flush=True)
            pages0, secs0, _ = crawl(server, base_root, args.concurrency)
            print(f"  without rules: {pages0} pages in {secs0:.1f} s = {pages0 / secs0:.1f} pages/s", flush=True)
            pages1, secs1, stats = crawl(server, rules_root, args.concurrency, "-a", f"template={TEMPLATE}")
            print(f"  with rules:    {pages1} pages in {secs1:.1f} s = {pages1 / secs1:.1f} pages/s "
                  f"({stats.get('rules/documents', 0)} documents, {stats.get('rules/results', 0)} results; "
                  + ", ".join(f"{k.rsplit('/', 1)[1]} {v:.1f} s" for k, v in stats.items()
                              if k.startswith("rules/seconds/")) + ")", flush=True)
            started = time.perf_counter()
            work = Workdir(rules_root, args.concurrency)
            done = subprocess.run([sys.executable, "-m", "scrapy", "rules", "run", "--template", str(TEMPLATE)],
                                  cwd=rules_root, env=work.env, capture_output=True, text=True)
            offline = time.perf_counter() - started
            if done.returncode:
                print(done.stderr[-2000:], file=sys.stderr)
                return 1
            documents = re.search(r"over (\d+) stored", done.stdout)
            print(f"  offline re-run: {documents.group(1) if documents else '?'} documents in {offline:.1f} s "
                  f"(the command, start to end)", flush=True)
    finally:
        server.stop()
    ratio = (pages1 / secs1) / (pages0 / secs0)
    print(f"\nthroughput with rules / without: {ratio:.2f}x (goal >= 0.8); "
          f"offline re-run / crawl with rules: {offline / secs1:.2f}x the time")
    ok = ratio >= 0.8 and pages1 == pages0
    print(f"  {'PASS' if ok else 'FAIL'}  rules keep at least 0.8 of the crawl's throughput")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
