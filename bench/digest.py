"""Benchmark: the Page Digest against lxml, in one run (seed 004 section 3.4.2).

Three page sets: a generated portal page (navigation, tables, lists, many links and images:
~70 KB and thousands of nodes, like a news front page), a page of the generated crawl site
(~70 KB of long paragraphs: few nodes), and the demo site's small pages. For each:

- encode (HTML -> digest) against parsing the HTML with ``lxml.html`` (the seed: "roughly
  equivalent in cost");
- ``loads`` of a stored digest against parsing the HTML: structure only (what structure,
  link and image sentinels need), and with the content (goal: at least 10x);
- a full traversal (every node's label, in document order) of a digest against iterating
  an lxml tree (goal: at least 10x); the digest's child counts need no traversal (ST);
- size of the digest against the HTML, raw and zlib-compressed.

    python bench/digest.py
"""

from __future__ import annotations

import random
import sys
import zlib
from pathlib import Path

from lxml import html

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.append(str(ROOT / "bench"))
from timing import best_ms  # noqa: E402

from webrace import digest as D  # noqa: E402


def portal(rng: random.Random, kb: int = 70) -> bytes:
    words = ["news", "world", "sport", "market", "weather", "city", "report", "update", "live", "video",
             "analysis", "opinion", "science", "health", "travel", "culture", "tech", "money", "election"]

    def phrase(n: int) -> str:
        return " ".join(rng.choice(words) for _ in range(n)).capitalize()

    parts = ["<!DOCTYPE html><html><head><title>Portal</title><meta charset='utf-8'>"
             "<link rel='stylesheet' href='/s.css'><script>var x = 1;</script></head><body>",
             "<div id='top'><ul class='nav'>" + "".join(f"<li><a href='/s/{i}'>{phrase(1)}</a></li>"
                                                        for i in range(40)) + "</ul></div><div id='main'>"]
    size = sum(map(len, parts))
    n = 0
    while size < kb * 1024:
        n += 1
        block = (f"<div class='story' id='s{n}'><h3><a href='/a/{n}.html'>{phrase(6)}</a></h3>"
                 f"<img src='/i/{n}.jpg' alt='{phrase(2)}' width='120' height='80'>"
                 f"<p class='lede'>{phrase(14)} <b>{phrase(2)}</b> {phrase(8)}.</p>"
                 f"<ul class='related'>" + "".join(f"<li><a href='/a/{n}-{k}.html'>{phrase(4)}</a></li>"
                                                  for k in range(3)) + "</ul>"
                 f"<table class='scores'><tr><td>{rng.randint(0, 9)}</td><td>{phrase(1)}</td></tr></table></div>")
        parts.append(block)
        size += len(block)
    parts.append("</div><div id='footer'><p>Copyright</p></div></body></html>")
    return "".join(parts).encode()



def measure(name: str, pages: list[bytes]) -> dict[str, float]:
    digests = [D.encode(p) for p in pages]
    blobs = [D.dumps(d) for d in digests]
    trees = [html.document_fromstring(p) for p in pages]
    parse = sum(best_ms(lambda p=p: html.document_fromstring(p), 30) for p in pages)
    encode = sum(best_ms(lambda p=p: D.encode(p), 10) for p in pages)
    loads = sum(best_ms(lambda b=b: D.loads(b), 30) for b in blobs)
    loads_all = sum(best_ms(lambda b=b: (lambda d: (d.CL, d.AL))(D.loads(b)), 30) for b in blobs)
    # every node's label in document order (a digest's child counts need no work: they are ST)
    walk_lxml = sum(best_ms(lambda t=t: [el.tag for el in t.iter()], 30) for t in trees)
    walk_digest = sum(best_ms(lambda d=d: list(map(d.TL.__getitem__, d.TM)), 30) for d in digests)
    raw_html, raw_digest = sum(map(len, pages)), sum(map(len, blobs))
    z_html = sum(len(zlib.compress(p, 6)) for p in pages)
    z_digest = sum(len(zlib.compress(b, 6)) for b in blobs)
    nodes = sum(d.size for d in digests)
    print(f"\n{name}: {len(pages)} page(s), {raw_html / 1024:.0f} KB of HTML, {nodes} nodes")
    print(f"  encode          {encode:8.3f} ms   vs lxml parse {parse:7.3f} ms: {encode / parse:5.2f}x the time")
    print(f"  loads structure {loads:8.3f} ms   vs lxml parse {parse:7.3f} ms: {parse / loads:5.1f}x faster")
    print(f"  loads all       {loads_all:8.3f} ms   vs lxml parse {parse:7.3f} ms: {parse / loads_all:5.1f}x faster")
    print(f"  traversal       {walk_digest:8.3f} ms   vs lxml iter  {walk_lxml:7.3f} ms: "
          f"{walk_lxml / walk_digest:5.1f}x faster")
    print(f"  size            digest {raw_digest / raw_html:5.1%} of the HTML; "
          f"zlib: digest {z_digest / 1024:.1f} KB, HTML {z_html / 1024:.1f} KB ({z_digest / z_html:5.1%})")
    return {"loads": parse / loads, "loads_all": parse / loads_all, "walk": walk_lxml / walk_digest}


def main() -> int:
    import site_server

    rng = random.Random(4)
    site = site_server.GeneratedSite(site_server.SiteSpec())
    sets = {
        "portal page (generated, node-heavy)": [portal(rng)],
        "crawl-site pages (generated, text-heavy)": [site.body(p) for p in site.paths()[1:11]],
        "demo site pages (small)": [p.read_bytes() for p in sorted((ROOT / "webrace/demo/site").rglob("*.html"))],
    }
    results = {name: measure(name, pages) for name, pages in sets.items()}
    portal_result = results["portal page (generated, node-heavy)"]
    ok = portal_result["loads"] >= 10 and portal_result["walk"] >= 10
    print(f"\n  {'PASS' if ok else 'FAIL'}  on the portal page: loads {portal_result['loads']:.1f}x and traversal "
          f"{portal_result['walk']:.1f}x faster than lxml (goals 10x)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
