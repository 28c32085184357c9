"""The filtering processor as a library: relevance = sum of weight x occurrences."""

from __future__ import annotations

import pytest

from webrace.annotation.filtering import FilteringProcessor, RoundIndex, Version, text_and_title
from webrace.annotation.matcher import KeywordIndex, naive_relevance, normalize_keyword
from webrace.annotation.text import MASK, page_text, page_texts
from webrace.urd import Keyword, Urd


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


PAGE_WITH_LINKS = (b"<html><head><title>Courses</title></head><body><p>Download the <a href='/s.pdf'>course "
                   b"syllabus</a>. The <em>Java</em> course starts in May; see <a href='/t'>the timetable</a>, "
                   b"then enrol.</p><p>Written in <a href='/py'>Python</a></p></body></html>")


def test_a_summary_reads_as_the_page_does_with_the_text_of_its_links():
    """Link text is not matched (the seed removes a page's links first), but a summary around
    a keyword quotes the page as it reads: no hole where a link's text was."""
    version = Version("http://a.test/", PAGE_WITH_LINKS, "text/html", "text/html", "0" * 64, 1, 0,
                      len(PAGE_WITH_LINKS))
    urds = [Urd("u", "alice", "http://a.test/", 3_600_000, 0, keywords=(Keyword("java", 1),))]
    (aci,) = FilteringProcessor().judge(version, urds, RoundIndex.build(urds)).acis
    assert aci.summary == ("Courses Download the course syllabus. The Java course starts in May; see the "
                           "timetable, then enrol....")


@pytest.mark.parametrize(("keywords", "relevance"), [
    ([("java", 1)], 1),
    ([("syllabus", 1)], 0),  # only in a link's text
    ([("the timetable", 1)], 0),
    ([("python", 1)], 0),
    ([("the java course", 1)], 1),  # across inline markup
])
def test_the_text_of_links_is_not_matched(keywords, relevance):
    text, _ = text_and_title(PAGE_WITH_LINKS, "text/html")
    found = KeywordIndex({"p": keywords}).match(text.matched, text.reading).relevance
    assert found.get("p", 0) == relevance


def test_inline_markup_does_not_split_words_and_blocks_do_not_join_them():
    body = b"<p>Java<b>Script</b> is not <i>J</i>ava</p><p>one</p><div>two<br>three</div><td>four</td>"
    assert page_text(body) == "JavaScript is not Java one two three four"


@pytest.mark.parametrize(("body", "reading", "matched"), [
    (b"<p>see <a href='/t'>the timetable</a>, then</p>", "see the timetable, then", "see , then"),
    (b"<p>a<a href='/x'></a>b</p>", "ab", "ab"),  # an empty link
    (b"<p>x <a href='/y'><div>in a block</div></a> y</p>", "x in a block y", "x y"),
    (b"<p>x <a href='/y'>one <b>two</b></a> <a href='/z'>three</a>.</p>", "x one two three.", "x ."),
    (b"<p>no links at all</p>", "no links at all", "no links at all"),
    ("<p>a \ufdd1 stray mark <a href='/y'>link</a></p>", "a stray mark link", "a stray mark"),  # a noncharacter
])
def test_the_text_as_read_and_as_matched_have_the_same_positions(body, reading, matched):
    text = page_texts(body)
    assert len(text.reading) == len(text.matched)
    assert " ".join(text.reading.split()) == reading
    assert " ".join(text.matched.replace(MASK, " ").split()) == matched


def test_a_summary_window_is_cut_to_whole_words_as_the_character_rule_says():
    """The window's edges (found with regular expressions) are where the plain rule puts them:
    forward from 60 characters before the match to just after a space, back from 60 after it to
    a space, never past the match; on random text with every kind of space."""
    from random import Random

    from webrace.annotation.matcher import SNIPPET, Matches

    def by_hand(text: str, start: int, end: int) -> tuple[int, int]:
        lo, hi = max(0, start - SNIPPET), min(len(text), end + SNIPPET)
        while 0 < lo < start and not text[lo - 1].isspace():
            lo += 1
        while end < hi < len(text) and not text[hi].isspace():
            hi -= 1
        return lo, hi

    rng = Random(7)
    alphabet = "abcdefgh" * 6 + " \t\n\u00a0\u2003\x1c\u3000.,"
    for _ in range(400):
        before = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 150)))
        after = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 150)))
        text = f"{before} keyword {after}" if rng.random() < 0.8 else f"{before}keyword{after}"
        matches = Matches(text, {}, {"keyword": 1}, {})
        span = matches.first_span("keyword")
        if span is None:  # glued to other letters: not a whole word
            continue
        assert matches.window("keyword") == by_hand(text, *span)


def test_an_index_that_only_counts_counts_what_the_full_index_counts():
    profiles = {"a": [("web crawler", 2.0), ("Crawl", 1.0)], "b": [("c++", 3.0), ("the web crawler farm", 1.0)],
                "c": [("", 1.0), ("farm", 0.5)]}
    text = "A web crawler farm; the web crawler farm runs C++ and a crawl. Farm!"
    full = KeywordIndex(profiles)
    counting = KeywordIndex.counting(normalize_keyword(k) for kws in profiles.values() for k, _ in kws)
    assert counting.count(text) == full.count(text) and len(full.count(text)) == 5


def test_the_urds_reaching_a_page_are_worked_out_once_per_shared_list_and_per_plain_content():
    from webrace.rounds.groups import Members

    urds = [Urd(id=f"u{n}", owner=f"o{n % 3}", url="http://a.test/", depth=1, timing=1000,
                keywords=(Keyword("w", 1),)) for n in range(6)]
    index = RoundIndex.build(urds)
    shared = Members(u.id for u in urds[:4])
    first = index.reach(shared)
    assert index.reach(shared) is first  # known by identity: not copied, not hashed
    assert index.reach(list(shared)) is not first and index.reach(list(shared)) is index.reach(tuple(shared))
    other = Members(u.id for u in urds[:2])
    mine, plain = index.reach(other), index.reach(list(other))
    assert mine is not first and (mine.single == plain.single).all() and mine.shared == plain.shared
