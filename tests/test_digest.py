"""Page Digest: round trips, the binary form, Sdiff (against xmldiff) and location masks."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lxml import etree

from webrace import digest as D

ROOT = Path(__file__).resolve().parent.parent
REAL_PAGES = sorted([*(ROOT / "webrace" / "demo" / "site").rglob("*.html"),
                     *(ROOT / "examples" / "university" / "site").glob("*.html")])

TAGS = ["div", "span", "p", "b", "i", "a", "ul", "li", "section", "em", "table", "tr", "td", "h2", "img", "br"]
TEXTS = st.text(alphabet=st.sampled_from("ab <>&\"'é\u00a0\n\t;#x"), max_size=12)


@st.composite
def markup(draw, depth=0):
    """Random HTML fragments: nested tags (some void), attributes with quotes and
    ampersands, text with markup characters, entities and comments."""
    parts = []
    for _ in range(draw(st.integers(0, 4 if depth < 4 else 0))):
        kind = draw(st.sampled_from(["tag", "tag", "text", "entity", "comment"]))
        if kind == "text":
            parts.append(draw(TEXTS).replace("<", "&lt;").replace("&", "&amp;") if draw(st.booleans()) else
                         draw(TEXTS))
        elif kind == "entity":
            parts.append(draw(st.sampled_from(["&amp;", "&lt;", "&nbsp;", "&#233;", "&copy;", "&bogus;"])))
        elif kind == "comment":
            parts.append(f"<!--{draw(TEXTS).replace('-', '')}-->")
        else:
            tag = draw(st.sampled_from(TAGS))
            attrs = "".join(f' {name}="{draw(TEXTS).replace(chr(34), "&quot;")}"'
                            for name in draw(st.lists(st.sampled_from(["id", "class", "href", "title", "data-x"]),
                                                      max_size=3, unique=True)))
            if tag in ("img", "br"):
                parts.append(f"<{tag}{attrs}>")
            else:
                closing = f"</{tag}>" if draw(st.integers(0, 9)) else ""  # sometimes left open
                parts.append(f"<{tag}{attrs}>{draw(markup(depth + 1))}{closing}")
    return "".join(parts)


def round_trip(page: bytes | str, kind: str = "html") -> tuple[list, list, D.PageDigest, D.PageDigest]:
    """(tree of decode(encode(page)), tree of page, loads(dumps(digest)), digest)."""
    d = D.encode(page, kind)
    return D.signature(D.parse(D.decode(d), kind)), D.signature(D.parse(page, kind)), D.loads(D.dumps(d)), d


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(markup())
def test_decode_of_encode_parses_to_the_same_tree(fragment):
    page = f"<html><head><title>t</title></head><body>{fragment}</body></html>"
    after, before, loaded, digest = round_trip(page)
    assert after == before and loaded == digest


@pytest.mark.parametrize("path", REAL_PAGES, ids=lambda p: p.name)
def test_round_trip_on_real_pages(path):
    after, before, loaded, digest = round_trip(path.read_bytes())
    assert after == before and loaded == digest


@pytest.mark.parametrize("page", [
    b"", b"   ", b"<p>unclosed <b>bold <i>both</p> after", b"<table><td>cell<tr><td>x</table>",
    b"\x00\x01binary\xff\xfe", b"<html><body>" + b"<div>" * 30000 + b"deep" + b"</div>" * 30000 + b"</body></html>",
    b"<html><body>" + b"<p>x</p>" * 20000 + b"</body></html>", b"<!DOCTYPE html><html><!--c--><body>x</body></html>",
    b"<p title='a&amp;b' data-x=\"&quot;q&quot;\">&lt;tag&gt; &amp; &nbsp;</p>",
])
def test_hostile_and_malformed_pages_encode_without_crashing(page):
    # repaired as lxml repairs it; no RecursionError at any depth
    after, before, loaded, digest = round_trip(page)
    assert after == before and loaded == digest


def test_xml_documents_and_their_errors():
    xml = b'<?xml version="1.0"?><r xmlns:x="urn:x"><x:a k="v">t<!--c--><?pi d?></x:a><b/>tail</r>'
    after, before, loaded, digest = round_trip(xml, "xml")
    assert after == before and loaded == digest
    with pytest.raises(D.DigestError, match="line 1, column"):
        D.encode(b"<r><a></r>", "xml")


def test_containers_follow_the_seed():
    d = D.encode(b"<html><body><table><tr><td><img src=a.png></td><td>text</td></tr></table></body></html>")
    labels = [d.label(i) for i in range(d.size)]
    assert labels == ["html", "body", "table", "tr", "td", "img", "td", "#text"]
    assert list(d.ST) == [1, 1, 1, 2, 1, 0, 1, 0]  # children per node, depth first
    assert d.TL == ["html", "body", "table", "tr", "td", "img", "#text"]  # each label once
    assert d.AL == [(("src", "a.png"),)] and d.attrs(5) == (("src", "a.png"),) and d.CL == ["text"]


@settings(max_examples=100, deadline=None)
@given(markup())
def test_loads_of_dumps_is_the_same_digest(fragment):
    d = D.encode(f"<html><body>{fragment}</body></html>")
    assert D.loads(D.dumps(d)) == d


def test_corrupt_or_truncated_digests_are_refused():
    data = D.dumps(D.encode((ROOT / "examples" / "university" / "site" / "index.html").read_bytes()))
    def load_all(raw: bytes) -> None:
        d = D.loads(raw)
        d.AL, d.CL  # attributes and content are read (and checked) when first used  # noqa: B018

    for bad in (data[:10], data[:-1], data[:len(data) // 2], b"XXXX" + data[4:], b""):
        with pytest.raises(D.DigestError):
            load_all(bad)
    rng = random.Random(7)
    for _ in range(300):
        flipped = bytearray(data)
        flipped[rng.randrange(len(flipped))] ^= 1 << rng.randrange(8)
        with pytest.raises(D.DigestError):
            load_all(bytes(flipped))


PAGE = b"""<html><body><div id="news"><p>Old news</p><a href="/x">more</a><img src="a.png"></div>
<div id="ads"><p>ad 1</p></div><p class="foot">footer</p></body></html>"""


def changed(page_a: bytes, page_b: bytes, facet: str = "all", where: str | None = None) -> bool:
    new = D.encode(page_b)
    return D.sdiff(D.encode(page_a), new, facet, D.mask(new, where)).changed


def test_each_facet_sees_its_change_and_not_the_others():
    text = PAGE.replace(b"Old news", b"New news")
    link = PAGE.replace(b'href="/x"', b'href="/y"')
    image = PAGE.replace(b'src="a.png"', b'src="b.png"')
    attribute = PAGE.replace(b'class="foot"', b'class="bottom"')
    structure = PAGE.replace(b"<p>ad 1</p>", b"<p>ad 1</p><p>ad 2</p>")
    expected = {  # facet -> pages it must see as changed
        "content": {text, structure}, "links": {link}, "images": {image},
        "attributes": {link, image, attribute}, "structure": {structure},
        "all": {text, link, image, attribute, structure},
    }
    for facet, pages in expected.items():
        for page in (text, link, image, attribute, structure):
            assert changed(PAGE, page, facet) == (page in pages), (facet, page)
    assert not changed(PAGE, PAGE, "all")


def test_location_masks_keep_changes_inside_the_region():
    ads = PAGE.replace(b"ad 1", b"ad 2")
    assert changed(PAGE, ads, "all") and not changed(PAGE, ads, "all", "css:#news")
    assert changed(PAGE, ads, "content", "xpath://div[@id='ads']")
    news = D.encode(PAGE.replace(b"Old news", b"New news"))
    ann = D.sdiff(D.encode(PAGE), news, "all", D.mask(news, "css:#news"))
    marked = ann.nodes()
    assert [news.content(i) for i in marked] == ["New news"]
    assert ann.codes[0] & D.BELOW  # the root knows something changed below it


def test_edit_script_for_the_changed_subtrees():
    a, b = D.encode(PAGE), D.encode(PAGE.replace(b"<p>ad 1</p>", b"<p>ad 1</p><p>ad 2</p>"))
    ((s, d, actions),) = D.edit_script(D.sdiff(a, b))
    assert b.attrs(d) == (("id", "ads"),)
    assert any(type(action).__name__ == "InsertNode" for action in actions)


# -- Sdiff against xmldiff on random mutations of generated trees ----------------------------


def random_tree(rng: random.Random) -> etree._Element:
    root = etree.Element("html")
    body = etree.SubElement(root, "body")
    nodes = [body]
    for n in range(rng.randint(3, 40)):
        parent = rng.choice(nodes)
        el = etree.SubElement(parent, rng.choice(["div", "p", "span", "ul", "li", "a"]),
                              {"id": f"n{n}"} if rng.random() < 0.5 else {})
        el.text = rng.choice(["", f"text {n}", "x"]) or None
        nodes.append(el)
    return root


def mutate(rng: random.Random, root: etree._Element) -> tuple[str, etree._Element]:
    el = rng.choice(list(root.iter())[1:])
    kind = rng.choice(["text", "attribute", "insert", "delete"])
    if kind == "text":
        el.text = (el.text or "") + " changed"
    elif kind == "attribute":
        el.set("class", "changed")
    elif kind == "insert":
        new = etree.Element("em")
        new.text = "inserted"
        el.insert(rng.randint(0, len(el)), new)
        return kind, new
    elif el.getparent() is not None and el.getparent().tag != "html":
        el.getparent().remove(el)
    else:
        kind = "none"
    return kind, el


def test_sdiff_agrees_with_xmldiff_on_random_mutations():
    from copy import deepcopy

    from xmldiff import main as xmldiff

    rng = random.Random(2026)
    for _ in range(150):
        before = random_tree(rng)
        after = deepcopy(before)
        kind, node = mutate(rng, after)
        old, new = D.from_tree(before), D.from_tree(after)
        ann = D.sdiff(old, new)
        actions = xmldiff.diff_trees(before, after)
        assert ann.changed == bool(actions), (kind, actions)
        if kind == "text":
            assert ann.nodes(D.CONTENT | D.STRUCTURE)  # the text node changed, or its element gained one
        elif kind == "attribute":  # marked on the element, unless its subtree changed shape anyway
            assert any(("class", "changed") in new.attrs(i) for i in ann.nodes(D.ATTRIBUTES)) or ann.pairs
        elif kind in ("insert", "delete"):
            assert ann.pairs and ann.nodes(D.STRUCTURE)
