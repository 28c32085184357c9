"""One contract, two frontiers: in memory (embedded) and in a real Redis (distributed)."""

from __future__ import annotations

import uuid

import pytest
import redis

from webrace.distributed.frontier import _FINISH, RedisFrontier
from webrace.records.rounds import DONE, FAILED, Node, Offer
from webrace.rounds.frontier import Frontier


@pytest.fixture
def client(redis_url):
    return redis.Redis.from_url(redis_url)


@pytest.fixture
def redis_frontier(client, redis_prefix):
    return RedisFrontier(client, redis_prefix, "r1")


@pytest.fixture(params=["memory", "redis"])
def frontier(request):
    return Frontier() if request.param == "memory" else request.getfixturevalue("redis_frontier")


def test_offers_are_new_then_merged_then_duplicate(frontier):
    assert frontier.offer("http://a/", None, 1, {"u1": 2}) == (Offer.NEW, {"u1": 2})
    assert frontier.offer("http://a/", "http://p/", 0, {"u2": 0}) == (Offer.MERGED, {"u2": 0})
    assert frontier.offer("http://a/", None, 3, {"u1": 1, "u2": 0}) == (Offer.DUPLICATE, {})
    node = frontier.get("http://a/")
    assert (node.budgets, node.depth, node.parent_url) == ({"u1": 2, "u2": 0}, 0, "http://p/")
    assert frontier.contains("http://a/") and not frontier.contains("http://b/")


def test_urds_stay_active_while_they_have_pages_to_follow(frontier):
    frontier.offer("http://a/", None, 0, {"u1": 1, "u2": 0})
    frontier.offer("http://b/", None, 0, {"u1": 1})
    assert frontier.active_urds() == {"u1"}
    assert frontier.finish(frontier.get("http://a/"), DONE, {"u1": 1, "u2": 0}) == (set(), {})
    assert frontier.finish(frontier.get("http://b/"), FAILED) == ({"u1"}, {})
    assert frontier.active_urds() == set()


def test_finish_refuses_until_merged_budgets_are_followed(frontier):
    frontier.offer("http://a/", None, 0, {"u1": 1})
    node = frontier.get("http://a/")  # taken by a worker...
    frontier.offer("http://a/", None, 0, {"u2": 3})  # ...while another merges a URD into it
    assert frontier.finish(node, DONE, {"u1": 1}) == (set(), {"u2": 3})
    assert frontier.get("http://a/").state == "pending"
    node.links = ["http://a/x"]
    assert frontier.finish(node, DONE, {"u1": 1, "u2": 3}) == ({"u1", "u2"}, {})
    done = frontier.get("http://a/")
    assert done.state == DONE and done.links == ["http://a/x"]


def test_known_then_finish_reads_the_links_before_finishing_as_the_two_calls_do(frontier):
    frontier.offer("http://a/", None, 0, {"u1": 0})
    frontier.offer("http://b/", None, 0, {"u1": 0})
    node = frontier.get("http://a/")
    node.links = ["http://b/", "http://a/", "http://c/"]
    assert frontier.known_then_finish(node.links, node, DONE, {"u1": 0}) == (
        {"http://a/", "http://b/"}, (set(), {}))
    assert frontier.get("http://a/").state == DONE and frontier.get("http://a/").links == node.links
    # a URD merged meanwhile: nothing changes, the missed budget comes back with the links known
    frontier.offer("http://b/", None, 0, {"u1": 0})
    taken = frontier.get("http://b/")
    frontier.offer("http://b/", None, 0, {"u2": 1})
    assert frontier.known_then_finish(["http://a/"], taken, DONE, {"u1": 0}) == ({"http://a/"}, (set(), {"u2": 1}))
    assert frontier.get("http://b/").state == "pending"


class CountingConnection(redis.Connection):
    """A real connection that counts the round trips it makes (each packed send)."""

    sent: list[list] = []

    def send_packed_command(self, command, check_health=True):
        CountingConnection.sent.append(command)
        return super().send_packed_command(command, check_health)


def test_known_then_finish_is_one_round_trip_and_loads_its_script_only_when_redis_lacks_it(
        redis_url, redis_prefix):
    client = redis.Redis.from_url(redis_url, connection_class=CountingConnection)
    frontier = RedisFrontier(client, redis_prefix, "r1")
    frontier._finish = client.register_script(_FINISH + f"\n-- {uuid.uuid4().hex}")  # unknown to the server
    for n in range(3):
        frontier.offer(f"http://a/{n}", None, 0, {"u1": 0})
    node = frontier.get("http://a/0")
    node.links = ["http://a/1", "http://z/"]
    CountingConnection.sent.clear()
    assert frontier.known_then_finish(node.links, node, DONE, {"u1": 0}) == ({"http://a/1"}, (set(), {}))
    assert len(CountingConnection.sent) == 3  # the pipeline, NOSCRIPT: SCRIPT LOAD, the pipeline again
    node = frontier.get("http://a/1")
    node.links = ["http://a/2"]
    CountingConnection.sent.clear()
    assert frontier.known_then_finish(node.links, node, DONE, {"u1": 0}) == ({"http://a/2"}, (set(), {}))
    assert len(CountingConnection.sent) == 1  # no SCRIPT EXISTS before it (redis-py's pipelines ask each time)
    assert frontier.get("http://a/1").state == DONE and frontier.get("http://a/0").state == DONE


def test_a_redirect_target_new_to_the_round_is_claimed_before_it_is_downloaded(frontier):
    frontier.offer("http://old/", "http://p/", 1, {"u1": 2})
    old = frontier.get("http://old/")
    assert frontier.claim("http://new/", old) == (True, {}, "pending")
    assert frontier.contains("http://new/") and frontier.known(["http://new/"]) == {"http://new/"}
    # a link to the target offered afterwards is merged into the page that redirected: no second download
    assert frontier.offer("http://new/", "http://q/", 1, {"u1": 2}) == (Offer.DUPLICATE, {})
    assert frontier.offer("http://new/", "http://q/", 1, {"u2": 1}) == (Offer.MERGED, {"u2": 1})
    assert frontier.get("http://old/").budgets == {"u1": 2, "u2": 1}
    assert frontier.get("http://new/").url == "http://old/"  # the node is the page's that redirected
    # the chain goes on (old -> new -> newer, new -> old): still the same page's, followed
    assert frontier.claim("http://newer/", old)[0] is True
    assert frontier.claim("http://new/", old)[0] is True
    assert frontier.claim("http://old/", old)[0] is True


def test_a_redirect_to_a_page_the_round_has_pending_is_not_followed_and_its_urds_merge_into_it(frontier):
    frontier.offer("http://target/", "http://p/", 1, {"u1": 1})
    frontier.offer("http://old/", "http://q/", 1, {"u2": 3})
    claimed, gained, state = frontier.claim("http://target/", frontier.get("http://old/"))
    assert (claimed, gained, state) == (False, {"u2": 3}, "pending")
    assert frontier.get("http://target/").budgets == {"u1": 1, "u2": 3}
    assert frontier.active_urds() == {"u1", "u2"}


def test_a_redirect_to_a_page_the_round_fetched_already_is_not_followed(frontier):
    frontier.offer("http://a/", None, 0, {"u1": 1})
    node = frontier.get("http://a/")
    node.links = ["http://a/x"]
    frontier.finish(node, DONE, {"u1": 1})
    frontier.offer("http://old/", None, 0, {"u1": 1})
    assert frontier.claim("http://a/", frontier.get("http://old/")) == (False, {}, DONE)
    frontier.offer("http://old2/", None, 0, {"u2": 2})
    assert frontier.claim("http://a/", frontier.get("http://old2/")) == (False, {"u2": 2}, DONE)


def test_a_redirect_to_a_url_another_page_claimed_merges_into_that_page(frontier):
    frontier.offer("http://s1/", None, 0, {"u1": 1})
    frontier.offer("http://s2/", None, 0, {"u2": 1})
    assert frontier.claim("http://t/", frontier.get("http://s1/"))[0] is True
    assert frontier.claim("http://t/", frontier.get("http://s2/")) == (False, {"u2": 1}, "pending")
    assert frontier.get("http://s1/").budgets == {"u1": 1, "u2": 1}


def test_the_url_a_page_was_answered_from_is_kept_with_its_node(frontier):
    frontier.offer("http://old/", None, 0, {"u1": 0})
    node = frontier.get("http://old/")
    frontier.claim("http://new/", node)
    node.answered_from, node.links = "http://new/", ["http://new/x"]
    frontier.finish(node, DONE, {"u1": 0})
    assert frontier.get("http://new/").page_url == "http://new/"
    assert frontier.get("http://old/").links == ["http://new/x"]


def test_adopt_keeps_the_frontiers_node_when_it_has_one(frontier):
    frontier.offer("http://a/", None, 0, {"u1": 2})
    assert frontier.adopt(Node("http://a/", None, 5, {"zz": 0})).budgets == {"u1": 2}
    assert frontier.adopt(Node("http://b/", None, 1, {"u3": 0})).budgets == {"u3": 0}


# -- the Redis frontier is also the round's queue -------------------------------------------

def test_lease_is_breadth_first_then_first_come(redis_frontier):
    f = redis_frontier
    f.offer("http://deep/", None, 2, {"u": 0})
    f.offer("http://a/", None, 1, {"u": 1})
    f.offer("http://b/", None, 1, {"u": 1})
    f.offer("http://root/", None, 0, {"u": 2})
    assert [f.lease(60_000).url for _ in range(4)] == ["http://root/", "http://a/", "http://b/", "http://deep/"]
    assert f.lease(60_000) is None
    assert f.pending() == 4  # all leased, none finished


def test_lease_many_takes_several_pages_in_queue_order_in_one_call(redis_frontier, client):
    f = redis_frontier
    assert f.lease_many(60_000, 3) == []  # (the script is loaded in Redis now)
    for url in ["http://a/", "http://b/", "http://c/"]:
        f.offer(url, None, 1, {"u": 1})
    f.offer("http://root/", None, 0, {"u": 2})
    client.zadd(f.keys["queue"], {"http://ghost/": 0})  # no node: skipped, not counted as leased
    scripts = client.info("commandstats")["cmdstat_evalsha"]["calls"]
    taken = f.lease_many(60_000, 3)
    assert client.info("commandstats")["cmdstat_evalsha"]["calls"] - scripts == 1  # one round trip
    assert [n.url for n in taken] == ["http://root/", "http://a/", "http://b/"] and f.skipped == 1
    assert taken[0].budgets == {"u": 2} and taken[0].depth == 0
    assert [n.url for n in f.lease_many(60_000, 5)] == ["http://c/"]
    assert f.lease_many(60_000, 5) == [] and f.pending() == 4


def test_released_leases_go_back_to_the_queue_at_once(redis_frontier):
    """A worker that stops gives back the pages it leased ahead and will not fetch."""
    f = redis_frontier
    f.offer("http://a/", None, 0, {"u": 0})
    f.offer("http://b/", None, 0, {"u": 0})
    a, b = f.lease_many(600_000, 2)
    f.finish(a, DONE, {"u": 0}, keep_lease=True)  # fetched, its item not written yet: not given back
    assert f.release([a.url, b.url, "http://never-leased/"]) == 1
    assert f.lease(600_000).url == "http://b/" and f.lease(600_000) is None
    assert f.pending() == 1  # b, leased again


def test_expired_lease_goes_back_to_the_queue(redis_frontier):
    f = redis_frontier
    f.offer("http://a/", None, 0, {"u": 1})
    assert f.lease(0).url == "http://a/"  # a worker takes it and dies: its lease expires at once
    again = f.lease(60_000)
    assert again.url == "http://a/" and f.reaped == 1
    f.finish(again, DONE, {"u": 1})
    assert f.pending() == 0 and f.lease(60_000) is None


def test_finished_pages_are_not_leased_again(redis_frontier):
    f = redis_frontier
    f.offer("http://a/", None, 0, {"u": 0})
    slow = f.lease(0)
    fast = f.lease(60_000)  # the expired lease was handed to another worker...
    f.finish(fast, DONE, {"u": 0})
    f.finish(slow, DONE, {"u": 0})  # ...and the slow one finishing late changes nothing
    assert f.lease(0) is None and f.pending() == 0


def test_corrupt_queue_entries_are_skipped_and_counted(redis_frontier, client):
    f = redis_frontier
    client.zadd(f.keys["queue"], {"http://ghost/": 0})
    client.hset(f.keys["nodes"], "http://garbled/", b"{not json")
    client.zadd(f.keys["queue"], {"http://garbled/": 1})
    f.offer("http://ok/", None, 0, {"u": 0})
    assert f.lease(60_000).url == "http://ok/"
    assert f.skipped == 2
