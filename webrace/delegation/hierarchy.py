"""The IP address hierarchy (seed 002, section III.D): a tree of subnets built from RIR data
plus any finer subnets the user adds. A subnet's parent is the smallest subnet strictly
containing it; the subnets no other subnet contains are the roots (the registries' large
blocks), below one synthetic root for the whole address space (``None`` here).

Longest-prefix lookups go through py-radix (module ``radix``) rather than pytricia: one
py-radix tree holds IPv4 and IPv6 prefixes together (pytricia wants a tree per address
width), it answers "every prefix covering this one" and "every prefix inside this one"
directly (``search_covering``/``search_covered``: parents, subtrees), and it ships
manylinux wheels with a pure-Python fallback, so installing it needs no C compiler.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import radix

from webrace.delegation.rir import Allocation, IPNetwork, parse_rir

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclass(frozen=True)
class Subnet:
    """A node of the hierarchy. Equal and hashed by its network alone; ``org`` is the
    organisation it was registered with (``None``: the organisation of its parent)."""

    network: IPNetwork
    org: str | None = field(default=None, compare=False)
    registry: str = field(default="", compare=False)
    cc: str = field(default="", compare=False)
    status: str = field(default="", compare=False)
    # the hash dataclass gives (of the network alone), computed once: subnets key the knowledge's
    # every statistic, and an ipaddress network hashes in Python (issue 48: 8% of a batch)
    _hash: int = field(default=0, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_hash", hash((self.network,)))

    def __hash__(self) -> int:
        return self._hash

    @property
    def prefix(self) -> str:
        return str(self.network)

    def __str__(self) -> str:
        return self.prefix


def target_ip(target: str | IPAddress) -> IPAddress:
    """The IP address of a delegation target: an address, or a URL whose host is an IPv4 or
    IPv6 literal (``http://[2001:db8::1]/``). Host names must be resolved by the caller."""
    if isinstance(target, ipaddress.IPv4Address | ipaddress.IPv6Address):
        return target
    text = str(target).strip()
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        pass
    host = urlsplit(text).hostname if "//" in text else None
    if host is None:
        raise ValueError(f"{text!r} is neither an IP address nor a URL")
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        raise ValueError(f"the host of {text!r} is {host!r}, not an IP address: resolve it and delegate the "
                         "address") from None


class Hierarchy:
    """Subnets from RIR files and the user, with longest-prefix lookup, parent, children,
    siblings, depth and organisation."""

    def __init__(self) -> None:
        self._tree = radix.Radix()
        self._index: _Index | None = None

    # -- building -----------------------------------------------------------------------

    def add_rir(self, source: str | os.PathLike | Iterable[str]) -> list[Subnet]:
        """Add every allocation of a delegated(-extended) file (path or lines)."""
        return [subnet for allocation in parse_rir(source) for subnet in self.add_allocation(allocation)]

    def add_allocation(self, allocation: Allocation) -> list[Subnet]:
        return [self._add(Subnet(network, allocation.org, allocation.registry, allocation.cc, allocation.status))
                for network in allocation.networks]

    def add_subnet(self, cidr: str | IPNetwork, org: str | None = None) -> Subnet:
        """Add a finer (or any) subnet. Without ``org`` it belongs to the organisation of
        the smallest subnet containing it."""
        try:
            network = ipaddress.ip_network(cidr)
        except ValueError as exc:
            raise ValueError(f"bad subnet {cidr!r}: {exc}") from None
        return self._add(Subnet(network, org, status="user"))

    def _add(self, subnet: Subnet) -> Subnet:
        node = self._tree.search_exact(subnet.prefix)
        if node is not None:
            old = node.data["subnet"]
            if subnet.org is None or old.org == subnet.org:
                return old  # a repeated record adds nothing
        else:
            node = self._tree.add(subnet.prefix)
        node.data["subnet"] = subnet
        self._index = None
        return subnet

    # -- lookups ------------------------------------------------------------------------

    def smallest(self, ip: str | IPAddress) -> Subnet | None:
        """The smallest subnet containing ``ip`` (longest-prefix match), if any. An IPv6 address
        with a scope id (``fe80::1%eth0``, a link-local zone: a hostile page may link to one) is
        in none: no registry allocates a zone."""
        address = target_ip(ip)
        if getattr(address, "scope_id", None):
            return None
        node = self._tree.search_best(str(address))
        return None if node is None else node.data["subnet"]

    def get(self, cidr: str | IPNetwork) -> Subnet | None:
        node = self._tree.search_exact(str(ipaddress.ip_network(cidr)))
        return None if node is None else node.data["subnet"]

    def subtree(self, subnet: Subnet) -> list[Subnet]:
        """``subnet`` and every subnet inside it."""
        return [node.data["subnet"] for node in self._tree.search_covered(subnet.prefix)]

    def parent(self, subnet: Subnet) -> Subnet | None:
        """The smallest subnet strictly containing ``subnet`` (``None``: it is a root)."""
        return self.index.parent.get(subnet)

    def children(self, subnet: Subnet | None) -> list[Subnet]:
        """The subnets whose parent is ``subnet``; ``None`` (the synthetic root): the roots."""
        return list(self.index.children.get(subnet, ()))

    def siblings(self, subnet: Subnet) -> list[Subnet]:
        """The other children of ``subnet``'s parent (other roots for a root)."""
        return [s for s in self.children(self.parent(subnet)) if s != subnet]

    def depth(self, subnet: Subnet) -> int:
        """0 for a root, 1 for its children..."""
        return self.index.depth[subnet]

    def organisation(self, subnet: Subnet) -> str | None:
        """The organisation of ``subnet``: its own, or its nearest ancestor's."""
        return self.index.org.get(subnet)

    def organisation_subnets(self, org: str) -> list[Subnet]:
        """Every subnet of organisation ``org`` (inherited organisations included)."""
        return list(self.index.members.get(org, ()))

    def __len__(self) -> int:
        return len(self._tree.prefixes())

    def __iter__(self) -> Iterator[Subnet]:
        return (node.data["subnet"] for node in self._tree.nodes())

    def __contains__(self, cidr: object) -> bool:
        try:
            return self.get(cidr) is not None  # type: ignore[arg-type]
        except (TypeError, ValueError):
            return False

    @property
    def index(self) -> _Index:
        """Parents, children, depths and organisations, rebuilt after the hierarchy changes."""
        if self._index is None:
            self._index = _Index(self)
        return self._index


class _Index:
    """Whole-tree relations computed in one pass, larger blocks before the blocks inside them."""

    def __init__(self, hierarchy: Hierarchy) -> None:
        self.parent: dict[Subnet, Subnet] = {}
        self.children: dict[Subnet | None, list[Subnet]] = {}
        self.depth: dict[Subnet, int] = {}
        self.org: dict[Subnet, str] = {}
        self.members: dict[str, list[Subnet]] = {}
        tree = hierarchy._tree
        for subnet in sorted(hierarchy, key=lambda s: (s.network.version, s.network.prefixlen, s.network)):
            covering = [node.data["subnet"] for node in tree.search_covering(subnet.prefix)
                        if node.prefixlen < subnet.network.prefixlen]
            parent = max(covering, key=lambda s: s.network.prefixlen, default=None)
            self.children.setdefault(parent, []).append(subnet)
            self.depth[subnet] = 0 if parent is None else self.depth[parent] + 1
            if parent is not None:
                self.parent[subnet] = parent
            org = subnet.org or (self.org.get(parent) if parent is not None else None)
            if org is not None:
                self.org[subnet] = org
                self.members.setdefault(org, []).append(subnet)
