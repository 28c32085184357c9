"""UrlTally: each URL in one class, so discovered = followed + ignored + error, whatever the
order in which the crawl learns about it."""

from __future__ import annotations

import pytest

from webrace.rounds.engine import Counts
from webrace.rounds.tally import UrlTally
from webrace.summary import summarize, unbalanced

U = "http://a.test/x"


def _run(*events: tuple) -> dict:
    tally = UrlTally(Counts())
    for name, *args in events:
        getattr(tally, name)(U, *args)
    return summarize(tally.stats)


@pytest.mark.parametrize(("events", "expected"), [
    # a link ignored on one page and followed from another: followed
    ([("not_followed", "ignored/scope"), ("follow",)], {"followed": 1}),
    # the first reason a link was not followed stays
    ([("not_followed", "ignored/depth"), ("not_followed", "ignored/scope")], {"ignored/depth": 1}),
    # following it again does not undo a refusal of robots.txt...
    ([("follow",), ("refused", "ignored/robots"), ("follow",)], {"ignored/robots": 1}),
    # ...nor a failure; a page had does
    ([("follow",), ("failed", "dns"), ("follow",)], {"followed": 1, "failed/dns": 1}),
    ([("follow",), ("failed", "dns"), ("fetched",)], {"followed": 1}),
    ([("follow",), ("refused", "ignored/robots"), ("fetched",)], {"followed": 1}),
    # a failure's latest reason
    ([("follow",), ("failed", "dns"), ("failed", "timeout")], {"followed": 1, "failed/timeout": 1}),
    # a bad URL is an error, and no later link verdict moves it
    ([("not_followed", "error/scheme"), ("not_followed", "ignored/scope")], {"error/scheme": 1}),
    ([("follow",), ("refused", "error/parse")], {"error/parse": 1}),
    # a redirect's target met first in a refusal or a failure is discovered then
    ([("refused", "ignored/redirect_scope")], {"ignored/redirect_scope": 1}),
    ([("failed", "http_404")], {"followed": 1, "failed/http_404": 1}),
])
def test_each_url_is_in_one_class_by_its_latest_fate(events, expected):
    summary = _run(*events)
    counts = {"followed": summary["followed"]} if summary["followed"] else {}
    for category in ("ignored", "failed", "error"):
        counts.update({f"{category}/{r}": n for r, n in summary[f"{category}_by_reason"].items()})
    assert summary["discovered"] == 1
    assert counts == expected
    assert unbalanced(summary) == []


def test_discover_counts_a_url_once_and_says_whether_it_was_new():
    tally = UrlTally(Counts())
    assert tally.discover(U) is True
    assert tally.discover(U) is False
    assert tally.stats["webrace/discovered"] == 1


def test_unbalanced_names_what_does_not_add_up():
    summary = {"discovered": 10, "followed": 3, "ignored": 9, "error": 0, "failed": 4,
               "ignored_by_reason": {"scope": 9}, "failed_by_reason": {"dns": 4}, "error_by_reason": {}}
    assert unbalanced(summary) == ["discovered = 10 but followed 3 + ignored 9 + error 0 = 12",
                                   "failed = 4 exceeds followed = 3"]
