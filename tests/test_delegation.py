"""IPMicra (seed 002): RIR parsing, the IP hierarchy, the delegation procedure, calibration,
load balancing, the probers and the simulator."""

from __future__ import annotations

import ipaddress
import json
import math
import os
import socket
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from webrace import delegation as D

N = ipaddress.ip_network

RIR_LINES = """\
2.3|ripencc|1712016000|5|19830705|20240401|+0200
# delegated-extended, real format
ripencc|*|ipv4|*|3|summary
ripencc|*|ipv6|*|1|summary
ripencc|*|asn|*|1|summary
ripencc|FR|ipv4|2.0.0.0|1048576|20100712|allocated|ff8a4b0c-7d6b-4a1b-9b9e-000000000001
ripencc|FR|ipv4|2.1.0.0|768|20100713|assigned|ff8a4b0c-7d6b-4a1b-9b9e-000000000001
ripencc|GB|ipv4|5.0.0.0|256|20120101|assigned|0a1b2c3d-0000-0000-0000-000000000002
ripencc|DE|ipv6|2001:678::|29|20060109|allocated|ff8a4b0c-7d6b-4a1b-9b9e-000000000001
ripencc|EU|asn|7|1|19930901|allocated|ff8a4b0c-7d6b-4a1b-9b9e-000000000001
ripencc||ipv4|5.1.0.0|256||available|
ripencc|ZZ|ipv4|5.2.0.0|256||reserved|
""".splitlines()


# -- RIR files ------------------------------------------------------------------------------


def test_parse_rir_skips_version_comment_summary_asn_and_free_space_lines():
    allocations = D.parse_rir(RIR_LINES)
    assert [a.cc for a in allocations] == ["FR", "FR", "GB", "DE"]
    assert {a.status for a in allocations} == {"allocated", "assigned"}


def test_parse_rir_turns_768_ipv4_addresses_into_two_cidr_blocks():
    allocation = D.parse_rir(RIR_LINES)[1]
    assert allocation.networks == (N("2.1.0.0/23"), N("2.1.2.0/24"))


def test_parse_rir_reads_an_ipv4_power_of_two_count_as_one_block():
    assert D.parse_rir(RIR_LINES)[0].networks == (N("2.0.0.0/12"),)


def test_parse_rir_reads_the_ipv6_value_as_a_prefix_length():
    assert D.parse_rir(RIR_LINES)[3].networks == (N("2001:678::/29"),)


def test_parse_rir_groups_records_sharing_an_opaque_id_into_one_organisation():
    fr_alloc, fr_assign, gb, de = D.parse_rir(RIR_LINES)
    assert fr_alloc.org == fr_assign.org == de.org == "ripencc:ff8a4b0c-7d6b-4a1b-9b9e-000000000001"
    assert gb.org != fr_alloc.org


def test_parse_rir_without_opaque_ids_gives_no_organisation():
    [allocation] = D.parse_rir(["2|arin|20240101|1|19700101|20240101|-0500",
                                "arin|US|ipv4|8.0.0.0|16777216|19921201|allocated"])
    assert allocation.org is None and allocation.networks == (N("8.0.0.0/8"),)


def test_parse_rir_reads_a_file_path(tmp_path):
    path = tmp_path / "delegated-ripencc-extended-latest"
    path.write_text("\n".join(RIR_LINES) + "\n")
    assert D.parse_rir(path) == D.parse_rir(str(path)) == D.parse_rir(RIR_LINES)


@pytest.mark.parametrize("line, words", [
    ("ripencc|FR|ipv4|2.0.0.0", ["<lines>:2", "expected registry|cc|type"]),
    ("ripencc|FR|ipv4|2.0.0.999|256|20100712|allocated|x", ["<lines>:2", "2.0.0.999"]),
    ("ripencc|FR|ipv4|255.255.255.0|512|20100712|allocated|x", ["<lines>:2", "512 addresses"]),
    ("ripencc|FR|ipv6|2001:678::|129|20100712|allocated|x", ["<lines>:2", "ipv6"]),
    ("ripencc|FR|ipx|1|1|20100712|allocated|x", ["<lines>:2", "'ipx'"]),
])
def test_parse_rir_rejects_a_malformed_record_naming_its_line(line, words):
    with pytest.raises(D.RirError) as error:
        D.parse_rir(["2|ripencc|20240101|1|19830705|20240101|+0100", line])
    assert all(word in str(error.value) for word in words)


@pytest.mark.parametrize("line", ["x" * 1_000_000, "ripencc|FR|" + "y" * 1_000_000 + "|1|1|2010|allocated|x",
                                  "ripencc|FR|ipv4|" + "9" * 1_000_000 + "|256|20100712|allocated|x"],
                         ids=["line", "type", "start"])
def test_parse_rir_cuts_a_huge_bad_line_or_field_in_its_message(line):
    with pytest.raises(D.RirError) as error:
        D.parse_rir(["2|ripencc|20240101|1|19830705|20240101|+0100", line])
    assert str(error.value).startswith("<lines>:2: ") and len(str(error.value)) < 1000


def test_parse_rir_of_a_missing_file_names_the_file(tmp_path):
    with pytest.raises(D.RirError, match="cannot read RIR file .*nowhere"):
        D.parse_rir(tmp_path / "nowhere")


# -- hierarchy ------------------------------------------------------------------------------


@pytest.fixture
def rir_hierarchy() -> D.Hierarchy:
    hierarchy = D.Hierarchy()
    hierarchy.add_rir(RIR_LINES)
    return hierarchy


def test_smallest_is_the_longest_prefix_match_for_ipv4_and_ipv6(rir_hierarchy):
    assert rir_hierarchy.smallest("2.1.1.200").network == N("2.1.0.0/23")
    assert rir_hierarchy.smallest("2.1.2.1").network == N("2.1.2.0/24")
    assert rir_hierarchy.smallest("2.9.0.1").network == N("2.0.0.0/12")
    assert rir_hierarchy.smallest("2001:678:7::1").network == N("2001:678::/29")


def test_smallest_of_an_address_outside_every_subnet_is_none(rir_hierarchy):
    assert rir_hierarchy.smallest("9.9.9.9") is None
    assert rir_hierarchy.smallest("2a00::1") is None


def test_user_subnets_nest_inside_rir_blocks(rir_hierarchy):
    h = rir_hierarchy
    campus = h.add_subnet("2.1.0.0/25")
    lab = h.add_subnet("2.1.0.64/26")
    v6_site = h.add_subnet("2001:678:1::/48")
    assert h.smallest("2.1.0.70") == lab
    assert h.smallest("2.1.0.10") == campus
    assert h.smallest("2001:678:1::9") == v6_site
    assert h.parent(lab) == campus
    assert h.parent(campus) == h.get("2.1.0.0/23")
    assert h.parent(h.get("2.1.0.0/23")) == h.get("2.0.0.0/12")
    assert h.parent(h.get("2.0.0.0/12")) is None
    assert h.children(h.get("2.0.0.0/12")) == [h.get("2.1.0.0/23"), h.get("2.1.2.0/24")]
    assert h.siblings(h.get("2.1.0.0/23")) == [h.get("2.1.2.0/24")]
    assert [h.depth(s) for s in (h.get("2.0.0.0/12"), h.get("2.1.0.0/23"), campus, lab)] == [0, 1, 2, 3]
    assert set(h.children(None)) == {h.get("2.0.0.0/12"), h.get("5.0.0.0/24"), h.get("2001:678::/29")}


def test_a_user_subnet_without_organisation_belongs_to_the_enclosing_one(rir_hierarchy):
    h = rir_hierarchy
    campus = h.add_subnet("2.1.0.0/25")
    other = h.add_subnet("2.1.0.128/25", org="someone-else")
    org = "ripencc:ff8a4b0c-7d6b-4a1b-9b9e-000000000001"
    assert h.organisation(campus) == org
    assert h.organisation(other) == "someone-else"
    assert campus in h.organisation_subnets(org) and h.get("2001:678::/29") in h.organisation_subnets(org)


def test_target_ip_accepts_addresses_and_urls_with_ip_literal_hosts():
    assert D.target_ip("10.0.0.1") == ipaddress.ip_address("10.0.0.1")
    assert D.target_ip("http://10.0.0.1:8080/a?b") == ipaddress.ip_address("10.0.0.1")
    assert D.target_ip("https://[2001:db8::1]/x") == ipaddress.ip_address("2001:db8::1")


def test_target_ip_asks_for_host_names_to_be_resolved():
    with pytest.raises(ValueError, match="'example.com', not an IP address: resolve it"):
        D.target_ip("http://example.com/")


# -- the delegation procedure ---------------------------------------------------------------

# 10.0.0.0/8 region
#   10.1.0.0/16 isp1: 10.1.1.0/24 org a (c1's home), 10.1.2.0/24 org b
#   10.2.0.0/16 isp2: 10.2.1.0/24 org c (c2's home)
#   10.3.0.0/16 org d
#   10.4.0.0/16 org a (a second block of a, away from its first)
# 20.0.0.0/8 far: 20.1.0.0/16 org e (c3's home)
# 2001:db8::/32 v6: 2001:db8:1::/48 org a
SUBNETS = [("10.0.0.0/8", "region"), ("10.1.0.0/16", "isp1"), ("10.1.1.0/24", "a"), ("10.1.2.0/24", "b"),
           ("10.2.0.0/16", "isp2"), ("10.2.1.0/24", "c"), ("10.3.0.0/16", "d"), ("10.4.0.0/16", "a"),
           ("20.0.0.0/8", "far"), ("20.1.0.0/16", "e"), ("2001:db8::/32", "v6"), ("2001:db8:1::/48", "a")]
HOMES = {"c1": "10.1.1.10", "c2": "10.2.1.10", "c3": "20.1.0.10"}


def small_delegator(latency: dict[tuple[str, str], float], capacity: dict[str, int] | None = None,
                    **options) -> D.Delegator:
    hierarchy = D.Hierarchy()
    for cidr, org in SUBNETS:
        hierarchy.add_subnet(cidr, org)
    prober = D.TableProber((c, ip, ms) for (c, ip), ms in latency.items())
    options.setdefault("strategy", D.SEARCH)  # these tests follow the paper's procedure step by step
    options.setdefault("lookahead", None)
    delegator = D.Delegator(hierarchy, prober, **options)
    for crawler_id, ip in HOMES.items():
        delegator.register(D.Crawler(crawler_id, ip, (capacity or {}).get(crawler_id)))
    return delegator


def everyone(ip: str, c1: float, c2: float, c3: float) -> dict[tuple[str, str], float]:
    return {("c1", ip): c1, ("c2", ip): c2, ("c3", ip): c3}


def test_register_delegates_the_smallest_subnet_containing_the_crawler():
    delegator = small_delegator({})
    h = delegator.hierarchy
    assert delegator.owner(h.get("10.1.1.0/24")) == "c1"
    assert delegator.owner(h.get("10.2.1.0/24")) == "c2"
    assert delegator.owner(h.get("20.1.0.0/16")) == "c3"
    assert delegator.owner(h.get("10.0.0.0/8")) is None


def test_url_in_a_delegated_subnet_goes_to_its_crawler_with_no_probe():
    decision = small_delegator({}).delegate("http://10.1.1.99/index.html")
    assert (decision.crawler, decision.probes, decision.reason) == ("c1", 0, D.DELEGATED)
    assert decision.subnet.network == N("10.1.1.0/24")


def test_same_organisation_crawler_under_the_threshold_takes_the_subnet():
    delegator = small_delegator(everyone("10.4.0.1", c1=40, c2=5, c3=200))
    decision = delegator.delegate("10.4.0.1")
    assert (decision.crawler, decision.reason, decision.results) == ("c1", D.ORGANISATION, {"c1": 40})


def test_same_organisation_crawler_over_the_threshold_falls_through_to_the_hierarchy():
    delegator = small_delegator(everyone("10.4.0.1", c1=70, c2=5, c3=200))
    decision = delegator.delegate("10.4.0.1")
    assert (decision.crawler, decision.reason, decision.probes) == ("c2", D.HIERARCHY, 2)
    assert list(decision.results) == ["c1", "c2"]  # c1 probed once only, though it is also in 10.0.0.0/8


def test_same_organisation_works_across_address_families():
    decision = small_delegator(everyone("2001:db8:1::5", c1=30, c2=5, c3=200)).delegate("http://[2001:db8:1::5]/")
    assert (decision.crawler, decision.reason, decision.probes) == ("c1", D.ORGANISATION, 1)


def test_bottom_up_asks_the_crawlers_of_sibling_subnets_first():
    delegator = small_delegator(everyone("10.1.2.9", c1=30, c2=5, c3=200))
    decision = delegator.delegate("10.1.2.9")
    # 10.1.1.0/24 (c1) is a sibling of 10.1.2.0/24: asked before climbing to 10.0.0.0/8,
    # and accepted under the threshold although c2 would have been faster
    assert (decision.crawler, decision.reason, decision.results) == ("c1", D.HIERARCHY, {"c1": 30})


def test_bottom_up_stops_at_the_first_probe_under_the_threshold():
    delegator = small_delegator(everyone("10.3.0.9", c1=40, c2=80, c3=1))
    decision = delegator.delegate("10.3.0.9")
    assert (decision.crawler, decision.reason) == ("c1", D.HIERARCHY)
    assert set(decision.results) == {"c1", "c2"}  # c3, only above the roots, never asked


def test_without_a_probe_under_the_threshold_the_fastest_probed_crawler_wins():
    delegator = small_delegator(everyone("10.3.0.9", c1=90, c2=80, c3=120))
    decision = delegator.delegate("10.3.0.9")
    assert (decision.crawler, decision.reason, decision.probes) == ("c2", D.FASTEST, 3)


def test_a_new_delegation_is_remembered_so_the_next_url_in_the_subnet_costs_no_probe():
    delegator = small_delegator(everyone("10.3.0.9", c1=90, c2=80, c3=120))
    first = delegator.delegate("10.3.0.9")
    second = delegator.delegate("http://10.3.200.1/page")
    assert delegator.owner(first.subnet) == "c2"
    assert (second.crawler, second.probes, second.reason) == ("c2", 0, D.DELEGATED)
    assert delegator.probe_results(first.subnet) == {"c1": 90, "c2": 80, "c3": 120}


def test_the_same_url_twice_is_one_page():
    delegator = small_delegator({})
    delegator.delegate("http://10.1.1.5/")
    delegator.delegate("http://10.1.1.5/")
    assert delegator.load("c1") == 1


def test_an_address_outside_the_hierarchy_is_probed_each_time_and_no_subnet_remembered():
    delegator = small_delegator({**everyone("99.0.0.1", 90, 10, 60), **everyone("99.0.0.2", 90, 10, 60)})
    first, second = delegator.delegate("99.0.0.1"), delegator.delegate("99.0.0.2")
    assert first.subnet is None and (first.crawler, first.probes) == ("c2", 2)
    assert (second.crawler, second.probes) == ("c2", 2)


def test_an_unreachable_crawler_counts_as_infinitely_far():
    class Prober:
        def probe(self, crawler_id, ip):
            if crawler_id == "c1":
                raise D.Unreachable("no route")
            return {"c2": 70.0, "c3": 90.0}[crawler_id]

    hierarchy = D.Hierarchy()
    for cidr, org in SUBNETS:
        hierarchy.add_subnet(cidr, org)
    delegator = D.Delegator(hierarchy, Prober(), strategy=D.SEARCH)
    for crawler_id, ip in HOMES.items():
        delegator.register(D.Crawler(crawler_id, ip))
    decision = delegator.delegate("10.1.2.3")
    assert decision.crawler == "c2" and decision.results["c1"] == math.inf


def test_delegating_with_no_crawler_registered_is_a_clear_error():
    with pytest.raises(D.DelegationError, match="no crawler is registered"):
        D.Delegator(D.Hierarchy(), D.TableProber()).delegate("10.0.0.1")


def test_delegating_a_url_with_a_host_name_asks_for_the_address():
    with pytest.raises(D.DelegationError, match="resolve it"):
        small_delegator({}).delegate("http://www.example.org/")


def test_a_latency_table_without_the_pair_names_crawler_and_address():
    with pytest.raises(D.UnknownProbe, match=r"no row for crawler 'c\d' to 10\.3\.0\.9: add a"):
        small_delegator({}).delegate("10.3.0.9")


def test_a_crawler_with_a_bad_address_is_refused_naming_it():
    with pytest.raises(D.DelegationError, match="crawler 'c9': 'ten.0.0.1' is neither an IP address nor a URL"):
        D.Crawler("c9", "ten.0.0.1")


def test_registering_a_crawler_twice_is_refused():
    delegator = small_delegator({})
    with pytest.raises(D.DelegationError, match="'c1' is already registered"):
        delegator.register(D.Crawler("c1", "10.9.9.9"))


# -- dynamic calibration --------------------------------------------------------------------


def calibrated() -> D.Delegator:
    """10.1.2.9 delegated to c1 (30 ms, sibling of c1's home); c2 is 20 ms away."""
    delegator = small_delegator(everyone("10.1.2.9", c1=30, c2=20, c3=200))
    assert delegator.delegate("http://10.1.2.9/a").crawler == "c1"
    assert delegator.report_fetch("c1", "10.1.2.9", 100.0) is None  # the page's first fetch: the baseline
    delegator.prober.set("c1", "10.1.2.9", 300.0)  # a route changed
    return delegator


def test_one_slow_fetch_does_not_redelegate():
    delegator = calibrated()
    assert delegator.report_fetch("c1", "10.1.2.9", 400.0) is None
    assert delegator.owner(delegator.hierarchy.get("10.1.2.0/24")) == "c1"


def test_repeated_slow_fetches_redelegate_the_subnet_with_fresh_probes():
    delegator = calibrated()
    assert delegator.report_fetch("c1", "10.1.2.9", 400.0) is None
    decision = delegator.report_fetch("c1", "10.1.2.9", 410.0)
    subnet = delegator.hierarchy.get("10.1.2.0/24")
    assert (decision.crawler, decision.reason) == ("c2", D.RECALIBRATED)
    assert decision.results == {"c1": 300.0, "c2": 20.0}  # the current crawler re-measured first
    assert decision.moved == (D.Move(subnet, "c1", "c2"),)
    assert (delegator.load("c1"), delegator.load("c2")) == (0, 1)
    assert delegator.assigned("http://10.1.2.9/a") == "c2"
    assert delegator.delegate("10.1.2.77").probes == 0


def test_a_normal_fetch_between_slow_ones_restarts_the_count():
    delegator = calibrated()
    assert delegator.report_fetch("c1", "10.1.2.9", 400.0) is None
    assert delegator.report_fetch("c1", "10.1.2.9", 110.0) is None
    assert delegator.report_fetch("c1", "10.1.2.9", 400.0) is None
    assert delegator.owner(delegator.hierarchy.get("10.1.2.0/24")) == "c1"


def test_the_number_of_slow_fetches_is_configurable():
    delegator = small_delegator(everyone("10.1.2.9", c1=30, c2=20, c3=200), slow_after=3)
    delegator.delegate("10.1.2.9")
    delegator.report_fetch("c1", "10.1.2.9", 100.0)
    delegator.prober.set("c1", "10.1.2.9", 300.0)
    assert [delegator.report_fetch("c1", "10.1.2.9", 400.0) is None for _ in range(3)] == [True, True, False]


def test_an_absolute_slow_threshold_counts_without_earlier_fetches():
    delegator = small_delegator(everyone("10.1.2.9", c1=30, c2=20, c3=200), slow_ms=250.0)
    delegator.delegate("10.1.2.9")
    delegator.prober.set("c1", "10.1.2.9", 300.0)
    assert delegator.report_fetch("c1", "10.1.2.9", 260.0) is None
    assert delegator.report_fetch("c1", "10.1.2.9", 260.0).crawler == "c2"


def test_fetch_reports_from_a_crawler_not_holding_the_subnet_change_nothing():
    delegator = calibrated()
    assert [delegator.report_fetch("c2", "10.1.2.9", 900.0) for _ in range(3)] == [None, None, None]


# -- load balancing -------------------------------------------------------------------------


def balancing(variance_ms: float) -> D.Delegator:
    """c1 (capacity 2) is the fastest for everything; threshold 1 ms so every crawler is
    probed and balancing has all the results."""
    latency = {**everyone("10.3.0.1", c1=10, c2=12, c3=300),   # 10.3.0.0/16: low variance
               **everyone("10.4.0.1", c1=10, c2=45, c3=300),   # 10.4.0.0/16
               **everyone("10.1.2.1", c1=5, c2=50, c3=300)}    # 10.1.2.0/24: the new one
    delegator = small_delegator(latency, {"c1": 2, "c2": 10, "c3": 10}, threshold_ms=1.0, variance_ms=variance_ms)
    assert [delegator.delegate(ip).crawler for ip in ("10.3.0.1", "10.4.0.1")] == ["c1", "c1"]
    return delegator


def test_a_full_crawler_hands_its_lowest_variance_subnet_to_the_next_best():
    delegator = balancing(variance_ms=25.0)
    decision = delegator.delegate("10.1.2.1")
    h = delegator.hierarchy
    assert (decision.crawler, decision.reason) == ("c1", D.BALANCED)
    assert decision.moved == (D.Move(h.get("10.3.0.0/16"), "c1", "c2"),)
    assert delegator.assigned("10.3.0.1") == "c2"
    assert (delegator.load("c1"), delegator.load("c2")) == (2, 1)


def test_with_no_subnet_movable_within_the_variance_band_the_url_goes_to_the_best_crawler_with_room():
    delegator = balancing(variance_ms=1.0)
    decision = delegator.delegate("10.1.2.1")
    assert (decision.crawler, decision.reason, decision.moved) == ("c2", D.BALANCED, ())
    assert delegator.owner(decision.subnet) == "c2"
    assert (delegator.load("c1"), delegator.load("c2")) == (2, 1)


def test_when_every_crawler_is_full_delegation_says_so():
    delegator = small_delegator({}, {"c1": 1, "c2": 0, "c3": 0})
    delegator.delegate("10.1.1.1")
    with pytest.raises(D.CapacityError, match="every crawler is at capacity"):
        delegator.delegate("10.1.1.2")


@st.composite
def workloads(draw):
    crawlers = draw(st.integers(2, 5))
    capacities = draw(st.lists(st.integers(0, 12), min_size=crawlers, max_size=crawlers))
    ips = draw(st.lists(st.sampled_from([f"10.{a}.{b}.{c}" for a in (1, 2, 3) for b in (0, 1, 2) for c in (1, 2, 3)]),
                        min_size=1, max_size=60))
    latency = draw(st.lists(st.floats(1, 400), min_size=crawlers * 27, max_size=crawlers * 27))
    return (capacities, ips, latency, draw(st.sampled_from([1.0, 50.0])), draw(st.sampled_from([0.0, 25.0, 500.0])),
            draw(st.sampled_from([D.KNOWLEDGE, D.SEARCH])))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads())
def test_no_crawler_is_ever_given_more_pages_than_its_capacity_by_either_strategy(workload):
    capacities, ips, latency, threshold, variance, strategy = workload
    hierarchy = D.Hierarchy()
    for a in (1, 2, 3):
        hierarchy.add_subnet(f"10.{a}.0.0/16", org=f"org{a}")
        for b in (0, 1, 2):
            hierarchy.add_subnet(f"10.{a}.{b}.0/24")
    targets = sorted({f"10.{a}.{b}.{c}" for a in (1, 2, 3) for b in (0, 1, 2) for c in (1, 2, 3)})
    crawler_ids = [f"c{n}" for n in range(len(capacities))]
    rows = [(c, ip, latency[n * len(targets) + t]) for n, c in enumerate(crawler_ids) for t, ip in enumerate(targets)]
    delegator = D.Delegator(hierarchy, D.TableProber(rows), threshold_ms=threshold, variance_ms=variance,
                            strategy=strategy)
    for n, (crawler_id, capacity) in enumerate(zip(crawler_ids, capacities, strict=True)):
        delegator.register(D.Crawler(crawler_id, f"10.{n % 3 + 1}.{n % 3}.{200 + n}", capacity))
    urls = [f"http://{ip}/p{n}" for n, ip in enumerate(ips)]
    for n, url in enumerate(urls):
        if n >= sum(capacities):
            with pytest.raises(D.CapacityError):
                delegator.delegate(url)
            break
        delegator.delegate(url)
        loads = {c: delegator.load(c) for c in crawler_ids}
        assert all(loads[c] <= cap for c, cap in zip(crawler_ids, capacities, strict=True))
        assert sum(loads.values()) == n + 1
    placed = [delegator.assigned(url) for url in urls[:sum(capacities)]]
    assert all(crawler_id is not None for crawler_id in placed)
    assert {c: placed.count(c) for c in crawler_ids} == {c: delegator.load(c) for c in crawler_ids}


@pytest.mark.parametrize("strategy", [D.KNOWLEDGE, D.SEARCH])
def test_balancing_keeps_every_crawler_within_capacity_on_simulated_crawls(strategy):
    for seed in (1, 2):
        sim = D.simulate(crawlers=6, urls=300, seed=seed, capacity=60)
        metrics = D.run_simulation(sim, strategy=strategy)
        assert metrics["max_load"] <= 60 and sum(metrics["loads"].values()) == 300


# -- probers --------------------------------------------------------------------------------


def test_tcp_prober_measures_a_connection_to_a_local_listening_socket():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        ms = D.TcpProber(port=server.getsockname()[1], timeout=5).probe("me", "127.0.0.1")
    assert math.isfinite(ms) and ms >= 0


def test_tcp_prober_reports_an_unreachable_port_naming_address_and_port():
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    with pytest.raises(D.Unreachable, match=f"TCP connect to 127.0.0.1:{port} failed"):
        D.TcpProber(port=port, timeout=5).probe("me", "127.0.0.1")


def test_http_prober_times_a_head_request_to_a_local_server():
    class Handler(BaseHTTPRequestHandler):
        def do_HEAD(self):  # noqa: N802 (http.server's naming)
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        ms = D.HttpProber(port=server.server_address[1], timeout=5).probe("me", "127.0.0.1")
    finally:
        server.shutdown()
        server.server_close()
    assert math.isfinite(ms) and ms >= 0


def test_a_prober_for_one_crawler_refuses_to_measure_for_another():
    with pytest.raises(D.ProbeError, match="measures from crawler 'c1', not 'c2'"):
        D.TcpProber(crawler_id="c1").probe("c2", "127.0.0.1")


# -- simulator ------------------------------------------------------------------------------


def test_simulation_is_deterministic_by_seed():
    a, b, c = D.simulate(4, 200, seed=7), D.simulate(4, 200, seed=7), D.simulate(4, 200, seed=8)
    assert (a.rir_lines, a.crawlers, a.latency_rows, a.urls) == (b.rir_lines, b.crawlers, b.latency_rows, b.urls)
    assert a.urls != c.urls


def test_simulated_rir_lines_build_a_hierarchy_covering_every_crawler_and_url():
    sim = D.simulate(12, 300, seed=3)
    hierarchy = D.Hierarchy()
    hierarchy.add_rir(sim.rir_lines)
    assert len({c.ip for c in sim.crawlers}) == 12
    assert all(hierarchy.smallest(c.ip) is not None for c in sim.crawlers)
    assert all(hierarchy.smallest(D.target_ip(url)) is not None for url in sim.urls)
    assert any(D.target_ip(url).version == 6 for url in sim.urls)
    assert max(hierarchy.depth(s) for s in hierarchy) >= 4


def test_simulated_optimal_crawler_is_the_fastest_in_the_latency_table():
    sim = D.simulate(4, 100, seed=1)
    latency = sim.latency()
    for ip, crawler_id in sim.optimal.items():
        assert latency[crawler_id, ip] == min(latency[c.id, ip] for c in sim.crawlers)


def test_run_simulation_reports_shares_probes_and_crawl_times():
    sim = D.simulate(4, 200, seed=2)
    ipmicra, everyone_probes, random = D.run_simulation(sim), D.run_probe_all(sim), D.run_random(sim, seed=1)
    assert everyone_probes["optimal_share"] == 1.0 and everyone_probes["probes_per_url"] == 4
    assert 0 <= ipmicra["optimal_share"] <= 1 and 0 <= ipmicra["probes_per_url"] <= 4
    assert len(ipmicra["probes"]) == 200
    assert everyone_probes["crawl_time_ms"] <= min(ipmicra["crawl_time_ms"], random["crawl_time_ms"])


def test_download_time_is_handshake_plus_slow_start_rounds_plus_expected_timeouts():
    from webrace.delegation.simulator import download_ms

    # 32 KB = 23 segments of 1,460 bytes: windows of 2, 4, 8, 16 segments, 4 rounds after the handshake
    assert download_ms(10.0) == 50.0 and download_ms(100.0) == 500.0
    assert download_ms(10.0, size=1460) == 20.0  # one segment: handshake and one round
    # loss adds 23 x loss x the 1 s minimum RTO, whoever fetches: it does not favour a crawler
    assert download_ms(10.0, 0.01) - download_ms(10.0) == download_ms(100.0, 0.01) - download_ms(100.0) == 230.0
    sim = D.simulate(4, 100, seed=3)
    assert set(sim.loss) == {str(D.target_ip(url)) for url in sim.urls} and set(sim.loss.values()) <= {
        0.0005, 0.005, 0.01}
    run = D.run_random(sim, seed=1)
    assert run["download_ms"] > 5 * run["crawl_time_ms"]  # five round trips a page at least, plus timeouts


def test_by_default_the_fastest_of_a_level_wins_not_the_first_under_the_threshold():
    # c1 and c2 both hold subnets inside 10.0.0.0/8; 10.3.0.0/16 (org d) is new to both
    # c2's home (10.2.1.0/24) shares more leading bits with 10.3.0.5 than c1's: it is asked first
    latency = {("c1", "10.3.0.5"): 12.0, ("c2", "10.3.0.5"): 40.0, ("c3", "10.3.0.5"): 90.0}
    paper = small_delegator(latency).delegate("10.3.0.5")
    ours = small_delegator(latency, lookahead=0).delegate("10.3.0.5")
    assert paper.crawler == "c2" and ours.crawler == "c1"  # the paper stops at c2's 40 ms


def test_lookahead_probes_one_more_level_before_choosing():
    # 10.1.2.0/24 (org b) sits in isp1 (10.1.0.0/16) with c1's home; c2 is one level up (10.0.0.0/8)
    latency = {("c1", "10.1.2.7"): 30.0, ("c2", "10.1.2.7"): 8.0, ("c3", "10.1.2.7"): 150.0}
    without = small_delegator(latency, lookahead=0).delegate("10.1.2.7")
    with_one = small_delegator(latency, lookahead=1).delegate("10.1.2.7")
    assert (without.crawler, without.probes) == ("c1", 1)
    assert with_one.crawler == "c2" and with_one.probes == 2 and "c3" not in with_one.results


# -- probes kept as knowledge (the default strategy) ----------------------------------------

# 10.0.0.0/8 region r; 10.1.0.0/16 organisation x with two sibling /24s; crawlers elsewhere:
# c1 in 10.9.0.0/16 (same region as x), c2 in 20.0.0.0/8, c3 in 30.0.0.0/8
KNOWN_SUBNETS = [("10.0.0.0/8", "r"), ("10.1.0.0/16", "x"), ("10.1.1.0/24", None), ("10.1.2.0/24", None),
                 ("10.9.0.0/16", "h1"), ("20.0.0.0/8", "h2"), ("30.0.0.0/8", "h3")]
KNOWN_HOMES = {"c1": "10.9.0.1", "c2": "20.0.0.1", "c3": "30.0.0.1"}


def knowing(latency: dict[tuple[str, str], float], capacity: dict[str, int] | None = None,
            **options) -> D.Delegator:
    hierarchy = D.Hierarchy()
    for cidr, org in KNOWN_SUBNETS:
        hierarchy.add_subnet(cidr, org)
    clock = iter(range(1_000_000))
    delegator = D.Delegator(hierarchy, D.TableProber((c, ip, ms) for (c, ip), ms in latency.items()),
                            clock=lambda: float(next(clock)), **options)
    for crawler_id, ip in KNOWN_HOMES.items():
        delegator.register(D.Crawler(crawler_id, ip, (capacity or {}).get(crawler_id)))
    return delegator


def far_and_near(*ips: str, c1: float = 5.0, c2: float = 80.0, c3: float = 150.0) -> dict[tuple[str, str], float]:
    return {(c, ip): ms * (1 + n / 100) for n, ip in enumerate(ips) for c, ms in (("c1", c1), ("c2", c2), ("c3", c3))}


def test_the_default_strategy_keeps_probes_as_knowledge():
    assert knowing({}).strategy == D.KNOWLEDGE
    with pytest.raises(D.DelegationError, match="strategy 'guess' is none of knowledge, search"):
        knowing({}, strategy="guess")


def test_the_first_url_anywhere_probes_every_crawler_it_knows_nothing_of():
    delegator = knowing(far_and_near("10.1.1.5"))
    decision = delegator.delegate("http://10.1.1.5/a")
    assert (decision.crawler, decision.reason, set(decision.results)) == ("c1", D.PROBED, {"c1", "c2", "c3"})


def test_a_probe_result_is_reused_for_the_next_url_of_the_same_subnet():
    delegator = knowing(far_and_near("10.1.1.5", "10.1.1.77"))
    first = delegator.delegate("http://10.1.1.5/a")
    calls = delegator.prober.calls
    second = delegator.delegate("http://10.1.1.77/b")
    assert first.probes == 3 and (second.crawler, second.probes, second.reason) == ("c1", 0, D.DELEGATED)
    assert delegator.prober.calls == calls  # not one new probe
    kept = delegator.knowledge.estimate("c2", second.ip)  # what the subnet's probe says of another host in it
    assert kept.source == ("subnet", first.subnet) and kept.ms == pytest.approx(80.0)


def test_a_sibling_subnet_is_decided_from_its_siblings_probes_without_a_probe():
    delegator = knowing(far_and_near("10.1.1.5", "10.1.2.7"))
    delegator.delegate("http://10.1.1.5/a")
    calls = delegator.prober.calls
    sibling = delegator.delegate("http://10.1.2.7/b")  # 10.1.2.0/24: a new subnet, sibling of 10.1.1.0/24
    assert (sibling.crawler, sibling.probes, sibling.reason) == ("c1", 0, D.KNOWN)
    assert delegator.prober.calls == calls and delegator.owner(sibling.subnet) == "c1"
    block = delegator.hierarchy.get("10.1.0.0/16")
    for crawler_id, ms in (("c1", 5.0), ("c2", 80.0), ("c3", 150.0)):
        estimate = delegator.knowledge.estimate(crawler_id, sibling.ip)
        assert estimate.source == ("block", block) and estimate.ms == pytest.approx(ms)


def test_the_parent_subnet_is_estimated_from_its_childrens_probes():
    delegator = knowing(far_and_near("10.1.1.5", "10.1.200.1"))
    delegator.delegate("http://10.1.1.5/a")
    parent = delegator.delegate("http://10.1.200.1/")  # its smallest subnet is 10.1.0.0/16 itself
    assert parent.subnet == delegator.hierarchy.get("10.1.0.0/16")
    assert (parent.crawler, parent.probes) == ("c1", 0)
    assert delegator.knowledge.estimate("c2", parent.ip).source == ("block", parent.subnet)


def test_a_probe_is_sent_where_the_kept_knowledge_cannot_decide():
    # in the first /24, c1 and c2 are 5 and 5.4 ms away: for the sibling, knowledge cannot tell them apart
    latency = {**far_and_near("10.1.1.5", c2=5.4), ("c1", "10.1.2.7"): 6.0, ("c2", "10.1.2.7"): 4.0,
               ("c3", "10.1.2.7"): 150.0}
    delegator = knowing(latency)
    delegator.delegate("http://10.1.1.5/a")
    sibling = delegator.delegate("http://10.1.2.7/b")
    assert sibling.crawler == "c2" and set(sibling.results) == {"c1", "c2"}  # c3, far by what is known: not asked


def test_near_tied_rivals_share_the_regret_of_a_choice_rather_than_count_it_each():
    from webrace.delegation.choice import _regret, _regrets
    from webrace.delegation.knowledge import Estimate

    best = Estimate(math.log(10.0), 0.0, ("exact",), 1)
    rival = Estimate(math.log(11.0), 0.09, ("cc", "FR"), 1)
    far = Estimate(math.log(1000.0), 0.0, ("exact",), 1)
    room = dict.fromkeys(["b", "far", "r0", "r1", "r2", "r3", "r4"], 0.0)
    alone = _regrets("b", {"b": best, "far": far, "r0": rival}, room)
    # (31-point quadrature: a few percent off where a known best puts a kink in what is saved)
    assert alone["far"] == 0.0 and alone["r0"] == pytest.approx(_regret(rival, 0.0, best, 0.0), rel=0.05)
    five = _regrets("b", {"b": best, **{f"r{n}": rival for n in range(5)}}, room)
    # E[(1 - cheapest of the five / 10 ms)+]: 0.2166 by 400,000 draws; counted rival by rival, 0.417
    assert sum(five.values()) == pytest.approx(0.2166, abs=0.003)
    assert len({round(v, 12) for v in five.values()}) == 1


def test_a_probe_of_one_crawler_teaches_of_another_placed_alike():
    hierarchy = D.Hierarchy()
    for cidr, org in (("10.9.0.0/16", "h1"), ("20.0.0.0/8", "h2"), ("30.0.0.0/8", "h3")):
        hierarchy.add_subnet(cidr, org)
    knowledge = D.Knowledge(hierarchy, clock=lambda: 0.0)
    for crawler_id, home in (("c1", "10.9.0.1"), ("c2", "10.9.0.2"), ("c3", "30.0.0.1")):
        knowledge.add_crawler(crawler_id, D.target_ip(home))
    # c1 and c2, next door to each other, are about as far from every host of h2, near or far
    for n, ms in enumerate((20.0, 60.0, 150.0, 40.0, 100.0)):
        ip = D.target_ip(f"20.0.0.{n + 1}")
        knowledge.observe("c1", ip, ms)
        knowledge.observe("c2", ip, ms * 1.05)
    ip = D.target_ip("20.0.0.99")
    assert knowledge.estimate("c2", ip).kind == "subnet"  # nothing known of this host: its subnet's spread
    knowledge.observe("c1", ip, 50.0)
    estimate = knowledge.estimate("c2", ip)  # c1's probe of the host itself is closer
    assert estimate.source[0] == "peer" and estimate.source[2] == "c1" and estimate.near
    assert estimate.ms == pytest.approx(50.0) and estimate.var < knowledge.estimate("c2", D.target_ip("20.0.0.98")).var


def test_how_a_crawler_relates_to_an_address_follows_the_hierarchy_as_it_grows():
    hierarchy = D.Hierarchy()
    hierarchy.add_subnet("10.0.0.0/8", "wide")
    knowledge = D.Knowledge(hierarchy, clock=lambda: 0.0)
    knowledge.add_crawler("c1", D.target_ip("10.200.0.1"))
    ip = D.target_ip("10.1.0.77")
    assert knowledge.relation("c1", ip) == knowledge.relation("c1", ip) == "subnet"  # one subnet (asked twice: kept)
    hierarchy.add_subnet("10.1.0.0/24", "narrow")  # the address's own organisation, known later
    assert knowledge.groups(ip)[0][1].org == "narrow"
    assert knowledge.relation("c1", ip) != "subnet"  # they share no subnet now


def test_what_knowledge_keeps_of_addresses_it_only_looked_up_is_bounded(monkeypatch):
    from webrace.delegation import knowledge as K

    monkeypatch.setattr(K, "CACHE_LIMIT", 10)
    hierarchy = D.Hierarchy()
    hierarchy.add_subnet("10.0.0.0/8", "wide")
    knowledge = D.Knowledge(hierarchy, clock=lambda: 0.0)
    knowledge.add_crawler("c1", D.target_ip("10.0.0.1"))
    for n in range(25):
        ip = D.target_ip(f"10.{n}.{n}.1" if n % 2 else f"192.0.{n}.1")  # in the hierarchy, and /24s outside
        assert knowledge.relation("c1", ip) == ("subnet" if n % 2 else "none")
    assert len(knowledge._ip_groups) <= 10 and len(knowledge._relation) <= 10


def triangulated(p_to_org: float, c_to_neighbours: float) -> D.Estimate:
    """c's triangulated latency to organisation x: p measured x and four other organisations
    about ``p_to_org`` away, c those four at about ``c_to_neighbours``."""
    hierarchy = D.Hierarchy()
    for n in range(5):
        hierarchy.add_subnet(f"{20 + n}.0.0.0/8", f"o{n}")
    knowledge = D.Knowledge(hierarchy, clock=lambda: 0.0)
    for n, spread in enumerate((1.0, 1.04, 0.97, 1.02)):
        ip = D.target_ip(f"{21 + n}.0.0.1")
        knowledge.observe("p", ip, p_to_org * spread)
        knowledge.observe("c", ip, c_to_neighbours * spread)
    x = D.target_ip("20.0.0.1")
    knowledge.observe("p", x, p_to_org)
    (found,) = knowledge._from_vicinity("c", x, 0.0)
    assert found.kind == "vicinity" and found.ms == pytest.approx(c_to_neighbours, rel=0.05)
    return found


def test_triangulation_from_near_an_organisation_is_tight_and_from_far_tells_little():
    # p next door to x and to its neighbours (5 ms): x is about where they are, 80 ms from c
    assert triangulated(5.0, 80.0).var < 0.05
    # p 55 ms from all of them: they lie anywhere on a sphere 110 ms across, and c 5 ms from the
    # neighbours may be 100 ms from x (a route 50 times slower than the estimate, once, in a
    # world with slow links); the triangle inequality leaves a factor of e and more either way
    assert triangulated(55.0, 5.0).var > 1.0


def test_knowledge_keeps_each_measurement_with_its_time_and_an_old_one_counts_less():
    hierarchy = D.Hierarchy()
    hierarchy.add_subnet("10.0.0.0/8", "r")
    now = [0.0]
    knowledge = D.Knowledge(hierarchy, clock=lambda: now[0])
    ip = D.target_ip("10.0.0.9")
    kept = knowledge.observe("c1", ip, 20.0)
    assert (kept.at, math.exp(kept.y)) == (0.0, pytest.approx(20.0))
    fresh = knowledge.estimate("c1", ip).var
    now[0] = 30 * 86400.0  # a month later the route may have changed: less certain
    assert knowledge.estimate("c1", ip).var > fresh
    knowledge.observe("c1", ip, 40.0)  # a new probe weighs more than the month-old one
    assert 30.0 < knowledge.estimate("c1", ip).ms < 40.0


def test_slow_fetches_update_the_knowledge_and_redelegate_from_it_without_new_probes():
    delegator = knowing(far_and_near("10.1.1.5", c2=20.0))
    first = delegator.delegate("http://10.1.1.5/a")
    assert first.crawler == "c1" and delegator.report_fetch("c1", "10.1.1.5", 50.0) is None  # the baseline
    assert delegator.report_fetch("c1", "10.1.1.5", 500.0) is None
    calls = delegator.prober.calls
    decision = delegator.report_fetch("c1", "10.1.1.5", 500.0)  # a second slow fetch: the route changed
    assert (decision.crawler, decision.reason, decision.probes) == ("c2", D.RECALIBRATED, 0)
    assert delegator.prober.calls == calls  # c2's kept probe decided
    assert delegator.knowledge.estimate("c1", first.ip).ms == pytest.approx(50.0)  # 5 ms, ten times slower
    assert delegator.assigned("http://10.1.1.5/a") == "c2"


def test_a_fetch_of_a_pair_never_probed_stands_for_a_probe():
    delegator = knowing(far_and_near("10.1.1.5"))
    delegator.delegate("http://10.1.1.5/a")
    delegator.report_fetch("c1", "10.1.1.5", 25.0)  # fetches take five times a probe
    ip = D.target_ip("10.1.2.99")
    assert delegator.knowledge.estimate("c1", ip).kind == "block"
    delegator.report_fetch("c1", ip, 40.0)
    estimate = delegator.knowledge.estimate("c1", ip)
    assert estimate.kind == "ip" and estimate.ms == pytest.approx(8.0)


def test_a_registry_that_misplaces_an_organisation_is_no_longer_trusted_for_it():
    # org y's block sits in region r, where c1 is 5 ms from everybody; y is hosted next to c3
    latency = {**far_and_near("10.1.1.5"), ("c1", "10.2.0.9"): 160.0, ("c2", "10.2.0.9"): 90.0,
               ("c3", "10.2.0.9"): 2.0, ("c1", "10.2.0.70"): 161.0, ("c2", "10.2.0.70"): 91.0,
               ("c3", "10.2.0.70"): 2.1}
    delegator = knowing(latency)
    delegator.hierarchy.add_subnet("10.2.0.0/16", "y")
    delegator.delegate("http://10.1.1.5/a")
    misplaced = delegator.delegate("http://10.2.0.9/")
    assert misplaced.crawler == "c3" and "c1" in misplaced.results
    region = delegator.hierarchy.get("10.0.0.0/8")
    assert delegator.knowledge.estimate("c2", D.target_ip("10.2.0.70")).source != ("node", region)


def test_probes_per_url_fall_as_knowledge_grows():
    sim = D.simulate(12, 1000, seed=11, world=D.World(regions=5, orgs=200))
    probes = D.run_simulation(sim)["probes"]
    first, last = sum(probes[:100]), sum(probes[-100:])
    assert last < first / 3


def test_capacity_is_never_exceeded_on_simulated_worlds_where_it_binds():
    sim = D.simulate(12, 600, seed=12, capacity=60, world=D.World(regions=5, orgs=150))
    metrics = D.run_simulation(sim)
    assert metrics["optimum_nearest_share"] < 1.0  # the capacities bind: not every URL can have its nearest
    assert metrics["max_load"] <= 60 and metrics["over_capacity"] == 0
    assert sorted(metrics["assignment"]) == sorted(sim.urls) and None not in metrics["assignment"].values()


def test_the_seeds_search_stays_runnable_as_the_baseline():
    sim = D.simulate(4, 200, seed=2)
    search, knowledge = D.run_simulation(sim, strategy=D.SEARCH), D.run_simulation(sim)
    assert set(search["reasons"]) & {"hierarchy", "organisation", "fastest"}
    assert set(knowledge["reasons"]) & {"known", "probed"} and not set(knowledge["reasons"]) & {"hierarchy"}


# -- the best assignment within capacity -----------------------------------------------------


def test_best_assignment_on_a_hand_made_case_moves_the_page_that_loses_least():
    # three pages all nearest to crawler 0, which takes two: page 2 loses 1 ms on crawler 1,
    # page 0 would lose 9 and page 1 would lose 8
    cost = [[1.0, 10.0], [2.0, 10.0], [3.0, 4.0]]
    assert D.best_assignment(cost, [2, 1]).tolist() == [0, 0, 1]


def test_best_assignment_on_a_hand_made_chain():
    # A takes one page, B one, C any: page 0 is best on A (1) then B (2); page 1 only fits A
    # well (1, else 50); page 2 is best on B (1) then C (30). The best: page 1 on A, page 0
    # on B, page 2 on C: 1 + 2 + 30 = 33 (greedy by page gives page 0 A, page 1 C: 1 + 50 + 1 = 52)
    cost = [[1.0, 2.0, 80.0], [1.0, 60.0, 50.0], [90.0, 1.0, 30.0]]
    chosen = D.best_assignment(cost, [1, 1, None])
    assert chosen.tolist() == [1, 0, 2]
    assert sum(cost[i][j] for i, j in enumerate(chosen)) == 33.0


def test_best_assignment_without_binding_capacities_gives_every_page_its_nearest():
    cost = [[3.0, 1.0], [1.0, 3.0], [2.0, 5.0]]
    assert D.best_assignment(cost, [None, 5]).tolist() == [1, 0, 0]


def test_best_assignment_refuses_capacities_too_small_for_the_pages():
    with pytest.raises(ValueError, match="3 pages do not fit in capacities totalling 2"):
        D.best_assignment([[1.0], [1.0], [1.0]], [2])


@pytest.mark.parametrize("seed", range(12))
def test_best_assignment_matches_brute_force_on_small_cases(seed):
    import itertools
    import random

    rng = random.Random(seed)
    pages, crawlers = rng.randint(2, 6), rng.randint(2, 3)
    cost = [[rng.choice([1, 2, 3, 5, 8, 13, 21]) + rng.random() for _ in range(crawlers)] for _ in range(pages)]
    capacities = [rng.choice([None, 1, 2, 3]) for _ in range(crawlers)]
    if sum(pages if c is None else c for c in capacities) < pages:
        capacities[0] = None
    feasible = [choice for choice in itertools.product(range(crawlers), repeat=pages)
                if all(capacities[j] is None or choice.count(j) <= capacities[j] for j in range(crawlers))]
    best = min(sum(cost[i][j] for i, j in enumerate(choice)) for choice in feasible)
    chosen = D.best_assignment(cost, capacities)
    assert all(capacities[j] is None or list(chosen).count(j) <= capacities[j] for j in range(crawlers))
    assert sum(cost[i][j] for i, j in enumerate(chosen)) == pytest.approx(best)


# -- the simulator's range of worlds ---------------------------------------------------------


@pytest.mark.parametrize("world", [
    D.World(orgs=20), D.World(orgs=500, regions=5, zipf=0.0), D.World(orgs=120, depth=4, children=(2, 3)),
    D.World(orgs=80, depth=1, non_cidr=False), D.World(orgs=100, top_blocks=False, regions=6),
], ids=lambda world: world.describe())
def test_simulated_worlds_have_the_shape_asked_for(world):
    sim = D.simulate(8, 300, seed=5, world=world)
    allocations = D.parse_rir(sim.rir_lines)
    orgs = {a.org for a in allocations if "-org-" in (a.org or "")}
    assert len(orgs) == world.orgs
    counts = [int(line.split("|")[4]) for line in sim.rir_lines if "|ipv4|" in line and "|summary" not in line]
    assert any(n & (n - 1) for n in counts) == world.non_cidr  # address counts that are not CIDR blocks
    hierarchy = sim.hierarchy()
    assert any(s.network.prefixlen == 8 for s in hierarchy) == world.top_blocks
    org_depth = max(hierarchy.depth(hierarchy.smallest(D.target_ip(url))) for url in sim.urls)
    assert org_depth >= world.depth + (2 if world.top_blocks else 0)


def test_crawlers_spread_over_the_countries_are_in_countries_of_their_own():
    sim = D.simulate(16, 50, seed=5, world=D.World(regions=4, countries=4, orgs=120, spread=True))
    hierarchy = sim.hierarchy()
    countries = [hierarchy.smallest(c.ip).cc for c in sim.crawlers]
    assert len(set(countries)) == 16


def test_routes_between_countries_can_be_asymmetric_and_slow_inside_a_region():
    from webrace.delegation.simulator import Place, _Links

    here, there, abroad = Place(0, "a", (0.0, 0.0), (0, 0)), Place(0, "b", (0.0, 0.0), (0, 1)), \
        Place(1, "c", (0.0, 0.0), (1, 0))
    asymmetric = _Links(D.World(asymmetry=0.3), seed=1)
    assert asymmetric.apply(here, there, 10.0) != asymmetric.apply(there, here, 10.0)
    assert asymmetric.apply(here, there, 10.0) == asymmetric.apply(here, there, 10.0)  # one factor a pair
    slow = _Links(D.World(slow_links=1.0), seed=1)
    assert 40.0 <= slow.apply(here, there, 10.0) <= 90.0  # a detour inside the region
    assert slow.apply(here, abroad, 10.0) == 10.0 and slow.apply(here, here, 10.0) == 10.0
    assert _Links(D.World(), seed=1).apply(here, there, 10.0) == 10.0


def test_noisy_probes_measure_the_table_with_an_error_the_table_itself_stays_the_truth():
    quiet = D.simulate(4, 50, seed=3)
    noisy = D.simulate(4, 50, seed=3, world=D.World(probe_noise=0.2))
    assert noisy.latency_rows == quiet.latency_rows
    crawler, ip, ms = noisy.latency_rows[0]
    assert quiet.prober().probe(crawler, D.target_ip(ip)) == ms
    readings = [noisy.prober().probe(crawler, D.target_ip(ip)) for _ in range(3)]
    assert all(r != ms and ms / 3 < r < ms * 3 for r in readings)


def test_a_probe_budget_raises_the_price_of_probes_once_spent_and_not_before():
    sim = D.simulate(12, 400, seed=11, world=D.World(regions=5, orgs=400, zipf=0.0))
    free = D.run_simulation(sim, probe_budget=None)
    paced = D.run_simulation(sim, probe_budget=0.3, probe_credit=2.0)
    assert paced["probes_per_url"] < free["probes_per_url"]
    assert paced["over_capacity"] == 0 and sorted(paced["assignment"]) == sorted(sim.urls)
    delegator = D.Delegator(sim.hierarchy(), sim.prober(), probe_budget=0.3, probe_credit=2.0)
    for crawler in sim.crawlers:
        delegator.register(crawler)
    assert delegator.policy.price() == 1.0  # nothing spent yet
    spent = sum(delegator.delegate(url).probes for url in sim.urls)
    assert spent > 0.3 * 400 + 2.0 * 12 and delegator.policy.overspent > 0 and delegator.policy.price() > 1.0


def test_what_a_probe_teaches_an_organisation_serves_no_more_pages_than_capacities_leave_room_for():
    sim = D.simulate(4, 40, seed=3, capacity=12)  # 48 places for 40 URLs
    delegator = D.Delegator(sim.hierarchy(), sim.prober())
    for crawler in sim.crawlers:
        delegator.register(crawler)
    for url in sim.urls[:10]:
        delegator.delegate(url)
    assert delegator.policy.worth(5) == 5.0  # 38 places left after 10 URLs: as many pages again may come
    for url in sim.urls[10:]:
        delegator.delegate(url)
    # 8 places left after 40 URLs: an organisation that had 5 of them may have 5 * 8 / 40 more, less this one's
    assert 1.0 < delegator.policy.worth(5) == 1.0 + 5 * 7 / 40 < 5.0
    unlimited = D.Delegator(sim.hierarchy(), sim.prober())
    for crawler in sim.crawlers:
        unlimited.register(D.Crawler(crawler.id, crawler.ip))
    for url in sim.urls:
        unlimited.delegate(url)
    assert unlimited.policy.worth(5) == 5.0  # no capacity: no end in sight


def test_what_a_probe_teaches_an_organisation_serves_no_more_pages_than_a_batch_has_urls_left():
    sim = D.simulate(4, 40, seed=3)
    batch = D.Delegator(sim.hierarchy(), sim.prober(), horizon=50)
    for crawler in sim.crawlers:
        batch.register(crawler)
    for url in sim.urls[:10]:
        batch.delegate(url)
    assert batch.policy.worth(5) == 5.0  # 40 URLs left after 10: as many pages again may come
    for url in sim.urls[10:]:
        batch.delegate(url)
    # 10 URLs left after 40: an organisation that had 5 of them may have 5 * 10 / 40 more
    assert batch.policy.worth(5) == 1.0 + 5 * 10 / 40
    with pytest.raises(D.DelegationError, match="horizon=-1"):
        D.Delegator(sim.hierarchy(), sim.prober(), horizon=-1)


def test_a_batchs_last_url_assigns_the_pages_again_as_a_whole_by_what_is_known_of_them_now(monkeypatch):
    from webrace.delegation import choice
    from webrace.delegation.choice import KnowledgePolicy

    monkeypatch.setattr(choice, "INQUIRE_MIN", 10**9)  # no probing at the last tenth: settling alone
    # 4 crawlers at 1.15x the fair share, noisy routes: pages were placed by what was known then
    sim = D.simulate(4, 300, seed=12, capacity=87, world=D.World(regions=3, orgs=180, path_noise=0.3))

    def run() -> tuple[D.Delegator, dict[str, str], D.Decision]:
        # a simulated clock, one second a URL: with the wall clock, measurements' drift moves
        # variances by 1e-12 from run to run, enough to turn near-ties the other way
        now = [0.0]
        # (exploring off: it teaches the run more of the pages it holds, and leaves settling less to do)
        delegator = D.Delegator(sim.hierarchy(), sim.prober(), horizon=len(sim.urls), clock=lambda: now[0],
                                explore=0.0)
        for crawler in sim.crawlers:
            delegator.register(crawler)
        for url in sim.urls[:-1]:
            delegator.delegate(url)
            now[0] += 1.0
        before = {url: delegator.assigned(url) for url in sim.urls[:-1]}
        return delegator, before, delegator.delegate(sim.urls[-1])

    def latency(delegator: D.Delegator) -> float:
        ours = D.crawl_time(sim, {url: delegator.assigned(url) for url in sim.urls})[0]
        return ours / D.crawl_time(sim, sim.best())[0]

    delegator, before, last = run()
    moved = [url for url in sim.urls[:-1] if delegator.assigned(url) != before[url]]
    assert len(moved) >= 5 and len(last.moved) >= len(moved)
    # no page moved by a country's or a registry's estimate: each went where its own address,
    # subnet or organisation was measured from
    assert all(delegator.knowledge.estimate(delegator.assigned(url), D.target_ip(url)).near for url in moved)
    assert all(delegator.load(c.id) <= c.capacity for c in sim.crawlers)
    # a batch too large to settle (its bound lowered to 298 pages, one fewer than came before the last URL)
    # ends as the same batch never settled
    monkeypatch.setattr(choice, "SETTLE_MAX_PAGES", 298)
    bounded, _, _ = run()
    monkeypatch.setattr(KnowledgePolicy, "settle", lambda self: ())
    unsettled, _, _ = run()
    assert all(bounded.assigned(url) == unsettled.assigned(url) for url in sim.urls)
    # and settling served the batch faster (1.0161x the best against 1.0299x)
    assert latency(delegator) < latency(unsettled) - 0.01


def test_a_batch_ends_at_its_horizonth_url_even_where_a_url_came_again(monkeypatch):
    from webrace.delegation.choice import KnowledgePolicy

    sim = D.simulate(4, 120, seed=12, capacity=35, world=D.World(regions=3, orgs=80))
    urls = sim.urls[:60] + sim.urls[:1] + sim.urls[60:]  # the batch's file has its first URL twice
    calls: list[int] = []
    settle, inquire = KnowledgePolicy.settle, KnowledgePolicy.inquire
    monkeypatch.setattr(KnowledgePolicy, "settle", lambda self: calls.append(self.urls) or settle(self))
    asked: list[int] = []
    monkeypatch.setattr(KnowledgePolicy, "inquire", lambda self: asked.append(self.d._delegated_urls) or inquire(self))
    delegator = D.Delegator(sim.hierarchy(), sim.prober(), horizon=len(urls))
    for crawler in sim.crawlers:
        delegator.register(crawler)
    decisions = [delegator.delegate(url) for url in urls]
    # settled once, after the last call (its 120 distinct URLs: the policy never saw the repeat)
    assert calls == [120]
    # and the last tenth's inquiry came before the 109th call of 121, the repeat counted
    assert asked == [109]
    last = decisions[-1]
    assert last.moved and last.crawler == delegator.assigned(urls[-1])
    assert all(delegator.load(c.id) <= c.capacity for c in sim.crawlers)


def test_a_batch_probes_where_its_assignment_is_least_sure_at_its_last_tenth(monkeypatch):
    from webrace.delegation import choice

    # 4 crawlers at 1.15x the fair share, noisy routes: pages were placed by what was known then
    sim = D.simulate(4, 300, seed=12, capacity=87, world=D.World(regions=3, orgs=180, path_noise=0.3))

    def run() -> tuple[float, list[int]]:
        now = [0.0]
        delegator = D.Delegator(sim.hierarchy(), sim.prober(), horizon=len(sim.urls), clock=lambda: now[0])
        for crawler in sim.crawlers:
            delegator.register(crawler)
        probes = []
        for url in sim.urls:
            probes.append(delegator.delegate(url).probes)
            now[0] += 1.0
        assert all(delegator.load(c.id) <= c.capacity for c in sim.crawlers)
        ours = D.crawl_time(sim, {url: delegator.assigned(url) for url in sim.urls})[0]
        return ours / D.crawl_time(sim, sim.best())[0], probes

    inquired, probes = run()
    # the 270th URL (the last tenth's first) sent the round's probes, and the run stayed under its bound there
    assert probes[269] > 10 and probes[269] > 3 * max(probes[250:269] + probes[270:])
    assert sum(probes[:270]) <= choice.INQUIRE_TOTAL * 300 - choice.INQUIRE_RESERVE * 30
    monkeypatch.setattr(choice, "INQUIRE_MIN", 10**9)  # the same batch without
    plain, before = run()
    assert before[269] < 10
    # and the batch was served faster for them (1.0056x the best against 1.0098x)
    assert inquired < plain - 0.002


def test_a_batch_with_a_crawler_no_probe_reaches_still_inquires_and_keeps_every_capacity(monkeypatch):
    from webrace.delegation import choice

    # 4 crawlers of 60 places for 200 URLs, one of them unreachable by every probe: the other
    # three fill up, and the round at the last tenth meets latencies that are infinite
    sim = D.simulate(4, 200, seed=3, capacity=60, world=D.World(regions=3, orgs=120))
    table, down = sim.prober(), sim.crawlers[0].id

    class Prober:
        def probe(self, crawler_id: str, ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> float:
            if crawler_id == down:
                raise D.Unreachable(f"{crawler_id} does not answer")
            return table.probe(crawler_id, ip)

    rounds: list[int] = []
    inquire = choice.KnowledgePolicy.inquire
    monkeypatch.setattr(choice.KnowledgePolicy, "inquire",
                        lambda self: rounds.append(self.d._delegated_urls) or inquire(self))
    delegator = D.Delegator(sim.hierarchy(), Prober(), horizon=200)
    for crawler in sim.crawlers:
        delegator.register(crawler)
    probes = [delegator.delegate(url).probes for url in sim.urls]
    assert rounds == [180] and probes[179] > 0
    assert all(delegator.load(c.id) <= c.capacity for c in sim.crawlers)
    assert sum(delegator.load(c.id) for c in sim.crawlers) == 200
    # the unreachable crawler took only what the others had no room for
    assert delegator.load(down) == 200 - 3 * 60


def test_a_crawlers_price_is_what_freeing_a_place_on_it_costs_along_the_cheapest_chain():
    from webrace.delegation.choice import KnowledgePolicy

    cost = np.array([[1.0, 5.0, 10.0],  # on a (capacity 1): to c costs 9 more, to b 4 more
                     [2.0, 1.0, 4.0],  # on b (capacity 1): to c costs 3 more
                     [9.0, 9.0, 3.0]])  # on c (capacity 2): it has room
    price = KnowledgePolicy._prices(cost, np.array([0, 1, 2]), np.array([1, 1, 2]))
    # c has room; b frees a place by sending its page to c (3); a by its page to b and b's to c (4 + 3 < 9)
    assert price.tolist() == [7.0, 3.0, 0.0]
    # nothing has room: no chain ends
    assert np.isinf(KnowledgePolicy._prices(cost, np.array([0, 1, 2]), np.array([1, 1, 1]))).all()


def test_a_negative_probe_budget_is_refused():
    with pytest.raises(D.DelegationError, match="probe_budget"):
        D.Delegator(D.Hierarchy(), D.TableProber(), probe_budget=-1)



class RecordingProber(D.TableProber):
    """A latency table that remembers every (crawler, address) it was asked, in order."""

    def __init__(self, rows) -> None:
        super().__init__(rows)
        self.asked: list[tuple[str, str]] = []

    def probe(self, crawler_id: str, ip) -> float:
        self.asked.append((crawler_id, str(ip)))
        return super().probe(crawler_id, ip)


def making_room(c2_knows_the_subnet: bool) -> tuple[D.Delegator, D.Decision, bool]:
    """c1 (capacity 1) holds a page of its own subnet (10.9.0.7, taken with no probe); the next
    page (10.1.1.5) is 2 ms from c1 and 100 ms from c2, so c1 makes room by moving the first
    page to c2, which nothing but the region's 10.5.0.9 tells of (or, with
    ``c2_knows_the_subnet``, c2's earlier measurement of another host of c1's subnet).
    Returns the delegator, the second page's decision, and whether c2's estimate of the first
    page was backed by something near (its subnet or organisation) before that decision."""
    hierarchy = D.Hierarchy()
    for cidr, org in [*KNOWN_SUBNETS, ("10.5.0.0/16", "w")]:
        hierarchy.add_subnet(cidr, org)
    latency = {("c1", "10.9.0.7"): 1.0, ("c2", "10.9.0.7"): 20.0, ("c3", "10.9.0.7"): 200.0,
               ("c1", "10.1.1.5"): 2.0, ("c2", "10.1.1.5"): 100.0, ("c3", "10.1.1.5"): 200.0}
    clock = iter(range(1_000_000))
    # exploring off: these are the probes of the move itself (exploring's own tests are below)
    delegator = D.Delegator(hierarchy, RecordingProber((c, ip, ms) for (c, ip), ms in latency.items()),
                            clock=lambda: float(next(clock)), explore=0.0)
    for crawler_id, ip in KNOWN_HOMES.items():
        delegator.register(D.Crawler(crawler_id, ip, 1 if crawler_id == "c1" else None))
    for crawler_id, ms in (("c1", 10.0), ("c2", 20.0), ("c3", 200.0)):  # kept from before: region r
        delegator.knowledge.observe(crawler_id, D.target_ip("10.5.0.9"), ms)
    if c2_knows_the_subnet:
        delegator.knowledge.observe("c2", D.target_ip("10.9.0.99"), 20.0)
    first = delegator.delegate("http://10.9.0.7/own")
    assert (first.crawler, first.probes, delegator.prober.asked) == ("c1", 0, [])
    near = delegator.knowledge.estimate("c2", first.ip).near
    return delegator, delegator.delegate("http://10.1.1.5/next"), near


def test_a_page_moved_to_make_room_is_probed_at_its_target_first_when_nothing_near_backs_the_estimate():
    delegator, decision, near = making_room(c2_knows_the_subnet=False)
    first_ip = D.target_ip("10.9.0.7")
    assert not near  # c2's latency to the first page: only the region's estimate
    assert decision.crawler == "c1" and delegator.assigned("http://10.9.0.7/own") == "c2"
    assert [(m.source, m.target) for m in decision.moved] == [("c1", "c2")]
    # the move was checked where it goes: c2 probed at the moved page's own address, and counted
    assert ("c2", "10.9.0.7") in delegator.prober.asked
    assert decision.probes == len(decision.results) + 1
    assert delegator.knowledge.estimate("c2", first_ip).source == ("ip", first_ip)
    assert max(delegator.load(c) - (delegator.crawlers[c].capacity or 99) for c in delegator.crawlers) <= 0


def test_a_page_moved_where_its_subnet_was_measured_is_moved_without_a_probe():
    delegator, decision, near = making_room(c2_knows_the_subnet=True)
    assert near
    assert decision.crawler == "c1" and delegator.assigned("http://10.9.0.7/own") == "c2"
    assert ("c2", "10.9.0.7") not in delegator.prober.asked
    assert decision.probes == len(decision.results)


def exploring(explore: float, held: dict[str, str] | None = None,
              spent: int = 0) -> tuple[D.Delegator, D.Decision]:
    """c1 (full) holds y (10.1.2.5: 10 ms from c1, truly 15 from c2, but estimated at 100 ms
    with a wide spread, as a region's estimate is), or the pages ``held`` (key -> address, all
    alike); the next page x (10.1.1.5) is 2 ms from c1, 100 from c2, 200 from c3; the URLs
    before it spent ``spent`` probes. Returns the delegator (``explore`` probes a URL) and x's
    decision."""
    from webrace.delegation.knowledge import Estimate

    held = held or {"y": "10.1.2.5"}
    latency = {**everyone("10.1.1.5", 2.0, 100.0, 200.0)}
    for ip in held.values():
        latency.update(everyone(ip, 10.0, 15.0, 200.0))
    delegator = small_delegator(latency, {"c1": len(held)}, strategy=D.KNOWLEDGE, explore=explore)
    delegator.prober = RecordingProber((c, ip, ms) for (c, ip), ms in latency.items())
    policy = delegator.policy
    delegator._give(list(held), None, "c1")
    for key, ip in held.items():
        policy.ips[key] = D.target_ip(ip)
        policy._set_row(key, {"c1": Estimate.exact(10.0), "c2": Estimate(math.log(100.0), 0.5, ("relation", "cc")),
                              "c3": Estimate(math.log(200.0), 0.5, ("relation", "none"))})
    if spent:
        policy.recent.append((0, spent))
        policy.recent_probes += spent
    return delegator, delegator.delegate("http://10.1.1.5/x")


def test_exploring_finds_the_page_a_full_crawler_holds_that_is_cheap_to_send_away():
    delegator, decision = exploring(explore=1.0)
    # c2 probed at y's address, where the estimate said 100 ms and the truth is 15: y moves there
    assert ("c2", "10.1.2.5") in delegator.prober.asked
    assert decision.crawler == "c1" and delegator.assigned("y") == "c2"
    assert [(m.source, m.target) for m in decision.moved] == [("c1", "c2")]
    assert decision.probes == len(decision.results) + 1  # the exploring probe is counted
    assert all(delegator.load(c) <= (delegator.crawlers[c].capacity or 99) for c in delegator.crawlers)


def test_without_exploring_the_page_held_stays_and_the_new_one_goes_far():
    delegator, decision = exploring(explore=0.0)
    assert ("c2", "10.1.2.5") not in delegator.prober.asked
    assert decision.crawler == "c2" and delegator.assigned("y") == "c1"


def test_exploring_is_the_default_and_stops_where_the_last_urls_spent_the_ceiling():
    from webrace.delegation.choice import EXPLORE_CEILING, EXPLORE_WINDOW

    delegator, decision = exploring(explore=1.0)
    assert delegator.explore == D.Delegator(D.Hierarchy(), D.TableProber([])).explore == 1.0
    # the URLs before x spent the ceiling: what they left for exploring is nothing
    delegator, decision = exploring(explore=1.0, spent=int(EXPLORE_CEILING * EXPLORE_WINDOW))
    assert ("c2", "10.1.2.5") not in delegator.prober.asked
    assert decision.crawler == "c2" and delegator.assigned("y") == "c1"


def test_exploring_looks_first_at_the_organisation_with_most_pages_held_and_learns_them_all(monkeypatch):
    from webrace.delegation import choice

    monkeypatch.setattr(choice, "MAX_EXPLORE", 1)  # one exploring probe: what it taught, not what more would
    # y (organisation d) and z1, z2 (organisation b) are estimated alike; a probe of b teaches two pages
    delegator, decision = exploring(explore=1.0, held={"y": "10.3.0.5", "z1": "10.1.2.5", "z2": "10.1.2.6"})
    asked = delegator.prober.asked
    assert ("c2", "10.1.2.5") in asked and ("c2", "10.3.0.5") not in asked and ("c2", "10.1.2.6") not in asked
    # z2's row was estimated again from its organisation's probe: near 15 ms from c2, not 100
    c2 = list(delegator.crawlers).index("c2")
    assert delegator.policy.rows["z2"][c2] < 30
    assert decision.crawler == "c1" and delegator.assigned("y") == "c1"
    assert {delegator.assigned("z1"), delegator.assigned("z2")} == {"c1", "c2"}


@pytest.mark.parametrize("explore", [-0.1, 4.5, math.nan])
def test_an_explore_rate_out_of_range_is_refused(explore):
    with pytest.raises(D.DelegationError, match="explore="):
        small_delegator({}, strategy=D.KNOWLEDGE, explore=explore)


def test_a_simulated_run_delegates_alike_under_every_hash_seed():
    # the bench's figures are one run each: they must not depend on the interpreter's hash order
    script = ("import json; from webrace import delegation as D\n"
              "sim = D.simulate(4, 300, seed=12, capacity=87, world=D.World(regions=3, orgs=180, path_noise=0.3))\n"
              "m = D.run_simulation(sim)\n"
              "print(json.dumps([m['assignment'], m['probes']]))\n")
    runs = [json.loads(subprocess.run([sys.executable, "-c", script], check=True, capture_output=True, text=True,
                                      env={**os.environ, "PYTHONHASHSEED": seed}).stdout)
            for seed in ("1", "3")]
    assert runs[0] == runs[1]


@pytest.mark.parametrize("strategy", [D.KNOWLEDGE, D.SEARCH])
def test_where_pages_cannot_move_a_full_crawler_is_passed_over_and_every_page_stays_where_it_was_decided(strategy):
    sim = D.simulate(4, 300, seed=12, capacity=80, world=D.World(regions=3, orgs=180, path_noise=0.3))
    delegator = D.Delegator(sim.hierarchy(), sim.prober(), strategy=strategy, horizon=len(sim.urls), movable=False,
                            clock=lambda: 0.0)
    for crawler in sim.crawlers:
        delegator.register(crawler)
    decisions = {url: delegator.delegate(url) for url in sim.urls}
    assert all(not d.moved for d in decisions.values())
    assert all(delegator.assigned(url) == d.crawler for url, d in decisions.items())
    assert all(delegator.load(c.id) <= c.capacity for c in sim.crawlers)
    assert sum(d.crawler != sim.optimal[str(D.target_ip(url))] for url, d in decisions.items()) >= 20  # it binds
    delegator.set_loads({c.id: c.capacity for c in sim.crawlers})  # 320 places: the rest taken elsewhere
    with pytest.raises(D.CapacityError):
        delegator.delegate(sim.urls[0].replace("/p0.html", "/other.html"))


def test_loads_counted_elsewhere_replace_a_delegators_own_and_a_forgotten_page_frees_its_place():
    delegator = D.Delegator(D.Hierarchy(), D.TableProber([("a", "10.0.0.1", 1.0), ("b", "10.0.0.1", 5.0)]))
    delegator.register(D.Crawler("a", "10.0.0.9", capacity=2))
    delegator.register(D.Crawler("b", "10.0.1.9", capacity=2))
    delegator.set_loads({"a": 2, "nobody": 7})
    assert delegator.delegate("10.0.0.1").crawler == "b" and delegator.load("b") == 1
    delegator.forget("10.0.0.1")
    assert delegator.load("b") == 0 and delegator.assigned("10.0.0.1") is None


def test_a_jittered_clock_gives_its_own_run_the_same_every_time_and_within_capacity():
    sim = D.simulate(4, 300, seed=12, capacity=87, world=D.World(regions=3, orgs=180, path_noise=0.3))
    exact = D.run_simulation(sim)
    assert D.run_simulation(sim, jitter=0)["assignment"] == exact["assignment"]
    jittered = [D.run_simulation(sim, jitter=k) for k in (1, 1, 2)]
    assert jittered[0]["assignment"] == jittered[1]["assignment"]  # seeded: the same jitter, the same run
    assert all(r["over_capacity"] == 0 for r in jittered)
    # near-ties turn on a millisecond's reading error: some run differs from the exact one
    assert any(r["assignment"] != exact["assignment"] for r in jittered)


def test_a_batch_explores_up_to_more_probes_a_url_before_its_last_tenth_and_never_past_its_run_bound():
    from webrace.delegation import choice

    def may(urls: int, window: int, spent: int, horizon: int | None = 1000) -> bool:
        policy = small_delegator({}, strategy=D.KNOWLEDGE, horizon=horizon).policy
        policy.urls, policy.spent = urls, spent
        policy.recent.append((urls, window))  # the last 100 URLs' probes, all at this URL
        policy.recent_probes = window
        return policy._may_explore(0)

    early, late = choice.EXPLORE_CEILING_EARLY * 100, choice.EXPLORE_CEILING * 100
    assert early > late
    assert may(500, int(late) + 10, 600) and not may(500, int(early), 600)  # before the last tenth: 1.5 a URL
    assert not may(950, int(late) + 10, 1100) and may(950, int(late) - 10, 1100)  # the last tenth: 0.9
    assert not may(500, 10, int(choice.EXPLORE_TOTAL * 500))  # the run's bound
    # a stream has no last tenth and no run's bound: the 0.9 ceiling only
    assert not may(500, int(late) + 10, 0, horizon=None) and may(500, 10, 10_000, horizon=None)


# -- issue 48: a batch's work a URL independent of its size -------------------------------------


def _batch(urls: int, seed: int = 5) -> D.Delegator:
    """12 crawlers at 1.1x the fair share (capacities bind), an organisation a ten URLs, delegated
    as a batch (``horizon``), like `scrapy ipmicra delegate`."""
    sim = D.simulate(12, urls, seed, capacity=math.ceil(1.1 * urls / 12), world=D.World(regions=4, orgs=urls // 10))
    now = [0.0]
    delegator = D.Delegator(sim.hierarchy(), sim.prober(), horizon=urls, clock=lambda: now[0])
    for crawler in sim.crawlers:
        delegator.register(crawler)
    for url in sim.urls:
        delegator.delegate(url)
        now[0] += 1.0
    return delegator


def test_beyond_the_bound_a_batch_estimates_and_weighs_rows_in_work_linear_in_its_urls(monkeypatch):
    # the bounds scaled down to this test's sizes (1,000 pages placed, 256 pages of an organisation,
    # 256 of a crawler explored, in a batch): four times the URLs, at most 1.5 times the work a URL,
    # counted as the estimates made for rows (a row is 12, one a crawler) and the pages explored.
    # Unbounded, the estimates a URL went from 241 to 704 here (every crawler's, for every page of
    # an organisation after each exploring probe, every full crawler's page after each surprise)
    from webrace.delegation import choice

    monkeypatch.setattr(choice, "UNBOUNDED_PAGES", 100)
    monkeypatch.setattr(choice, "SETTLE_MAX_PAGES", 100)
    monkeypatch.setattr(choice, "ORG_ROWS", 16)
    monkeypatch.setattr(choice, "EXPLORE_PAGES", 32)
    work = {}
    for urls in (300, 1200):
        stats = _batch(urls).stats
        estimates = 12 * stats["delegation/rows_estimated"] + stats["delegation/cells_estimated"]
        work[urls] = (estimates / urls, stats["delegation/rows_weighed"] / urls)
        assert stats["delegation/cells_estimated"] > 0 and stats["delegation/rows_weighed"] > urls  # explored
    for small, large in zip(work[300], work[1200], strict=True):
        assert large <= 1.5 * small, work


def test_the_kept_stacks_give_the_ways_stacked_anew_from_every_page():
    # the edges of the ways to make room, read from the stacks kept as pages move and rows are
    # estimated again, are those stacked from every page of each full crawler, as before issue 48
    delegator = _batch(300)
    policy = delegator.policy
    ids = list(delegator.crawlers)
    policy._sync(ids)
    full = [c for c in ids if not delegator._room(c, 1)]
    assert full
    for crawler in full:
        keys = sorted(delegator._held[crawler])
        rows = np.vstack([policy._row(policy.rows, key, len(ids)) for key in keys])
        cautious = np.vstack([policy._row(policy.cautious, key, len(ids)) for key in keys])
        with np.errstate(invalid="ignore"):
            extra = cautious - rows[:, ids.index(crawler)][:, None]
        extra[~np.isfinite(extra)] = np.inf
        cheapest = extra.argmin(axis=0)
        expected = {b: (float(extra[cheapest[j], j]), keys[cheapest[j]]) for j, b in enumerate(ids)
                    if b != crawler and math.isfinite(extra[cheapest[j], j])}
        assert policy._edges(crawler, ids) == expected


def test_a_batch_on_a_clock_standing_at_a_whole_second_delegates_alike_whatever_the_second():
    # `scrapy ipmicra delegate` stands its clock still on the whole second it starts: at 1764390000.123
    # and at 1764390077.9 this batch was delegated differently (a sum of n equal fractional times over n
    # is not always that time again, and the drift terms turned near-ties); at whole seconds, alike
    sim = D.simulate(8, 300, 1, capacity=42, world=D.World(regions=5, orgs=30))
    found = []
    for second in (1764390000.0, 1764390077.0):
        delegator = D.Delegator(sim.hierarchy(), sim.prober(), horizon=len(sim.urls), clock=lambda s=second: s)
        for crawler in sim.crawlers:
            delegator.register(crawler)
        for url in sim.urls:
            delegator.delegate(url)
        found.append({url: delegator.assigned(url) for url in sim.urls})
    assert found[0] == found[1]
