"""Benchmark: XPack against today's general compressors, on XML and XHTML that Debian ships
(seed 004 chapter IV), in one run.

Document classes (each skipped with a message when its package is not installed;
``apt-get install iso-codes xkb-data shared-mime-info libxslt1-dev``):

- attribute-heavy: iso-codes' /usr/share/xml/iso-codes/iso_639-3.xml
- markup-heavy: xkb-data's /usr/share/X11/xkb/rules/evdev.xml
- text-heavy: shared-mime-info's /usr/share/mime/packages/freedesktop.org.xml
- XHTML: libxslt1-dev's gtk-doc pages, /usr/share/doc/libxslt1-dev/gtk-doc/html/libxslt/*.html

For each: compressed size of XPack against gzip -9, bzip2 -9, xz -9e, zstd -19 and brotli -11;
pack and unpack speed; node count and tag list read from the packed file against
decompressing the best-compressed file and parsing it with lxml (goal: at least 100x); a
``//name`` query and a three-step path against decompress + lxml parse + XPath (goal: at
least 3x). Goal on size: no larger than the best general compressor on markup- and
attribute-heavy documents, within 5% on text-heavy ones: those where text (character data
other than whitespace-only text nodes) is at least 30% of the bytes, measured here (the
shared-mime-info file and the gtk-doc pages are; iso-codes and xkb-data are not). Prints the
table and writes ``bench/xpack.png``.

    pip install -e '.[bench]' && python bench/xpack.py
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import sys
from collections import Counter
from pathlib import Path

from lxml import etree

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from timing import best_ms  # noqa: E402

from webrace import xpack  # noqa: E402
from webrace.xpack import operators as op  # noqa: E402

CLASSES = {
    "attribute-heavy (iso-codes iso_639-3.xml)": ["/usr/share/xml/iso-codes/iso_639-3.xml"],
    "markup-heavy (xkb-data evdev.xml)": ["/usr/share/X11/xkb/rules/evdev.xml"],
    "text-heavy (shared-mime-info freedesktop.org.xml)": ["/usr/share/mime/packages/freedesktop.org.xml"],
    "XHTML (libxslt1-dev gtk-doc pages)": sorted(
        str(p) for p in Path("/usr/share/doc/libxslt1-dev/gtk-doc/html/libxslt").glob("*.html")),
}


def compressors() -> dict[str, tuple]:
    found = {
        "gzip -9": (lambda b: gzip.compress(b, 9, mtime=0), gzip.decompress),
        "bzip2 -9": (lambda b: bz2.compress(b, 9), bz2.decompress),
        "xz -9e": (lambda b: lzma.compress(b, preset=9 | lzma.PRESET_EXTREME), lzma.decompress),
    }
    try:
        import zstandard

        found["zstd -19"] = (zstandard.ZstdCompressor(level=19).compress,
                             lambda b: zstandard.ZstdDecompressor().decompress(b))
    except ImportError:
        print("zstandard not installed: no zstd column (pip install -e '.[bench]')")
    try:
        import brotli

        found["brotli -11"] = (lambda b: brotli.compress(b, quality=11), brotli.decompress)
    except ImportError:
        print("brotli not installed: no brotli column (pip install -e '.[bench]')")
    return found



def queries_for(data: bytes) -> tuple[str, str, dict[str, str]]:
    """``//name`` for the most frequent element and a three-step path from the root (the
    root's default namespace, if any, gets the prefix ``d``, as lxml needs)."""
    root = op.parse(data).getroot()
    uri = root.tag[1:].split("}", 1)[0] if root.tag.startswith("{") else None
    ns = {"d": uri} if uri else {}

    def name(tag: str) -> str | None:
        if uri and tag.startswith(f"{{{uri}}}"):
            return "d:" + tag.split("}", 1)[1]
        return None if tag.startswith("{") else tag

    counts = Counter(name(el.tag) for el in root.iter() if isinstance(el.tag, str) and name(el.tag))
    common = counts.most_common(1)[0][0]
    path = None
    for child in root:
        if isinstance(child.tag, str) and name(child.tag):
            for grandchild in child:
                if isinstance(grandchild.tag, str) and name(grandchild.tag):
                    path = f"/{name(root.tag)}/{name(child.tag)}/{name(grandchild.tag)}"
                    break
        if path:
            break
    return f"//{common}", path or f"/{name(root.tag)}", ns


TEXT_HEAVY = 0.30
REPEAT = 7  # each timing is the best of this many single runs, the same for XPack and lxml


def text_share(docs: list[bytes]) -> float:
    """The share of the documents' bytes that is text (whitespace-only text nodes aside)."""
    text = 0
    for data in docs:
        packed = op.page_pack(op.parse(data))
        text += sum(len(value.encode()) for node, value in packed.contents.items()
                    if packed.names[node] == op.TEXT and value.strip())
    return text / sum(map(len, docs))


def measure(name: str, paths: list[str], codecs: dict[str, tuple]) -> dict | None:
    docs = [Path(p).read_bytes() for p in paths if Path(p).exists()]
    usable = []
    for data in docs:
        try:
            op.parse(data)
            usable.append(data)
        except xpack.XPackError:
            pass  # an HTML page that is not well-formed XML: not in the XHTML set
    if not usable:
        print(f"\n{name}: not installed here, skipped")
        return None
    raw = sum(map(len, usable))
    sizes = {label: sum(len(c(d)) for d in usable) for label, (c, _) in codecs.items()}
    packed = [xpack.pack(d) for d in usable]
    sizes["XPack"] = sum(map(len, packed))
    pack_ms = sum(best_ms(lambda d=d: xpack.pack(d), 1) for d in usable)
    unpack_ms = sum(best_ms(lambda p=p: xpack.unpack(p), 3) for p in packed)
    best_label = min((label for label in sizes if label != "XPack"), key=sizes.get)
    compress, decompress = codecs[best_label]
    stored = [compress(d) for d in usable]

    def lxml_stat(blob: bytes) -> tuple[int, set]:
        tree = etree.fromstring(decompress(blob), op.xml_parser())
        tags = {el.tag for el in tree.iter() if isinstance(el.tag, str)}
        return sum(1 for _ in tree.iter()), tags

    def xpack_stat(packed: bytes) -> tuple[int, list]:
        doc = xpack.PackedDocument(packed)
        return doc.nodes, doc.tags()

    stat_ours = sum(best_ms(lambda p=p: xpack_stat(p), REPEAT) for p in packed)
    stat_lxml = sum(best_ms(lambda b=b: lxml_stat(b), REPEAT) for b in stored)
    query_ours = query_lxml = 0.0
    for data, blob, p in zip(usable, stored, packed, strict=True):
        descendant, path, ns = queries_for(data)
        for expression in (descendant, path):
            ours = xpack.PackedDocument(p).query(expression, ns)
            theirs = etree.fromstring(decompress(blob), op.xml_parser()).xpath(expression, namespaces=ns)
            assert len(ours) == len(theirs), (expression, len(ours), len(theirs))
            query_ours += best_ms(lambda p=p, e=expression, ns=ns: xpack.PackedDocument(p).query(e, ns), REPEAT)
            query_lxml += best_ms(lambda blob=blob, e=expression, ns=ns: etree.fromstring(
                decompress(blob), op.xml_parser()).xpath(e, namespaces=ns), REPEAT)
    share = text_share(usable)
    print(f"\n{name}: {len(usable)} document(s), {raw / 1024:.0f} KB, {share:.0%} text"
          f"{' (text-heavy)' if share >= TEXT_HEAVY else ''}")
    for label, size in sorted(sizes.items(), key=lambda item: item[1]):
        print(f"  {label:<11} {size:>10,} bytes  {size / raw:6.1%} of the XML  "
              f"{size / sizes[best_label]:6.1%} of {best_label}")
    print(f"  pack {raw / 1048576 / (pack_ms / 1000):.2f} MB/s, unpack {raw / 1048576 / (unpack_ms / 1000):.2f} MB/s")
    print(f"  node count + tags: XPack {stat_ours:.3f} ms vs {best_label} + lxml {stat_lxml:.1f} ms: "
          f"{stat_lxml / stat_ours:,.0f}x")
    print(f"  //name and a three-step path: XPack {query_ours:.1f} ms vs {best_label} + lxml parse + XPath "
          f"{query_lxml:.1f} ms: {query_lxml / query_ours:.1f}x")
    return {"sizes": sizes, "best": best_label, "stat": stat_lxml / stat_ours, "query": query_lxml / query_ours,
            "text_heavy": share >= TEXT_HEAVY}


def main() -> int:
    codecs = compressors()
    results = {name: r for name, paths in CLASSES.items() if (r := measure(name, paths, codecs))}
    if not results:
        print("no corpus document found")
        return 1
    ok = True
    for name, r in results.items():
        ratio = r["sizes"]["XPack"] / r["sizes"][r["best"]]
        size_ok = ratio <= (1.05 if r["text_heavy"] else 1.0)
        ok &= size_ok and r["stat"] >= 100 and r["query"] >= 3
        goal = "within 5%" if r["text_heavy"] else "no larger"
        print(f"  {'PASS' if size_ok else 'FAIL'} size {ratio:.1%} of {r['best']} (goal: {goal}); "
              f"{'PASS' if r['stat'] >= 100 else 'FAIL'} stat {r['stat']:,.0f}x; "
              f"{'PASS' if r['query'] >= 3 else 'FAIL'} queries {r['query']:.1f}x   {name}")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        labels = list(next(iter(results.values()))["sizes"])
        fig, ax = plt.subplots(figsize=(9, 4.8))
        width = 0.8 / len(labels)
        for n, label in enumerate(labels):
            values = [r["sizes"][label] / r["sizes"]["xz -9e"] for r in results.values()]
            ax.bar([i + n * width for i in range(len(results))], values, width, label=label)
        ax.set_xticks([i + 0.4 - width / 2 for i in range(len(results))])
        ax.set_xticklabels([name.split(" (")[0] for name in results])
        ax.set_ylabel("compressed size / xz -9e")
        ax.axhline(1.0, color="grey", linewidth=0.8)
        ax.legend(fontsize=8)
        ax.set_title("XPack and general compressors on Debian-shipped XML and XHTML")
        fig.tight_layout()
        fig.savefig(ROOT / "bench" / "xpack.png", dpi=110)
        print(f"wrote {ROOT / 'bench' / 'xpack.png'}")
    except ImportError:
        print("matplotlib not installed: no PNG")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
