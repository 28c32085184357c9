"""Sentinels as a library: each type fires on its change and not on the others; locations,
ignore rules, added/removed only; grouped evaluation."""

from __future__ import annotations

import pytest

from webrace import digest as D
from webrace.records.sentinel import SentinelError, make, parse_duration
from webrace.sentinels.evaluate import GroupStats, evaluate

URL = "http://a.test/"
PAGE = """<html><body>
<div id="news"><h2>News</h2><p>Old headline</p><a href="/story1">story</a><img src="/p1.png"></div>
<div id="sidebar"><p>Updated 10:01</p><p class="promo">Buy now</p></div>
<p class="footer">Contact us</p></body></html>"""

CHANGES = {
    "text": PAGE.replace("Old headline", "New headline"),
    "link": PAGE.replace('href="/story1"', 'href="/story2"'),
    "image": PAGE.replace('src="/p1.png"', 'src="/p2.png"'),
    "attribute": PAGE.replace('class="footer"', 'class="bottom"'),
    "structure": PAGE.replace("<h2>News</h2>", "<h2>News</h2><hr>"),
    "keyword": PAGE.replace("Old headline", "Old headline about Redis"),
    "noise": PAGE.replace("Updated 10:01", "Updated 10:02"),
}


def fired(sentinel, before: str, after: str) -> bool:
    return bool(evaluate([sentinel], D.encode(before), D.encode(after)))


@pytest.mark.parametrize(("kind", "options", "fires_on"), [
    ("any", {}, set(CHANGES)),
    ("content", {}, {"text", "keyword", "noise"}),
    ("keyword", {"pattern": "redis"}, {"keyword"}),
    ("regex", {"pattern": r"\d\d:\d\d"}, {"noise"}),
    ("structure", {}, {"structure"}),
    ("links", {}, {"link"}),
    ("images", {}, {"image"}),
    ("attributes", {}, {"link", "image", "attribute"}),
])
def test_each_type_fires_on_its_change_and_not_on_the_others(kind, options, fires_on):
    sentinel = make("alice", URL, kind, **options)
    for change, page in CHANGES.items():
        assert fired(sentinel, PAGE, page) == (change in fires_on), change
    assert not fired(sentinel, PAGE, PAGE)


def test_a_location_keeps_the_sentinel_to_its_region():
    news = make("alice", URL, "content", where="css:#news")
    assert fired(news, PAGE, CHANGES["text"]) and not fired(news, PAGE, CHANGES["noise"])
    sidebar = make("alice", URL, "any", where="xpath://div[@id='sidebar']")
    assert fired(sidebar, PAGE, CHANGES["noise"]) and not fired(sidebar, PAGE, CHANGES["text"])


def test_ignore_rules_silence_the_noise():
    by_pattern = make("alice", URL, "content", ignore=(r"Updated \d\d:\d\d",))
    by_region = make("alice", URL, "any", ignore=("css:#sidebar",))
    for sentinel in (by_pattern, by_region):
        assert not fired(sentinel, PAGE, CHANGES["noise"]) and fired(sentinel, PAGE, CHANGES["text"])


def test_added_only_and_removed_only():
    added = make("alice", URL, "content", on="added", where="css:#news")
    removed = make("alice", URL, "content", on="removed", where="css:#news")
    more = PAGE.replace("<p>Old headline</p>", "<p>Old headline</p><p>Second story</p>")
    less = PAGE.replace("<p>Old headline</p>", "")
    assert fired(added, PAGE, more) and not fired(removed, PAGE, more)
    assert fired(removed, PAGE, less) and not fired(added, PAGE, less)
    (note,) = evaluate([added], D.encode(PAGE), D.encode(more))
    assert note.changes == {"added": ["Second story"]} and note.after == "Second story" and note.owner == "alice"
    links = make("alice", URL, "links", on="removed")
    assert fired(links, PAGE, PAGE.replace('<a href="/story1">story</a>', ""))
    assert not fired(links, PAGE, PAGE.replace("</div>", '<a href="/x">x</a></div>', 1))


def test_keyword_appears_and_disappears():
    appears = make("alice", URL, "keyword", pattern="Redis", on="added")
    disappears = make("alice", URL, "keyword", pattern="Redis", on="removed")
    assert fired(appears, PAGE, CHANGES["keyword"]) and not fired(disappears, PAGE, CHANGES["keyword"])
    assert fired(disappears, CHANGES["keyword"], PAGE) and not fired(appears, CHANGES["keyword"], PAGE)


def test_a_region_that_appears_or_disappears_fires():
    watch = make("alice", URL, "content", where="css:#breaking")
    with_region = PAGE.replace("<body>", '<body><div id="breaking">Storm</div>')
    (note,) = evaluate([watch], D.encode(PAGE), D.encode(with_region))
    assert note.changes == {"added": ["region css:#breaking appeared"]}
    assert fired(watch, with_region, PAGE) and not fired(watch, PAGE, PAGE)


def test_a_group_is_evaluated_together_and_short_circuits():
    group = [make(f"user{n}", URL, kind, **opts) for n, (kind, opts) in enumerate([
        ("any", {}), ("content", {}), ("keyword", {"pattern": "redis"}), ("regex", {"pattern": "x+"}),
        ("links", {}), ("structure", {"where": "css:#news"})] * 20)]
    stats = GroupStats()
    assert evaluate(group, D.encode(PAGE), D.encode(PAGE), stats=stats) == [] and stats.unchanged
    stats = GroupStats()
    notes = evaluate(group, D.encode(PAGE), D.encode(CHANGES["link"]), stats=stats)
    assert {n.type for n in notes} == {"any", "links"} and len(notes) == 40
    assert stats.skipped == 40  # keyword and regex: the text did not change, they did not run


def test_bad_sentinels_are_refused_with_a_reason():
    for kwargs, message in [
        ({"type": "colour"}, "unknown sentinel type"),
        ({"type": "regex", "pattern": "("}, "not a valid regular expression"),
        ({"type": "keyword"}, "needs --pattern"),
        ({"type": "content", "where": "css:!!"}, "not a CSS selector"),
        ({"type": "content", "where": "xpath://["}, "not an XPath expression"),
        ({"type": "structure", "on": "added"}, "--on added is for"),
        ({"type": "content", "ignore": ("(",)}, "--ignore"),
    ]:
        with pytest.raises(SentinelError, match=message):
            make("alice", URL, **kwargs)


def test_intervals_are_rounded_up_to_a_multiple_of_the_tick():
    assert make("a", URL, every_ms=parse_duration("90s"), tick_ms=60_000).every == 120_000
    assert make("a", URL, every_ms=parse_duration("1h"), tick_ms=60_000).every == 3_600_000
    assert parse_duration("2d") == 172_800_000 and parse_duration("30") == 30_000
    with pytest.raises(SentinelError):
        parse_duration("soon")


def test_one_owners_sentinel_that_fails_costs_the_others_nothing():
    from dataclasses import replace

    # a location no selector engine takes (stored by an older version, or a store edited by hand)
    broken = replace(make("mallory", URL, "content", where="css:#news"), where="css:#news[")
    good = make("alice", URL, "content", where="css:#news")
    stats = GroupStats()
    notes = evaluate([broken, good], D.encode(PAGE), D.encode(CHANGES["text"]), stats=stats)
    assert [n.owner for n in notes] == ["alice"] and stats.failed == 1
