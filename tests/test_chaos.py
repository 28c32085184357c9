"""The chaos harness's short run (``python bench/chaos.py --short``, issue 44): a site of 400
pages, a real Redis, three workers behind TCP proxies, the scheduler and delivery, under a
minute of faults drawn from one seed (every kind at least once: kill -9 of a worker and of the
scheduler, Redis restarted with and without its data, a partition, a full object store when
the test may mount a tmpfs), then drained and checked against the site's ground truth.

One run for the module (about 80 s on two cores), in one test process; each invariant is a test
of its own.
"""

from __future__ import annotations

import pytest
from conftest import import_bench

# One run for the whole module: its tests stay in one test process (pytest-xdist, --dist loadgroup)
pytestmark = pytest.mark.xdist_group("chaos")

@pytest.fixture(scope="module")
def verdict(redis_binary, tmp_path_factory):
    """The short run's verdict; its report is printed (pytest shows it with a failure) and its
    files (every process's output, the feeds, what the receiver got) are left in pytest's
    temporary directory."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        chaos = import_bench("chaos", monkeypatch)
        run = chaos.Chaos(chaos.Config.short(chaos.SHORT_SEED), tmp_path_factory.mktemp("chaos"))
        try:
            result = run.run()
        finally:
            run.cleanup()
        run.report(result)
        yield result


def held(verdict, name: str) -> None:
    ok, text = verdict.checks[name]
    assert ok, text


def test_every_page_of_a_closed_round_reaches_a_feed(verdict):
    held(verdict, "pages")


def test_every_aci_of_a_new_version_is_received(verdict):
    held(verdict, "acis_lost")


def test_every_owner_receives_the_aci_of_each_pages_final_revision(verdict):
    held(verdict, "acis_final")


def test_no_aci_is_received_twice(verdict):
    held(verdict, "acis_doubled")


def test_every_sentinel_tells_every_change(verdict):
    held(verdict, "notes_lost")


def test_no_notification_is_received_twice(verdict):
    held(verdict, "notes_doubled")


def test_no_lease_is_held_forever(verdict):
    held(verdict, "leases")


def test_rounds_close(verdict):
    held(verdict, "rounds")


def test_no_process_writes_a_traceback_on_a_connection_error(verdict):
    held(verdict, "tracebacks")


def test_nothing_dies_but_what_the_harness_kills(verdict):
    held(verdict, "exits")
