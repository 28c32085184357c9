"""IPMicra (seed 002): location-aware delegation of URLs to distributed crawlers through an
IP address hierarchy built from Regional Internet Registry data.

    from webrace import delegation as D
    hierarchy = D.Hierarchy()
    hierarchy.add_rir("delegated-ripencc-extended-latest")
    hierarchy.add_subnet("193.92.0.0/20")                # finer subnets the user knows of
    delegator = D.Delegator(hierarchy, D.TableProber(rows))  # probes kept as knowledge; strategy="search": the seed's
    delegator.register(D.Crawler("c1", "193.92.1.7", capacity=10_000))
    decision = delegator.delegate("http://193.92.3.4/")  # -> Decision(crawler, ip, subnet, probes, reason)
    delegator.knowledge.estimate("c1", D.target_ip("193.92.9.9"))  # what the kept probes say, with uncertainty
    delegator.report_fetch("c1", "193.92.3.4", 840.0)    # calibration: a Decision when it re-delegates

Pure library: no Scrapy, no Redis. Longest-prefix lookups use py-radix (see ``hierarchy``); the best
assignment within capacity uses scipy (``optimum``).
"""

from webrace.delegation.delegator import (
    BALANCED,
    DELEGATED,
    FASTEST,
    HIERARCHY,
    KNOWLEDGE,
    KNOWN,
    ORGANISATION,
    PROBED,
    RECALIBRATED,
    SEARCH,
    CapacityError,
    Crawler,
    Decision,
    DelegationError,
    Delegator,
    Move,
)
from webrace.delegation.hierarchy import Hierarchy, Subnet, target_ip
from webrace.delegation.knowledge import Estimate, Knowledge
from webrace.delegation.optimum import best_assignment
from webrace.delegation.probing import HttpProber, ProbeError, Prober, TableProber, TcpProber, UnknownProbe, Unreachable
from webrace.delegation.rir import Allocation, RirError, parse_rir
from webrace.delegation.simulator import (
    Simulation,
    World,
    crawl_time,
    nearest_share,
    run_probe_all,
    run_random,
    run_simulation,
    simulate,
)

__all__ = ["BALANCED", "DELEGATED", "FASTEST", "HIERARCHY", "KNOWLEDGE", "KNOWN", "ORGANISATION", "PROBED",
           "RECALIBRATED", "SEARCH", "Allocation", "CapacityError", "Crawler", "Decision", "DelegationError",
           "Delegator", "Estimate", "Hierarchy", "HttpProber", "Knowledge", "Move", "ProbeError", "Prober",
           "RirError", "Simulation", "Subnet", "TableProber", "TcpProber", "UnknownProbe", "Unreachable", "World",
           "best_assignment", "crawl_time", "nearest_share", "parse_rir", "run_probe_all", "run_random",
           "run_simulation", "simulate", "target_ip"]
