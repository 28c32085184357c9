"""Benchmark: owners whose URDs overlap, in continuous mode (issue 41), baseline and candidate
in one run, in the embedded and the distributed mode.

A generated site (``bench/site_server.py``: 1,000 pages, 200 hubs, honest validators) is
watched by one owner's URD over the whole site (depth 2, a keyword on every page: "revision")
and by 200 owners' URDs on the hubs (depth 1, a keyword no page has), timings drawn from
30-60 s, and 50 content sentinels on leaves (every 60 s). Every minute 5% of the leaves
change. Ground truth is the server's log: a change is *fetched* when the server sent the
page in full between the change and the page's next change. Counted:

- new versions stored, and the whole-site owner's ACIs for changed versions (a change on a
  page its keyword matches must give it an ACI): both must equal the changes fetched;
- notifications, against the changes fetched on watched pages;
- requests per page, against the bound (duration / the shortest timing wanting it) + 2.

    python bench/overlap.py [--minutes 20] [--modes embedded,distributed] [--baseline REV]

The baseline is revision ``--baseline`` (default: the last commit before issue 41's fix),
extracted with ``git archive`` and put first on PYTHONPATH; the candidate is this tree.
The distributed mode needs a Redis on 127.0.0.1:6379 (keys under a prefix of their own,
removed afterwards): `scrapy urd schedule --loop` and one worker. Draws bench/overlap.png.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from bisect import bisect_right
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from random import Random

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from politeness import baseline_code  # noqa: E402 - sibling scripts, not a package

REDIS_URL = "redis://127.0.0.1:6379/0"
BASELINE_REV = "197c8e8"  # before issue 41
HUBS, PAGES, SENTINELS = 200, 1000, 50


@dataclass
class Outcome:
    code: str
    mode: str
    seconds: float
    changes: int
    fetched: int  # changes the server sent in full before the page changed again
    versions: int  # new versions fetched of changed pages
    kept: int  # of which the body was kept (not dropped as relevant to nobody)
    acis: int  # the whole-site owner's ACIs for changed versions
    watched_fetched: int
    notifications: int
    requests: int
    max_ratio: float  # the most-requested page's requests over its bound
    over_bound: int  # pages requested more than (duration / shortest timing) + 2 times
    fresh: int  # pages served without a request

    def row(self) -> str:
        return (f"  {self.mode:<11} {self.code:<9} {self.changes:>7} {self.fetched:>7} {self.versions:>8} "
                f"{self.kept:>5} {self.acis:>6} {self.notifications:>5}/{self.watched_fetched:<4} {self.requests:>8} "
                f"{self.max_ratio:>9.2f} {self.over_bound:>6} {self.fresh:>7}")


HEADER = ("  mode        code      changes fetched versions  kept   ACIs notes/watched requests "
          "max/bound  >bound   fresh")


def owners(site: str, rng: Random, leaves: list[str]) -> tuple[str, list[str], dict[str, int]]:
    """URD XML, the watched leaves, and the shortest timing wanting each path (ms)."""
    timing = {f"hub{h}": rng.randrange(30, 61) * 1000 for h in range(HUBS)}
    whole = rng.randrange(30, 61) * 1000
    urds = [f'<urd id="whole" owner="wendy"><uri timing="{whole}">{site}</uri><depth level="2"/>'
            '<keywords><keyword key="revision" weight="1"/></keywords></urd>']
    urds += [f'<urd id="hub{h}" owner="owner{h}"><uri timing="{timing[f"hub{h}"]}">{site}hub/{h}.html</uri>'
             '<depth level="1"/><keywords><keyword key="zqxjvbw" weight="1"/></keywords></urd>'
             for h in range(HUBS)]
    watched = sorted(rng.sample(leaves, SENTINELS))
    return "<urds>\n" + "\n".join(urds) + "\n</urds>\n", watched, {"whole": whole, **timing}


def shortest_timings(site_pages: dict[str, list[str]], timing: dict[str, int], watched: list[str]) -> dict[str, int]:
    """Path -> the shortest timing of the URDs and sentinels that want it (ms)."""
    shortest = defaultdict(lambda: timing["whole"])
    for h in range(HUBS):
        for path in [f"/hub/{h}.html", *site_pages[f"/hub/{h}.html"]]:
            shortest[path] = min(shortest[path], timing[f"hub{h}"])
    for path in watched:
        shortest[path] = min(shortest[path], 60_000)
    return shortest


def hub_links(pages: int, hubs: int) -> dict[str, list[str]]:
    """What bench/site_server.py links from each hub (its leaves; neighbouring hubs too)."""
    sys.path.insert(0, str(HERE))
    from site_server import SiteSpec

    spec = SiteSpec(pages=pages, hubs=hubs)
    links = {f"/hub/{h}.html": [f"/page/{j}.html" for j in spec.hub_leaves(h)] for h in range(spec.hub_count)}
    for h in range(spec.hub_count):  # a hub links its neighbours, so their leaves are at depth 2 of it
        links[f"/hub/{h}.html"] += ["/", *(f"/hub/{n}.html" for n in (h - 1, h + 1) if 0 <= n < spec.hub_count)]
    return links


def scrapy(args: list[str], cwd: Path, env: dict, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "scrapy", *args], cwd=cwd, env=env,
                            stdout=subprocess.DEVNULL, stderr=kw.pop("stderr", subprocess.DEVNULL), **kw)


SETTINGS = {"WEBRACE_CONTINUOUS": "True", "DOWNLOAD_DELAY": "0", "WEBRACE_DELAY_FACTOR": "0",
            "WEBRACE_HOST_CONCURRENCY": "8", "CONCURRENT_REQUESTS": "16", "LOG_LEVEL": "INFO",
            "TELNETCONSOLE_ENABLED": "False", "REMOTE_CONTROL_ENABLED": "False", "WEBRACE_MAX_LEASED": "16"}


def run(code_path: Path | None, code: str, mode: str, minutes: float, tmp: Path, seed: int) -> Outcome:
    root = Path(tempfile.mkdtemp(prefix=f"overlap-{code}-{mode}-", dir=tmp))
    log = root / "server.jsonl"
    server = subprocess.Popen([sys.executable, str(HERE / "site_server.py"), "--pages", str(PAGES), "--hubs",
                               str(HUBS), "--page-kb", "8", "--log", str(log)], stdout=subprocess.PIPE, text=True)
    site = server.stdout.readline().strip().split(" ", 1)[1]
    prefix = f"webrace-bench-{uuid.uuid4().hex[:8]}:" if mode == "distributed" else None
    env = {**os.environ, "SCRAPY_SETTINGS_MODULE": "webrace.settings", "WEBRACE_DATA_DIR": str(root / "data")}
    env.pop("REDIS_URL", None)
    if code_path is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(code_path), os.environ.get("PYTHONPATH")]))
    if prefix:
        env.update(REDIS_URL=REDIS_URL, WEBRACE_REDIS_PREFIX=prefix, WEBRACE_OBJECTS_DIR=str(root / "objects"))
    rng = Random(seed)
    links = hub_links(PAGES, HUBS)
    leaves = sorted({p for h in links.values() for p in h if p.startswith("/page/")})
    urd_xml, watched, timing = owners(site, rng, leaves)
    (root / "urds.xml").write_text(urd_xml)
    (root / "watched.txt").write_text("".join(f"{site}{p.lstrip('/')}\n" for p in watched))
    for args in (["urd", "add", "urds.xml"],
                 ["sentinel", "add", "--owner", "sam", "--urls", "watched.txt", "--type", "content", "--every", "60s"]):
        subprocess.run([sys.executable, "-m", "scrapy", *args], cwd=root, env=env, check=True, capture_output=True)
    settings = [a for k, v in SETTINGS.items() for a in ("-s", f"{k}={v}")]
    procs = []
    with open(root / "crawl.log", "w") as crawl_log:
        worker = env
        if prefix:  # the scheduler keeps the URD-DB; the worker, as on another machine, a data directory of its own
            procs.append(scrapy(["urd", "schedule", "--loop"], root, env))
            worker = {**env, "WEBRACE_DATA_DIR": str(root / "worker")}
        procs.append(scrapy(["crawl", "urd", "-O", "items.jsonl", *settings], root, worker, stderr=crawl_log))
        started = time.time()
        changes: list[tuple[float, str]] = []
        minute = 1
        while time.time() - started < minutes * 60:
            time.sleep(min(1.0, max(0.0, started + minute * 60 - time.time())))  # the change script's pace
            if time.time() >= started + minute * 60 and minute <= minutes - 1.5:
                with urllib_open(f"{site}_control/change?fraction=0.05&round={minute}") as answer:
                    stamp = time.time()
                    changes += [(stamp, path) for path in json.load(answer)["changed"]]
                minute += 1
            elif time.time() >= started + minute * 60:
                minute += 1
            if int(time.time() - started) % 60 == 0:
                print(f"  [{code} {mode}] {time.time() - started:4.0f} s, {len(changes)} changes", flush=True)
        for proc in procs:
            proc.send_signal(signal.SIGINT)
        for proc in procs:
            try:
                proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                proc.kill()
        seconds = time.time() - started
    server.terminate()
    server.wait()
    if prefix:
        import redis

        client = redis.Redis.from_url(REDIS_URL)
        keys = list(client.scan_iter(match=f"{prefix}*"))
        if keys:
            client.delete(*keys)
    return measure(code, mode, seconds, root, changes, watched, shortest_timings(links, timing, watched))


def urllib_open(url: str):
    import urllib.request

    return urllib.request.urlopen(url, timeout=30)  # noqa: S310 - 127.0.0.1


def measure(code: str, mode: str, seconds: float, root: Path, changes: list[tuple[float, str]],
            watched: list[str], shortest: dict[str, int]) -> Outcome:
    hits = [json.loads(line) for line in (root / "server.jsonl").read_text().splitlines()]
    full: dict[str, list[float]] = defaultdict(list)
    per_page = Counter()
    for hit in hits:
        if hit["path"] in ("/robots.txt",):
            continue
        per_page[hit["path"]] += 1
        if hit["status"] == 200:
            full[hit["path"]].append(hit["start"])
    for times in full.values():
        times.sort()
    by_path: dict[str, list[float]] = defaultdict(list)
    for at, path in changes:
        by_path[path].append(at)
    fetched = watched_fetched = 0
    watched_set = set(watched)
    for path, ats in by_path.items():
        ats.sort()
        for n, at in enumerate(ats):
            until = ats[n + 1] if n + 1 < len(ats) else float("inf")
            times = full.get(path, [])
            i = bisect_right(times, at)
            if i < len(times) and times[i] < until:
                fetched += 1
                watched_fetched += path in watched_set
    items = [json.loads(line) for line in (root / "items.jsonl").read_text().splitlines()] \
        if (root / "items.jsonl").exists() else []
    changed = {path for _, path in changes}
    path_of = lambda url: "/" + url.split("/", 3)[3]  # noqa: E731
    new = [i for i in items if "owners" in i and i.get("new_version") and (i.get("version") or 0) > 1
           and path_of(i["url"]) in changed]
    versions, kept = len(new), sum(1 for i in new if i.get("kept"))
    acis = len({(a["uri"], a.get("version")) for a in items if a.get("owner") == "wendy" and "docbase" in a
                and (a.get("version") or 0) > 1})
    notes = sum(1 for i in items if "sentinel" in i)
    fresh = sum(1 for i in items if "owners" in i and i.get("not_modified") and i.get("status") != 304)
    ratios = {path: count / (seconds * 1000 / shortest[path] + 2) for path, count in per_page.items()}
    return Outcome(code, mode, seconds, len(changes), fetched, versions, kept, acis, watched_fetched, notes,
                   sum(per_page.values()), max(ratios.values(), default=0.0),
                   sum(1 for r in ratios.values() if r > 1), fresh)


def plot(outcomes: list[Outcome], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    labels = [f"{o.mode}\n{o.code}" for o in outcomes]
    x = range(len(outcomes))
    share = lambda a, b: 100 * a / b if b else 0  # noqa: E731
    left.bar([i - 0.2 for i in x], [share(o.acis, o.fetched) for o in outcomes], 0.4, label="whole-site owner's ACIs")
    left.bar([i + 0.2 for i in x], [share(o.notifications, o.watched_fetched) for o in outcomes], 0.4,
             label="sentinel notifications")
    left.set_xticks(list(x), labels)
    left.set_ylabel("% of the changes fetched")
    left.legend(loc="lower right")
    right.bar(list(x), [o.max_ratio for o in outcomes], 0.5)
    right.axhline(1.0, color="k", linestyle="--", linewidth=1)
    right.set_xticks(list(x), labels)
    right.set_ylabel("requests of the busiest page / bound")
    fig.suptitle("Overlapping owners, continuous mode: what a change gives, and what it costs")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=20.0)
    parser.add_argument("--modes", default="embedded,distributed")
    parser.add_argument("--baseline", default=BASELINE_REV)
    parser.add_argument("--codes", default="baseline,candidate")
    parser.add_argument("--candidate", default=None,
                        help="revision whose code is the candidate (default: this tree, as it is when each run starts)")
    parser.add_argument("--seed", type=int, default=41)
    parser.add_argument("--png", type=Path, default=HERE / "overlap.png")
    args = parser.parse_args()
    outcomes = []
    with tempfile.TemporaryDirectory(prefix="webrace-overlap-") as tmp_name:
        tmp = Path(tmp_name)
        for mode in args.modes.split(","):
            for code in args.codes.split(","):
                rev = args.baseline if code == "baseline" else args.candidate
                path = baseline_code(tmp, rev) if rev else None
                outcomes.append(run(path, code, mode, args.minutes, tmp, args.seed))
                print(HEADER)
                print(outcomes[-1].row(), flush=True)
    print(f"\n{args.minutes:g} minutes a run, {PAGES} pages, {HUBS} hub owners + 1 whole-site owner, "
          f"{SENTINELS} sentinels, 5% of the leaves changed a minute\n")
    print(HEADER)
    for outcome in outcomes:
        print(outcome.row())
    goals = []
    for o in outcomes:
        if o.code == "candidate":
            goals.append((f"{o.mode}: every change fetched kept and an ACI", o.kept >= o.fetched and
                          o.acis >= o.fetched))
            goals.append((f"{o.mode}: every change fetched on a watched page notified",
                          o.notifications >= o.watched_fetched))
            goals.append((f"{o.mode}: no page over (duration / shortest timing) + 2 requests", o.over_bound == 0))
    for mode in {o.mode for o in outcomes}:
        pair = {o.code: o for o in outcomes if o.mode == mode}
        if len(pair) == 2:
            b, c = pair["baseline"], pair["candidate"]
            print(f"  {mode}: requests candidate/baseline = {c.requests / max(b.requests, 1):.3f}; "
                  f"ACIs per change fetched {b.acis / max(b.fetched, 1):.2f} -> {c.acis / max(c.fetched, 1):.2f}")
    for name, ok in goals:
        print(f"  [{'met' if ok else 'MISSED'}] {name}")
    plot(outcomes, args.png)
    print(f"wrote {args.png}")
    return 0 if all(ok for _, ok in goals) else 1


if __name__ == "__main__":
    sys.exit(main())
