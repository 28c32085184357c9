"""XPack: round trips under C14N, each operator alone, node count and tags from the packed
file, malformed and hostile input, corrupt packed files."""

from __future__ import annotations

import random
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from webrace import xpack
from webrace.xpack import operators as op

NAMES = ["a", "b", "item", "title", "x:link", "y:node", "data-row"]
TEXT = st.text(alphabet=st.sampled_from("ab \n\t<>&\"'é€;]"), max_size=10)


def esc(text: str, quote: bool = False) -> str:
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return text.replace('"', "&quot;") if quote else text


@st.composite
def element(draw, depth=0):
    name = draw(st.sampled_from(NAMES))
    attrs = draw(st.dictionaries(st.sampled_from(["id", "href", "x:ref", "class", "y:val"]), TEXT, max_size=3))
    attr_text = "".join(f' {k}="{esc(v, True)}"' for k, v in attrs.items())
    ns = ' xmlns:x="urn:x"' if draw(st.booleans()) and depth == 0 else ""
    parts = []
    for _ in range(draw(st.integers(0, 4 if depth < 4 else 0))):
        kind = draw(st.sampled_from(["el", "el", "text", "cdata", "comment", "pi", "entity"]))
        if kind == "el":
            parts.append(draw(element(depth + 1)))
        elif kind == "text":
            parts.append(esc(draw(TEXT)))
        elif kind == "cdata":
            parts.append(f"<![CDATA[{draw(TEXT).replace(']]>', '')}]]>")
        elif kind == "comment":
            parts.append(f"<!--{draw(TEXT).replace('-', '')}-->")
        elif kind == "pi":
            parts.append(f"<?proc {esc(draw(TEXT)).replace('?', '')}?>")
        else:
            parts.append(draw(st.sampled_from(["&amp;", "&lt;", "&#233;", "&#x20AC;", "&e;"])))
    return f"<{name}{ns}{attr_text}>{''.join(parts)}</{name}>"


def document(body: str) -> bytes:
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE root [<!ENTITY e "entity text">]>\n<!--before-->'
            f'<root xmlns="urn:default" xmlns:x="urn:x" xmlns:y="urn:y">{body}</root>\n<?after data?>').encode()


LAYOUTS = pytest.mark.parametrize("interleaved", [True, False], ids=["interleaved", "columnar"])


def round_trip(data: bytes, interleaved: bool) -> tuple[bytes, bytes]:
    """(C14N of unpack(pack(data)), C14N of data), values in the given layout."""
    return xpack.canonical(xpack.unpack(xpack.pack(data, interleaved=interleaved))), xpack.canonical(data)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(element(), max_size=4), st.booleans())
def test_unpack_of_pack_is_the_same_document_under_c14n(elements, interleaved):
    after, before = round_trip(document("".join(elements)), interleaved)
    assert after == before


EDGE_CASES = {
    "namespaces": b'<r xmlns="urn:a" xmlns:p="urn:p"><p:x p:k="1"><y xmlns="urn:b" xmlns:q="urn:q"/></p:x></r>',
    "unused declaration": b'<r xmlns:unused="urn:u"><a/></r>',
    "attribute order": b'<r z="1" a="2" m="3"><x b="&amp;&lt;&quot;" a="\'"/></r>',
    "comments and PIs": b"<!--a--><?p1 x?><r><!--in--><?p2?>t<!----></r><!--z--><?p3 y z?>",
    "CDATA": b"<r><![CDATA[<not> & markup]]>after<![CDATA[]]></r>",
    "entities": b'<!DOCTYPE r [<!ENTITY a "A&amp;B"><!ENTITY b "&a;-&a;">]><r t="&a;">&b; &#x1F600;</r>',
    "mixed content": b"<p>one <b>two</b> three <i>four <u>five</u></i> six</p>",
    "whitespace": b"<r>\n  <a>  x  </a>\n\t<b/>\r\n  </r>",
    "empty": b"<r/>",
    "deep": b"<r>" + b"<d>" * 200 + b"x" + b"</d>" * 200 + b"</r>",
    "wide": b"<r>" + b"".join(b'<i n="%d" href="http://example.org/p/%d">%d</i>' % (n, n % 7, n) for n in range(3000))
            + b"</r>",
    "unicode": "<r ü='ä'>日本語 <ß/>\u00a0</r>".encode(),
}


@LAYOUTS
@pytest.mark.parametrize("name", EDGE_CASES)
def test_round_trip_on_edge_cases(name, interleaved):
    after, before = round_trip(EDGE_CASES[name], interleaved)
    assert after == before


def test_each_operator_is_reversible_alone():
    tree = op.parse(EDGE_CASES["namespaces"])
    packed = op.page_pack(tree)
    from lxml import etree

    assert etree.tostring(op.page_unpack(packed), method="c14n") == etree.tostring(tree, method="c14n")
    wide = op.page_pack(op.parse(EDGE_CASES["wide"]))
    for structure in (packed.structure, wide.structure, op.page_pack(op.parse(EDGE_CASES["deep"])).structure):
        assert op.path_unpack(op.path_pack(structure)) == list(structure)
    names, ids = op.name_pack(wide.names)
    assert op.name_unpack(names, ids) == wide.names and len(names) < len(wide.names)
    urls = [f"http://example.org/{random.Random(n).choice('abc')}/{n % 5}" for n in range(200)]
    data, count, ids = op.url_pack(urls)
    assert op.url_unpack(data, count, ids) == urls and count == 15
    pairs = [pair for attrs in wide.attributes.values() for pair in attrs]
    assert op.attribute_unpack(*op.attribute_pack(pairs)) == pairs
    texts, ids = op.content_pack(["x", "y", "x", "x"])
    assert texts == ["x", "y"] and op.content_unpack(texts, ids) == ["x", "y", "x", "x"]


def test_node_count_and_tags_come_from_the_packed_file():
    packed = xpack.pack(EDGE_CASES["wide"])
    info = xpack.stat(packed)
    assert info["nodes"] == 1 + 1 + 3000 * 2  # document, root, 3,000 items with a text each
    assert info["tags"] == ["r", "i"]
    doc = xpack.PackedDocument(packed)
    assert doc.tags() == ["r", "i"] and doc.nodes == info["nodes"]
    assert not doc.decompressed  # both from the header
    assert set(info["containers"]) == {"labels", "structure", "namespaces", "content", "attrvalues"}


@pytest.mark.parametrize(("data", "message"), [
    (b"<r><a></r>", "line 1, column"),
    (b"<r>", "line 1"),
    (b"", "not well-formed"),
    (b'<!DOCTYPE r [<!ENTITY x SYSTEM "file:///etc/passwd">]><r>&x;</r>', "not well-formed"),
    (b'<!DOCTYPE l [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">'
     b'<!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;"><!ENTITY d "&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;">'
     b'<!ENTITY e "&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;"><!ENTITY f "&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;">'
     b'<!ENTITY g "&f;&f;&f;&f;&f;&f;&f;&f;&f;&f;"><!ENTITY h "&g;&g;&g;&g;&g;&g;&g;&g;&g;&g;">]><l>&h;</l>',
     "amplification"),
])
def test_malformed_and_hostile_xml_is_refused_clearly(data, message):
    with pytest.raises(xpack.XPackError, match=message):
        xpack.pack(data)


@LAYOUTS
def test_corrupt_or_truncated_packed_files_are_refused(interleaved):
    packed = xpack.pack(EDGE_CASES["wide"], interleaved=interleaved)
    for bad in (packed[:3], packed[:40], packed[:-1], b"XXXX" + packed[4:], packed + b"x"):
        with pytest.raises(xpack.XPackError):
            xpack.unpack(bad)
    rng = random.Random(11)
    for _ in range(300):
        flipped = bytearray(packed)
        flipped[rng.randrange(len(flipped))] ^= 1 << rng.randrange(8)
        with pytest.raises(xpack.XPackError):
            xpack.unpack(bytes(flipped))


CATALOG = b"""<?xml version="1.0"?>
<catalog xmlns:dc="http://purl.org/dc/elements/1.1/" version="2">
  <!-- books -->
  <book id="b1" lang="en"><dc:title>Alpha</dc:title><price>10</price><tag>x</tag><tag>y</tag></book>
  <book id="b2" lang="fr"><dc:title>Beta</dc:title><price cur="EUR">12</price><note>n<b>bold</b>tail</note></book>
  <shelf><book id="b3"><dc:title>Gamma</dc:title><tag>z</tag></book><book id="b4" lang="en"/></shelf>
  <magazine id="m1"><dc:title>Delta</dc:title></magazine>
</catalog>"""

QUERIES = [
    "/catalog", "/catalog/book", "//book", "//book[1]", "//book[2]", "/catalog/book[2]", "//book[@lang]",
    "//book[@lang='en']", '//book[@lang="fr"]/price', "//book/@id", "//@id", "//@lang", "/catalog/*",
    "//*", "//*[1]", "//dc:title", "//dc:title/text()", "//book/dc:title/text()", "//text()", "/catalog/shelf/book",
    "/catalog//book", "/catalog/shelf//dc:title", "//note/text()", "//note/b/text()", "//book[@id='b3']/tag",
    "//book[@lang='en'][1]", "//book[1][@lang='en']", "//tag[2]", "//price/@cur", "/catalog/@version",
    "//missing", "//book[9]", "//shelf/book[2]/@id", "//*/@id",
]


def lxml_answer(data: bytes, expression: str) -> list:
    from lxml import etree

    tree = op.parse(data)
    elements: list = []
    op.page_pack(tree, elements)
    index = {id(el): i for i, el in enumerate(elements) if el is not None}
    found = tree.xpath(expression, namespaces={"dc": "http://purl.org/dc/elements/1.1/"})
    answer = []
    for item in found:
        if isinstance(item, etree._Element):
            answer.append(("element", index[id(item)]))
        elif getattr(item, "is_attribute", False):
            answer.append(("attribute", str(item)))
        else:
            answer.append(("text", str(item)))
    return answer


@LAYOUTS
@pytest.mark.parametrize("expression", QUERIES)
def test_queries_on_the_packed_file_equal_lxmls(expression, interleaved):
    doc = xpack.PackedDocument(xpack.pack(CATALOG, interleaved=interleaved))
    assert doc.query(expression) == lxml_answer(CATALOG, expression)


@LAYOUTS
def test_queries_decompress_only_what_they_need(interleaved):
    doc = xpack.PackedDocument(xpack.pack(EDGE_CASES["wide"], interleaved=interleaved))
    assert len(doc.query("//i")) == 3000 and len(doc.query("//i[@n]")) == 3000
    assert not doc.decompressed & {"content", "attrvalues"}
    assert doc.query("//i[@n='7']/@href") == [("attribute", "http://example.org/p/0")]
    assert "content" not in doc.decompressed or interleaved  # columnar: attribute values alone


PLAIN_NS = {"d": "urn:default", "x": "urn:x", "y": "urn:y"}
STEP_NAMES = ["d:a", "d:b", "d:item", "d:title", "x:link", "y:node", "d:data-row", "*"]


def lxml_elements(data: bytes, expression: str) -> list:
    tree = op.parse(data)
    elements: list = []
    op.page_pack(tree, elements)
    index = {id(el): i for i, el in enumerate(elements) if el is not None}
    return [("element", index[id(el)]) for el in tree.xpath(expression, namespaces=PLAIN_NS)]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(element(), max_size=4), st.lists(st.sampled_from(STEP_NAMES), min_size=1, max_size=4), st.booleans())
def test_plain_paths_over_the_token_stream_equal_lxmls(elements, steps, descendant):
    """Name tests and * down child axes (/d:root/d:a/x:link) or one // step are answered
    from the token stream alone (Skeleton); same nodes as lxml on generated documents."""
    data = document("".join(elements))
    expression = f"//{steps[0]}" if descendant else "/d:root/" + "/".join(steps)
    doc = xpack.PackedDocument(xpack.pack(data))
    assert doc.query(expression, PLAIN_NS) == lxml_elements(data, expression)
    assert "tree" not in doc._cache  # the label dictionary and structure only, as bytes and tokens


def test_plain_paths_with_wide_token_streams_and_many_labels_equal_lxmls():
    # 300 element names: tokens no longer fit a byte; a name with several labels (attributes vary)
    items = "".join(f"<n{k}><n{(k * 7) % 300} a='1'/><m/></n{k}>" for k in range(300))
    data = f"<r>{items}<m b='2'><m/></m></r>".encode()
    doc = xpack.PackedDocument(xpack.pack(data))
    assert doc.skeleton().tokens.dtype.itemsize == 2
    for expression in ("//n150", "/r/n7", "/r/n7/n49", "/r/*/m", "//m", "/r/m/m", "/r/*/*", "//*", "/r/n299/n293"):
        assert doc.query(expression) == lxml_elements(data, expression), expression


@pytest.mark.parametrize("tags", [
    ["html", "head", "body", "p"],
    ["{http://www.w3.org/1999/xhtml}html", "{http://www.w3.org/1999/xhtml}p"],
    ["root", "{urn:x}link", "{urn:x}a", "b", "{http://www.w3.org/1999/xhtml}p", "not-a-common-name", "{urn:e}ü"],
    ["r"],
])
def test_the_tag_list_in_the_header_is_the_documents_tags_in_order_of_first_use(tags):
    from webrace.xpack import format as fmt

    assert fmt._read_tag_list(fmt._tag_list(tags)) == tags
    def tag(name: str, body: str = "") -> str:
        uri, _, local = name[1:].rpartition("}") if name.startswith("{") else ("", "", name)
        return f'<{local} xmlns="{uri}">{body}</{local}>' if uri else f"<{local}>{body}</{local}>"

    data = tag(tags[0], "".join(tag(t) for t in tags[1:])).encode()
    doc = xpack.PackedDocument(xpack.pack(data))
    assert doc.tags() == tags and not doc.decompressed
    assert doc.tree().tags() == tags  # the label dictionary agrees


def without_tag_list(packed: bytes) -> bytes:
    """The same file as XPack wrote it before the header carried the tag list."""
    import struct
    import zlib

    from webrace.xpack import format as fmt

    _, nodes, flags, count, blocks = fmt._HEAD.unpack_from(packed)
    at = fmt._HEAD.size + fmt._table(flags & 0x3F, count, blocks).size
    size, start = fmt._read_varint(packed, at)
    head = bytearray(packed[:at])
    head[8] = flags & ~fmt.TAG_LIST
    return bytes(head) + struct.pack("<I", zlib.crc32(head)) + packed[start + size + 4:]


def test_files_without_the_tag_list_are_still_read():
    packed = xpack.pack(CATALOG)
    old = without_tag_list(packed)
    assert len(old) < len(packed)
    doc = xpack.PackedDocument(old)
    assert doc.tags() == xpack.PackedDocument(packed).tags() == ["catalog", "book", "{http://purl.org/dc/elements/1.1/}title",
                                                                "price", "tag", "note", "b", "shelf", "magazine"]
    assert doc.query("/catalog/book") == lxml_answer(CATALOG, "/catalog/book")
    assert xpack.canonical(xpack.unpack(old)) == xpack.canonical(CATALOG)


@LAYOUTS
def test_forged_containers_with_valid_checksums_are_refused_or_answered_never_a_crash(interleaved):
    """Bit flips are caught by the CRCs; here the containers themselves are wrong (bytes
    changed, dropped or repeated before compression, checksums recomputed), so only the
    structural checks stand between a forged file and the readers: plain paths, the general
    evaluator, values and unpack must raise XPackError or answer, never anything else."""
    from webrace.xpack import format as fmt

    source = xpack.PackedDocument(xpack.pack(CATALOG, interleaved=interleaved))
    raw = {name: source.container(name) for name in fmt.CONTAINERS}
    rng = random.Random(5)
    refused = 0
    for n in range(250):
        name = rng.choice(["labels", "structure", "structure", "namespaces", "content"])
        data = bytearray(raw[name])
        if not data:
            continue
        at = rng.randrange(len(data))
        kind = n % 3
        if kind == 0:
            data[at] = rng.randrange(256)
        elif kind == 1:
            del data[at]
        else:
            data.insert(at, data[at])
        forged = fmt.assemble({**raw, name: bytes(data)}, source.nodes, interleaved, source.tags())
        for ask in (lambda d: d.query("/catalog/book"), lambda d: d.query("//dc:title"), lambda d: d.query("//*"),
                    lambda d: d.query("//book[@lang='en']/@id"), lambda d: d.query("//text()"),
                    lambda d: xpack.unpack(d.data)):
            try:
                ask(xpack.PackedDocument(forged))
            except xpack.XPackError:
                refused += 1
    assert refused > 250  # most forgeries are caught; none raised anything but XPackError


def test_a_tag_list_that_disagrees_with_the_label_dictionary_is_refused():
    import struct
    import zlib

    from webrace.xpack import format as fmt

    packed = xpack.pack(b"<r><a/><b/></r>")
    tags = fmt._tag_list(["r", "a", "p"])  # same length as r, a, b
    at = packed.index(fmt._tag_list(["r", "a", "b"]))
    head = packed[:at] + tags
    forged = head + struct.pack("<I", zlib.crc32(head)) + packed[at + len(tags) + 4:]
    doc = xpack.PackedDocument(forged)
    assert doc.tags() == ["r", "a", "p"]  # the header alone cannot tell
    with pytest.raises(xpack.XPackError, match="disagree"):
        xpack.PackedDocument(forged).query("//r/text()")


@pytest.mark.parametrize(("expression", "message"), [
    ("count(//a)", "only absolute paths"), ("//a[last()]", "not supported"), ("//a/..", "not supported"),
    ("//a[b]", "not supported"), ("//zz:a", "prefix 'zz' is not declared"), ("//text()/a", "must be the last"),
    ("//a | //b", "not supported"), ("/", "empty step"),
])
def test_queries_outside_the_subset_are_refused_clearly(expression, message):
    doc = xpack.PackedDocument(xpack.pack(CATALOG))
    with pytest.raises(xpack.XPackError, match=re.escape(message)):
        doc.query(expression)


def xpack_cli(tmp_path, *args, scrapy: bool = False):
    import os
    import subprocess
    import sys

    command = [sys.executable, "-m", "scrapy", "xpack", *args] if scrapy else \
        [sys.executable, "-m", "webrace.xpack.cli", *args]
    return subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "SCRAPY_SETTINGS_MODULE": "webrace.settings"})


@pytest.mark.parametrize("scrapy", [False, True], ids=["xpack", "scrapy xpack"])
def test_commands_pack_unpack_stat_and_query(tmp_path, scrapy):
    import json

    (tmp_path / "catalog.xml").write_bytes(CATALOG)
    assert xpack_cli(tmp_path, "pack", "catalog.xml", "catalog.xpk", scrapy=scrapy).returncode == 0
    assert xpack_cli(tmp_path, "unpack", "catalog.xpk", "again.xml", scrapy=scrapy).returncode == 0
    assert xpack.canonical((tmp_path / "again.xml").read_bytes()) == xpack.canonical(CATALOG)
    info = json.loads(xpack_cli(tmp_path, "stat", "catalog.xpk", "--json", scrapy=scrapy).stdout)
    assert set(info) == {"nodes", "tags", "containers"} and "book" in info["tags"]
    assert xpack_cli(tmp_path, "query", "catalog.xpk", "//book", "--count", scrapy=scrapy).stdout.strip() == "4"
    titles = xpack_cli(tmp_path, "query", "catalog.xpk", "//dc:title/text()", scrapy=scrapy).stdout.split()
    assert titles == ["Alpha", "Beta", "Gamma", "Delta"]


def test_command_errors_leave_no_output_file(tmp_path):
    (tmp_path / "bad.xml").write_bytes(b"<r>\n  <a></r>")
    done = xpack_cli(tmp_path, "pack", "bad.xml", "bad.xpk")
    assert done.returncode == 1 and "line 2, column" in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.xml"]
    (tmp_path / "junk.xpk").write_bytes(b"XPK1 not really")
    done = xpack_cli(tmp_path, "unpack", "junk.xpk", "out.xml")
    assert done.returncode == 1 and done.stderr.startswith("error:") and not (tmp_path / "out.xml").exists()
    refused = xpack_cli(tmp_path, "query", "junk.xpk", "//a")
    assert refused.returncode == 1 and "Traceback" not in refused.stderr


def test_queries_name_default_namespace_elements_with_given_prefixes():
    page = b'<html xmlns="http://www.w3.org/1999/xhtml"><body><p>a</p><p>b</p></body></html>'
    doc = xpack.PackedDocument(xpack.pack(page))
    ns = {"h": "http://www.w3.org/1999/xhtml"}
    assert [v for _, v in doc.query("//h:p/text()", ns)] == ["a", "b"] and doc.query("//p") == []


def test_store_query_answers_from_the_crawled_xpack_encoded_version(site, project):
    from conftest import urd

    feed = (b'<?xml version="1.0"?><rss version="2.0"><channel>'
            + b"".join(b'<item id="%d"><title>Story %d</title></item>' % (n, n) for n in range(5))
            + b"</channel></rss>")
    site.add("/feed.xml", feed, content_type="application/rss+xml")
    site.add("/page.html", b"<html><body><p>one</p><p>two</p></body></html>")
    project.add_urds(urd("feed", "ann", site.url("/feed.xml")), urd("page", "ann", site.url("/page.html")))
    assert project.crawl(WEBRACE_STORE_XPACK=True).returncode == 0
    titles = project.scrapy("store", "query", site.url("/feed.xml"), "//item/title/text()")
    assert titles.returncode == 0 and titles.stdout.splitlines() == [f"Story {n}" for n in range(5)]
    assert "note:" not in titles.stderr  # answered from the XPack-encoded version
    assert project.scrapy("store", "query", site.url("/feed.xml"), "//item[@id='3']", "--count").stdout == "1\n"
    html = project.scrapy("store", "query", site.url("/page.html"), "//p/text()")  # stored zlib: decompressed
    assert html.stdout.splitlines() == ["one", "two"] and "not stored XPack-encoded" in html.stderr
    refused = project.scrapy("store", "query", site.url("/feed.xml"), "//item[last()]")
    assert refused.returncode == 1 and "not supported" in refused.stderr and "Traceback" not in refused.stderr
    missing = project.scrapy("store", "query", site.url("/none.xml"), "//a")
    assert missing.returncode == 1 and "not found" in missing.stderr


def test_store_query_that_matches_nothing_in_a_default_namespace_hints_at_ns(site, project):
    from conftest import urd

    site.add("/atom.xml", b'<feed xmlns="http://www.w3.org/2005/Atom"><entry><title>t</title></entry></feed>',
             content_type="application/atom+xml")
    project.add_urds(urd("atom", "ann", site.url("/atom.xml")))
    assert project.crawl(WEBRACE_STORE_XPACK=True).returncode == 0
    plain = project.scrapy("store", "query", site.url("/atom.xml"), "//entry", "--count")
    assert plain.stdout == "0\n" and "--ns" in plain.stderr and "http://www.w3.org/2005/Atom" in plain.stderr
    bound = project.scrapy("store", "query", site.url("/atom.xml"), "//a:entry", "--count",
                           "--ns", "a=http://www.w3.org/2005/Atom")
    assert bound.stdout == "1\n" and "hint" not in bound.stderr


MIME = "http://www.freedesktop.org/standards/shared-mime-info"


@pytest.mark.parametrize(("expression", "declared", "given", "hinted"), [
    ("//mime-type", [(1, "", MIME)], {}, "mime-type"),
    ("/mime-info/mime-type[@type='a/b']/comment/text()", [(1, "", MIME)], {}, "mime-info"),
    ("//d:mime-type", [(1, "", MIME)], {"d": MIME}, None),  # bound: nothing to say
    ("//*/@type", [(1, "", MIME)], {}, None),  # no name test
    ("//mime-type", [], {}, None),  # no default namespace: the name is simply absent
    ("//mime-type", [(1, "m", MIME)], {}, None),  # a prefixed namespace only
    ("//item", [(1, "", "")], {}, None),  # xmlns="" undeclares
    ("//a[last()]", [(1, "", MIME)], {}, None),  # unsupported: its own error says so
])
def test_namespace_hint_names_the_default_namespace_an_unprefixed_name_misses(expression, declared, given, hinted):
    from webrace.xpack.query import namespace_hint

    hint = namespace_hint(expression, declared, given)
    if hinted is None:
        assert hint is None
    else:
        assert f"default namespace {MIME}" in hint and f"--ns d={MIME} and write d:{hinted}" in hint


def test_query_that_matches_nothing_in_a_default_namespace_hints_at_ns(tmp_path):
    (tmp_path / "mime.xml").write_bytes(
        f'<?xml version="1.0"?><mime-info xmlns="{MIME}"><mime-type type="text/x-a"/></mime-info>'.encode())
    assert xpack_cli(tmp_path, "pack", "mime.xml", "mime.xpk").returncode == 0
    missed = xpack_cli(tmp_path, "query", "mime.xpk", "//mime-type", "--count")
    assert missed.returncode == 0 and missed.stdout == "0\n"
    (hint,) = missed.stderr.splitlines()
    assert hint.startswith("hint: ") and f"--ns d={MIME}" in hint
    bound = xpack_cli(tmp_path, "query", "mime.xpk", "//d:mime-type/@type", "--ns", f"d={MIME}", scrapy=True)
    assert bound.stdout == "text/x-a\n" and bound.stderr == ""
    absent = xpack_cli(tmp_path, "query", "mime.xpk", "//d:glob", "--ns", f"d={MIME}")
    assert absent.stdout == "" and absent.stderr == ""  # bound, and truly absent: no hint
