"""The diff a notification's page shows: real Page Digests of two versions in a real
sentinel store, the change word by word in the sentinel's region only, escaped, bounded."""

from __future__ import annotations

from dataclasses import replace

import pytest

from webrace.backends.sqlite import SqliteSentinelStore
from webrace.records.sentinel import make
from webrace.sentinels.baseline import of_version
from webrace.sentinels.diff import CHANGE_CHARS, MAX_CHANGES, diff_html, diff_texts, notification_diff
from webrace.sentinels.evaluate import evaluate

URL = "http://a.test/news"


def page(news: str, aside: str = "Weather: sunny") -> str:
    return (f"<html><head><title>News</title></head><body><div id='news'><p>{news}</p></div>"
            f"<div id='aside'><p>{aside}</p></div></body></html>")


@pytest.fixture
def store(tmp_path):
    s = SqliteSentinelStore(tmp_path / "sentinels.sqlite")
    yield s
    s.close()


def notify(store, before: str, after: str, **options) -> dict:
    """Store both versions' digests and the sentinel, evaluate it: the notification, as the
    web app reads it from the store."""
    sentinel = make("alice", URL, options.pop("type", "content"), **options)
    store.add([sentinel])
    old, new = of_version(before.encode(), "text/html"), of_version(after.encode(), "text/html")
    for version in (old, new):
        store.put_digest(version.sha, version.data)
    notes = [replace(n, before_digest=old.sha, after_digest=new.sha)  # as the crawl does
             for n in evaluate([sentinel], old.digest, new.digest, at=1000)]
    assert notes, "the sentinel fires on this change"
    store.add_notifications(notes)
    return store.notifications("alice")[0]


def test_inserted_words_are_in_ins_and_deleted_words_in_del(store):
    note = notify(store, page("Exams start on Monday"), page("Exams start on Friday at noon"))
    segments = notification_diff(store, note)
    assert ("-", "Monday") in segments and ("+", "Friday at noon") in segments
    html = diff_html(segments)
    assert html.startswith('<div class="diff">') and html.endswith("</div>")
    assert "<del>Monday</del>" in html and "<ins>Friday at noon</ins>" in html


def test_text_outside_the_sentinels_region_is_absent(store):
    note = notify(store, page("Exams on Monday", aside="Weather: sunny"),
                  page("Exams on Tuesday", aside="Weather: rain"), where="css:#news")
    html = diff_html(notification_diff(store, note))
    assert "<ins>Tuesday</ins>" in html and "<del>Monday</del>" in html
    assert "Weather" not in html and "rain" not in html and "News" not in html  # the aside, the title


def test_the_sentinels_ignore_patterns_are_left_out_as_in_its_evaluation(store):
    note = notify(store, page("Price 10 EUR, updated 09:15"), page("Price 12 EUR, updated 09:45"),
                  ignore=(r"updated \d\d:\d\d",))
    segments = notification_diff(store, note)
    assert [s for s in segments if s[0] != "="] == [("-", "10"), ("+", "12")]


def test_everything_is_escaped(store):
    note = notify(store, page("a &lt;b&gt; c"), page("a &lt;script&gt;alert(1)&lt;/script&gt; c"))
    html = diff_html(notification_diff(store, note))
    assert "<script>" not in html and "<ins>&lt;script&gt;alert(1)&lt;/script&gt;</ins>" in html
    assert "<del>&lt;b&gt;</del>" in html


@pytest.mark.parametrize("missing", ["before", "after"])
def test_a_missing_digest_gives_one_line_not_an_exception(store, missing):
    note = notify(store, page("Monday"), page("Friday"))
    note[f"{missing}_digest"] = "f" * 64
    segments = notification_diff(store, note)
    assert len(segments) == 1 and segments[0][0] == "="
    assert f"{missing} version" in segments[0][1] and "\n" not in segments[0][1]
    assert diff_html(segments).count("<div") == 1


def test_an_unreadable_digest_gives_one_line(store):
    note = notify(store, page("Monday"), page("Friday"))
    store.put_digest("c" * 64, b"not a digest")
    note["before_digest"] = "c" * 64
    [(op, text)] = notification_diff(store, note)
    assert op == "=" and "cannot be read" in text


def test_long_unchanged_text_is_cut_to_the_context_of_each_change():
    words = " ".join(f"w{i}" for i in range(2000))
    segments = diff_texts([words + " old", words], [words + " new", words])
    assert segments[0][0] == "=" and segments[0][1].startswith(" … ") and len(segments[0][1]) < 200
    assert segments[1:3] == [("-", "old"), ("+", "new")]
    assert segments[3][0] == "=" and " … " in segments[3][1] and len(segments[3][1]) < 2 * 200


def test_a_region_of_many_repeated_texts_gives_a_bounded_diff():
    """Thousands of texts made of the same few words (no quadratic blow-up: repeated texts
    anchor nothing, word diffs have a budget): the change is there, the output bounded."""
    lines = [" ".join(["the", "news", "of", "the", "day"] * 4) for _ in range(3000)]
    changed = [line + (" extra" if n % 3 == 0 else "") for n, line in enumerate(lines)]
    segments = diff_texts(lines, changed)
    assert any(op == "+" and "extra" in text for op, text in segments)
    assert sum(1 for op, _ in segments if op != "=") <= MAX_CHANGES
    assert sum(len(text) for _, text in segments) < (MAX_CHANGES + 2) * (CHANGE_CHARS + 40)


def test_many_changes_are_bounded_and_the_rest_counted():
    old = [" ".join(f"a{i} keep{i}" for i in range(MAX_CHANGES + 50))]
    new = [" ".join(f"b{i} keep{i}" for i in range(MAX_CHANGES + 50))]
    segments = diff_texts(old, new)
    assert sum(1 for op, _ in segments if op != "=") == MAX_CHANGES
    assert segments[-1][0] == "=" and "more changes" in segments[-1][1]


def test_consecutive_operations_are_merged_and_lines_kept():
    segments = diff_texts(["one two three", "four"], ["one 2 3 three", "four five"])
    assert segments == [("=", "one "), ("-", "two"), ("+", "2 3"), ("=", " three\nfour "), ("+", "five")]
    assert "<br>" in diff_html(segments)


def test_a_notification_made_without_digests_says_so_in_one_line(store):
    note = notify(store, page("Monday"), page("Friday"))
    del note["before_digest"], note["after_digest"]  # e.g. one stored before diffs existed
    [(op, text)] = notification_diff(store, note)
    assert op == "=" and "no longer stored" in text
