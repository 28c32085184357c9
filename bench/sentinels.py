"""Benchmark: Page Digest sentinels, grouped, against ungrouped and a changedetection.io-style
baseline, in one run (seed 004 section 3.7).

500 generated pages (news front pages of ~40 KB: a news region, a sidebar, links, images),
each in two versions (the second with edits: text, a link, an image, a new paragraph...).
10,000 sentinels over them with Zipf popularity (alpha 0.9): a few pages have hundreds of
watchers, most have a few. Types, locations and patterns are drawn at random. For the first
N sentinels (N up to 10,000) the time to process version 2 is measured three ways:

- grouped (ours): per page, one encode of the new version, one load of the stored digest,
  one grouped evaluation of all its sentinels;
- ungrouped: the same work per sentinel (encode, load, evaluate alone);
- baseline, as changedetection.io works: per watch, select the watched region (lxml), turn it
  into text with inscriptis (changedetection.io's html-to-text) and diff it with difflib
  against the stored text of the previous version (fetches are not counted: one per watch
  there, one per page here);
- and, for reference, the cheapest per-watch way: lxml's ``text_content`` and difflib.

    pip install -e '.[bench]' && python bench/sentinels.py [--sentinels 10000] [--pages 500]

Prints the times and the ratios (goal: grouped at least 10x faster than ungrouped and than
the changedetection.io-style baseline) and draws time against the number of sentinels
(``bench/sentinels.png``).
"""

from __future__ import annotations

import argparse
import bisect
import difflib
import itertools
import random
import sys
import time
from collections import defaultdict
from pathlib import Path

from lxml import html

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from webrace import digest as D  # noqa: E402
from webrace.records.sentinel import make  # noqa: E402
from webrace.sentinels.evaluate import evaluate  # noqa: E402

WORDS = ("market city storm election team vote price rain game school bridge river court music film "
         "museum train budget council report").split()
LOCATIONS = [None, None, "css:#news", "css:#sidebar", "xpath://div[@id='news']/p"]


def page(rng: random.Random, n: int, edits: bool) -> bytes:
    def phrase(k: int) -> str:
        return " ".join(rng.choice(WORDS) for _ in range(k))

    stories = "".join(f"<div class='story'><h3><a href='/p{n}/s{k}'>{phrase(6)}</a></h3><p>{phrase(60)}</p>"
                      f"<p>{phrase(40)}</p><img src='/img/{n}-{k}.jpg' alt='{phrase(3)}'></div>" for k in range(30))
    sidebar = "".join(f"<li><a href='/p{n}/t{k}'>{phrase(4)}</a></li>" for k in range(40))
    body = (f"<html><head><title>Page {n}</title></head><body><div id='nav'>{phrase(8)}</div>"
            f"<div id='news'>{stories}</div><ul id='sidebar'>{sidebar}</ul>"
            f"<p id='footer'>Updated {rng.randint(0, 23)}:{rng.randint(0, 59):02d}</p></body></html>")
    if edits:  # the second version: one to three edits
        for _ in range(rng.randint(1, 3)):
            kind = rng.choice(["text", "link", "image", "insert", "footer"])
            if kind == "text":
                body = body.replace("<p>", f"<p>{phrase(2)} ", 1)
            elif kind == "link":
                body = body.replace(f"/p{n}/s3'", f"/p{n}/s3-new'", 1)
            elif kind == "image":
                body = body.replace(f"/img/{n}-5.jpg", f"/img/{n}-5b.jpg", 1)
            elif kind == "insert":
                body = body.replace("<div id='news'>", f"<div id='news'><p class='breaking'>{phrase(6)}</p>", 1)
            else:
                body = body.replace("Updated", "Updated at", 1)
    return body.encode()


def zipf_choice(rng: random.Random, cumulative: list[float]) -> int:
    return bisect.bisect(cumulative, rng.random() * cumulative[-1])


def sentinels_for(rng: random.Random, urls: list[str], count: int) -> list:
    weights = [1 / (rank + 1) ** 0.9 for rank in range(len(urls))]
    cumulative = list(itertools.accumulate(weights))
    result = []
    for n in range(count):
        url = urls[zipf_choice(rng, cumulative)]
        kind = rng.choice(["any", "content", "content", "keyword", "regex", "structure", "links", "images"])
        where = rng.choice(LOCATIONS)
        pattern = rng.choice(WORDS) if kind == "keyword" else (r"\d+:\d\d" if kind == "regex" else None)
        on = rng.choice(["any", "any", "added"]) if kind in ("content", "links", "images", "keyword") else "any"
        result.append(make(f"user{n}", url, kind, where, pattern, on))
    return result


def region(root, where: str | None) -> list:
    if where is None:
        return [root]
    kind, _, expression = where.partition(":")
    return root.cssselect(expression) if kind == "css" else root.xpath(expression)


def region_text(root, where: str | None) -> str:
    return "\n".join(el.text_content() for el in region(root, where))


def inscriptis_text(root, where: str | None) -> str:
    """changedetection.io's way: the filtered HTML, turned into text by inscriptis."""
    from inscriptis import get_text
    from lxml import etree

    return get_text("".join(etree.tostring(el, encoding="unicode") for el in region(root, where)))


def run_grouped(sentinels, new_pages, stored) -> tuple[float, int]:
    start = time.perf_counter()
    fired = 0
    groups = defaultdict(list)
    for s in sentinels:
        groups[s.url].append(s)
    for url, group in groups.items():
        new = D.encode(new_pages[url])
        old = D.loads(stored[url])
        fired += len(evaluate(group, old, new))
    return time.perf_counter() - start, fired


def run_ungrouped(sentinels, new_pages, stored) -> tuple[float, int]:
    start = time.perf_counter()
    fired = 0
    for s in sentinels:
        fired += len(evaluate([s], D.loads(stored[s.url]), D.encode(new_pages[s.url])))
    return time.perf_counter() - start, fired


def run_baseline(sentinels, new_pages, old_pages, to_text=region_text) -> tuple[float, int]:
    previous = {}  # the stored text snapshot of each watch (computed before timing)
    for s in sentinels:
        previous[s.id] = to_text(html.document_fromstring(old_pages[s.url]), s.where).splitlines()
    start = time.perf_counter()
    fired = 0
    for s in sentinels:
        text = to_text(html.document_fromstring(new_pages[s.url]), s.where).splitlines()
        diff = list(difflib.unified_diff(previous[s.id], text, lineterm="", n=0))
        fired += bool(diff)
    return time.perf_counter() - start, fired


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sentinels", type=int, default=10_000)
    parser.add_argument("--pages", type=int, default=500)
    parser.add_argument("--png", type=Path, default=ROOT / "bench" / "sentinels.png")
    args = parser.parse_args()
    rng = random.Random(9)
    urls = [f"http://site{n % 37}.test/page{n}.html" for n in range(args.pages)]
    old_pages, new_pages = {}, {}
    for n, url in enumerate(urls):
        seed = rng.random()
        old_pages[url] = page(random.Random(seed), n, False)
        new_pages[url] = page(random.Random(seed), n, True)
    stored = {url: D.dumps(D.encode(body)) for url, body in old_pages.items()}
    everything = sentinels_for(rng, urls, args.sentinels)
    watched = len({s.url for s in everything})
    print(f"{args.pages} pages of ~{sum(map(len, new_pages.values())) / len(new_pages) / 1024:.0f} KB, "
          f"{args.sentinels} sentinels on {watched} of them (Zipf 0.9: the top page has "
          f"{sum(s.url == urls[0] for s in everything)})", flush=True)
    steps = sorted({n for n in (500, 1000, 2500, 5000, args.sentinels) if n <= args.sentinels})
    curves = {"grouped (ours)": [], "ungrouped": [],
              "changedetection.io-style (inscriptis text + difflib per watch)": [],
              "lxml text + difflib per watch": []}
    for n in steps:
        subset = everything[:n]
        grouped, fired = run_grouped(subset, new_pages, stored)
        ungrouped, fired_u = run_ungrouped(subset, new_pages, stored)
        baseline, fired_b = run_baseline(subset, new_pages, old_pages, inscriptis_text)
        cheapest, _ = run_baseline(subset, new_pages, old_pages)
        assert fired == fired_u, "grouping must not change what fires"
        for name, seconds in zip(curves, (grouped, ungrouped, baseline, cheapest), strict=True):
            curves[name].append(seconds)
        print(f"  {n:>6} sentinels: grouped {grouped:7.3f} s ({fired} fired), ungrouped {ungrouped:7.3f} s, "
              f"changedetection.io-style {baseline:7.3f} s ({fired_b} diffs), lxml text {cheapest:7.3f} s",
              flush=True)
    g, u, b, c = (values[-1] for values in curves.values())
    print(f"\nat {steps[-1]} sentinels: grouped is {u / g:.1f}x faster than ungrouped, {b / g:.1f}x faster than "
          f"the changedetection.io-style baseline (goal: 10x both), {c / g:.1f}x the lxml-text way")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(7, 4.5))
        for name, values in curves.items():
            ax.plot(steps, values, marker="o", label=name)
        ax.set_xlabel("sentinels")
        ax.set_ylabel("seconds to process the new versions")
        ax.set_title(f"{args.pages} pages, Zipf 0.9 popularity")
        ax.legend()
        ax.grid(alpha=0.3)
        fig.tight_layout()
        fig.savefig(args.png, dpi=110)
        print(f"wrote {args.png}")
    except ImportError:
        print("matplotlib not installed: no PNG (pip install -e '.[bench]')")
    ok = u / g >= 10 and b / g >= 10
    print(f"  {'PASS' if ok else 'FAIL'}  grouped >= 10x faster than ungrouped and than the changedetection.io-style "
          "baseline")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
