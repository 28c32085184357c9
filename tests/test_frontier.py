from webrace.records.rounds import DONE, Offer
from webrace.rounds.frontier import Frontier


def test_first_offer_is_new_and_keeps_budgets():
    f = Frontier()
    assert f.offer("http://a/", None, 0, {"u1": 2}) == (Offer.NEW, {"u1": 2})
    assert f.get("http://a/").budgets == {"u1": 2}


def test_offer_adding_a_urd_merges_it():
    f = Frontier()
    f.offer("http://a/", None, 1, {"u1": 2})
    assert f.offer("http://a/", None, 0, {"u2": 0}) == (Offer.MERGED, {"u2": 0})
    assert f.get("http://a/").budgets == {"u1": 2, "u2": 0}
    assert f.get("http://a/").depth == 0


def test_offer_with_more_depth_left_merges_only_the_gain():
    f = Frontier()
    f.offer("http://a/", None, 2, {"u1": 1, "u2": 3})
    assert f.offer("http://a/", None, 1, {"u1": 2, "u2": 1}) == (Offer.MERGED, {"u1": 2})
    assert f.get("http://a/").budgets == {"u1": 2, "u2": 3}


def test_offer_adding_nothing_is_a_duplicate():
    f = Frontier()
    f.offer("http://a/", None, 0, {"u1": 2})
    assert f.offer("http://a/", "http://b/", 3, {"u1": 1}) == (Offer.DUPLICATE, {})


def test_a_claimed_redirect_target_is_the_same_node_object_as_the_page_that_redirected():
    f = Frontier()
    f.offer("http://b/", None, 0, {"u1": 0})
    assert f.claim("http://c/", f.get("http://b/")) == (True, {}, "pending")
    assert f.get("http://c/") is f.get("http://b/")


def test_finish_ends_urds_whose_last_pending_page_it_was():
    f = Frontier()
    f.offer("http://a/", None, 0, {"u1": 1, "u2": 0})
    f.offer("http://b/", None, 0, {"u1": 1})
    assert f.active_urds() == {"u1"}
    assert f.finish(f.get("http://a/"), DONE, {"u1": 1, "u2": 0}) == (set(), {})
    assert f.finish(f.get("http://b/"), DONE, {"u1": 1}) == ({"u1"}, {})
    assert f.active_urds() == set()


def test_finish_refuses_while_budgets_merged_since_are_not_followed():
    f = Frontier()
    f.offer("http://a/", None, 0, {"u1": 1})
    node = f.get("http://a/")
    f.offer("http://a/", None, 0, {"u2": 2})  # merged while the page was being processed
    assert f.finish(node, DONE, {"u1": 1}) == (set(), {"u2": 2})
    assert node.state == "pending"
    assert f.finish(node, DONE, {"u1": 1, "u2": 2}) == ({"u1", "u2"}, {})
    assert node.state == DONE
