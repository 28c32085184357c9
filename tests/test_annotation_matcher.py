"""The filtering processor as a library: relevance = sum of weight x occurrences."""

from __future__ import annotations

import pytest

from webrace.annotation.matcher import KeywordIndex, naive_relevance
from webrace.annotation.text import page_text


@pytest.mark.parametrize(("text", "keywords", "relevance"), [
    ("java Java JAVA", [("java", 4)], 12),
    ("javascript is not java", [("java", 4)], 4),  # whole words only
    ("ibm research, java research", [("ibm", 1), ("research", 3), ("java", 4)], 1 + 6 + 4),
    ("a web crawler; a web-crawler; a web\ncrawler", [("web crawler", 2)], 6),  # phrases
    ("crawler web", [("web crawler", 2)], 0),
    ("the big web crawler and the big web crawler farm", [("big web crawler", 3), ("web crawler farm", 1)], 7),
    ("C++ and abc++ and c++11", [("c++", 5)], 5),  # literal, not a pattern
    ("use .NET or asp.net", [(".net", 2)], 2),
    ("a+b (x) [y] a.b", [("a+b", 1), ("(x)", 1), ("[y]", 1), ("a.b", 1)], 4),  # metacharacters are text
    ("nothing here", [("java", 4)], 0),
    ("half weights", [("half", 0.5), ("weights", 1.5)], 2.0),
])
def test_relevance_is_the_weighted_count_of_whole_word_matches(text, keywords, relevance):
    found = KeywordIndex({"p": keywords}).match(text).relevance
    if relevance:
        assert found["p"] == pytest.approx(relevance)
    else:
        assert "p" not in found  # no hit, no entry: an owner with relevance 0 gets no ACI
    assert naive_relevance(text, keywords) == pytest.approx(relevance)


def test_each_profile_gets_its_own_relevance_from_one_pass():
    index = KeywordIndex({
        "alice": [("java", 4), ("research", 3)],
        "bob": [("java", 1), ("football", 9)],
        "carol": [("opera", 2)],
        "dave": [],
    })
    found = index.match("Java research and more java.")
    assert found.relevance == {"alice": 11, "bob": 2}
    assert found.counts == {"java": 2, "research": 1}


def test_matched_keywords_can_be_located_in_the_text():
    text = "Our Web-Crawler is written in Java, like the C++ one."
    found = KeywordIndex({"p": [("web crawler", 1), ("java", 1), ("c++", 1)]}).match(text)
    assert sorted(found.keywords["p"]) == ["c++", "java", "web crawler"]
    assert [text[s:e] for key in ("web crawler", "java", "c++") for s, e in found.spans(key)] == [
        "Web-Crawler", "Java", "C++"]


def test_page_text_drops_markup_scripts_and_links():
    body = (b"<html><head><title>Dept</title><style>p{}</style></head><body><p>Java <b>research</b></p>"
            b"<a href='/java'>java link</a><script>java()</script></body></html>")
    assert page_text(body) == "Dept Java research"


@pytest.mark.parametrize("body", [b"", b"\xff\xfe\x00\x81garbage", b"\x00" * 100, "<p>caf\u00e9</p>".encode("latin-1")])
def test_page_text_never_raises_on_bad_bytes(body):
    assert isinstance(page_text(body), str)
