"""Benchmark: ``scrapy ipmicra delegate`` on batches of growing size (issue 48): by default
1,000, 10,000 and 100,000 URLs over 100 crawlers whose capacities bind (1.1x the fair share),
baseline (another checkout, ``--baseline``: main before issue 48) and candidate (this tree) in
the same run, on the same files.

Each size is a simulated world (``webrace.delegation.simulator``) whose organisations grow with
the batch (one a ten URLs, up to 1,000; Zipf-sized as the simulator draws them: the largest has
a fifth to a seventh of the URLs), written as the command reads them (RIR lines, crawlers, the latency table of
every crawler to every URL's address, the URLs). The command is run as a user runs it, reading
and writing included, once a size and tree; a run over ``--timeout`` is stopped and printed as
such. Prints, a size, each tree's seconds and seconds a URL, the baseline's time over the
candidate's, each run's summary (probes a URL), and then the candidate's time a URL at each
size over its time a URL at the smallest size of 10,000 URLs or more (issue 48 asks that it stay
within 2x between 10,000 and 100,000).

    git worktree add /tmp/ipm-base <commit>
    nice python bench/ipmicra_scale.py --baseline /tmp/ipm-base [--sizes 1000,10000,100000] \\
        [--crawlers 100] [--capacity 1.1] [--timeout 1800] [--baseline-timeout 600] [--seed 1]

A 100,000-URL world is a latency table of 10 million rows (about 300 MB, and a few GB of memory
for the command reading it); ``--keep DIR`` leaves the files there.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from webrace.delegation import World, simulate  # noqa: E402

MAX_SIZE = 1_000_000
MAX_ORGS = 1_000  # organisations a world, at most: 2,000 overflow the simulator's /8 a region
MAX_CRAWLERS = 1_000


def world_files(directory: Path, urls: int, crawlers: int, capacity: float, seed: int) -> float:
    """The command's input files for a simulated batch of ``urls`` URLs in ``directory``; the seconds it took."""
    start = time.perf_counter()
    pages = math.ceil(capacity * urls / crawlers)
    orgs = min(MAX_ORGS, max(20, urls // 10))
    sim = simulate(crawlers, urls, seed, capacity=pages, world=World(regions=5, orgs=orgs))
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "rir.txt").write_text("\n".join(sim.rir_lines) + "\n")
    (directory / "crawlers.json").write_text(json.dumps(
        [{"id": c.id, "ip": str(c.ip), "capacity": c.capacity} for c in sim.crawlers]))
    with open(directory / "latency.csv", "w") as handle:
        handle.write("crawler,ip,ms\n")
        handle.writelines(f"{c},{ip},{ms}\n" for c, ip, ms in sim.latency_rows)
    (directory / "urls.txt").write_text("\n".join(sim.urls) + "\n")
    return time.perf_counter() - start


def delegate(tree: Path, directory: Path, out: str, timeout: float) -> tuple[float | None, str]:
    """``scrapy ipmicra delegate`` with ``tree`` first on the path: its seconds (None: over
    ``timeout``), and its summary line (or why it failed)."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    command = [sys.executable, "-m", "scrapy", "ipmicra", "delegate", "--rir", "rir.txt",
               "--crawlers", "crawlers.json", "--latency", "latency.csv", "--urls", "urls.txt", "-o", out]
    start = time.perf_counter()
    try:
        done = subprocess.run(command, cwd=directory, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"over {timeout:g} s: stopped"
    seconds = time.perf_counter() - start
    lines = done.stderr.strip().splitlines()
    if done.returncode != 0:
        return None, f"exit {done.returncode}: {lines[-1] if lines else ''}"
    summary = next((line for line in reversed(lines) if line.startswith("Delegated")), "")
    return seconds, summary.split(";")[0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", type=Path, help="a checkout to compare with (e.g. git worktree add ...)")
    parser.add_argument("--sizes", default="1000,10000,100000", help="URLs a batch, comma-separated")
    parser.add_argument("--crawlers", type=int, default=100)
    parser.add_argument("--capacity", type=float, default=1.1, help="times the fair share (URLs / crawlers)")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds a run may take (default 1800)")
    parser.add_argument("--baseline-timeout", type=float,
                        help="seconds a baseline run may take (default: --timeout; a quadratic one takes long)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--keep", type=Path, help="write the worlds' files here and keep them")
    args = parser.parse_args()
    try:
        sizes = [int(size) for size in args.sizes.split(",")]
    except ValueError:
        parser.error(f"--sizes {args.sizes}: URLs are integers, comma-separated")
    if not all(1 <= size <= MAX_SIZE for size in sizes) or not 1 <= args.crawlers <= MAX_CRAWLERS:
        parser.error(f"--sizes take 1 to {MAX_SIZE:,} URLs, --crawlers 1 to {MAX_CRAWLERS:,}")
    args.baseline_timeout = args.timeout if args.baseline_timeout is None else args.baseline_timeout
    if not (args.capacity >= 1 and args.timeout > 0 and args.baseline_timeout > 0):
        parser.error("--capacity must be 1 or more (the URLs must fit), --timeout and --baseline-timeout over 0")
    if args.baseline is not None and not (args.baseline / "webrace" / "__init__.py").is_file():
        parser.error(f"--baseline {args.baseline}: not a WebRACE checkout")
    trees = ([("baseline", args.baseline)] if args.baseline else []) + [("candidate", ROOT)]
    print(f"scrapy ipmicra delegate, {args.crawlers} crawlers at {args.capacity:g}x the fair share, an organisation "
          f"a ten URLs up to {MAX_ORGS:,}, world seed {args.seed}; "
          + ", ".join(f"{name} {tree}" for name, tree in trees), flush=True)
    print(f"{'URLs':>8} | {'world s':>7} | " + " | ".join(f"{name + ' s':>12} {'s/URL':>8}" for name, _ in trees)
          + (" | baseline/candidate" if args.baseline else ""), flush=True)
    per_url: dict[int, float] = {}
    with tempfile.TemporaryDirectory(prefix="ipmicra-scale-") as scratch:
        for size in sizes:
            directory = (args.keep or Path(scratch)) / f"urls-{size}"
            made = world_files(directory, size, args.crawlers, args.capacity, args.seed)
            runs = {name: delegate(tree, directory, f"{name}.jsonl",
                                   args.baseline_timeout if name == "baseline" else args.timeout)
                    for name, tree in trees}
            cells = []
            for name, _ in trees:
                seconds, why = runs[name]
                cells.append(f"{seconds:>12.1f} {seconds / size * 1000:>6.2f}ms" if seconds is not None
                             else f"{why[:21]:>21}")
            line = f"{size:>8,} | {made:>7.1f} | " + " | ".join(cells)
            candidate = runs["candidate"][0]
            if candidate is not None:
                per_url[size] = candidate / size
            if args.baseline:
                baseline = runs["baseline"][0]
                line += " | " + (f"{baseline / candidate:>18.2f}x" if baseline is not None and candidate is not None
                                 else f"{'-':>19}")
            print(line, flush=True)
            for name, _ in trees:
                if runs[name][0] is not None:
                    print(f"{'':>8}   {name}: {runs[name][1]}", flush=True)
    reference = min((size for size in per_url if size >= 10_000), default=min(per_url, default=None))
    if reference is not None:
        print(f"candidate's time a URL against {reference:,} URLs: " + ", ".join(
            f"{size:,}: {per_url[size] / per_url[reference]:.2f}x" for size in sorted(per_url)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
