"""bench/soak.py's verdict: growth per hour after the warm-up, fitted over the samples, as a
share of the value at the warm-up's end."""

from __future__ import annotations

import pytest


@pytest.fixture
def bench(load_bench):
    return load_bench("soak")


def samples(bench, rss_at):
    """A sample every 30 s for 20 minutes, RSS from ``rss_at(t)``."""
    return [bench.Sample(t, {"crawler": rss_at(t)}, {"data/x": 1000}, 10, 0, 0) for t in range(30, 1201, 30)]


def test_a_flat_rss_after_the_warm_up_passes_whatever_it_did_before(bench, capsys):
    assert bench.report(samples(bench, lambda t: 100.0 + min(t, 300) / 10), ["crawler"])
    assert "PASS  RSS crawler" in capsys.readouterr().out


def test_a_steady_growth_of_a_tenth_an_hour_fails(bench, capsys):
    assert not bench.report(samples(bench, lambda t: 100.0 + 10 * t / 3600), ["crawler"])
    assert "FAIL  RSS crawler" in capsys.readouterr().out


@pytest.mark.parametrize(("points", "per_hour"), [
    ([(0, 5.0), (1800, 5.0), (3600, 5.0)], 0.0),
    ([(0, 100.0), (1800, 150.0), (3600, 200.0)], 100.0),
    ([(0, 100.0), (1800, float("nan")), (2700, 175.0), (3600, 200.0)], 100.0),  # a process gone: skipped
])
def test_growth_per_hour_is_the_least_squares_slope(bench, points, per_hour):
    assert bench.slope_per_hour(points)[0] == pytest.approx(per_hour)


def test_redis_is_judged_without_the_records_that_grow_with_the_changes(bench):
    families = {"url:*": 100, "round:*:nodes": 50, "aci": 7, "aci:owner:*": 7, "aci:undelivered": 7,
                "sentinel:digest:*": 9, "sentinel:note": 9, "sentinel:notes:*": 9, "sentinel:url:*": 3}
    assert bench.held_state(families) == 153
