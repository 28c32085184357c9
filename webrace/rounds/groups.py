"""Owners grouped, not multiplied: the URDs of a round that share a start page, a scope and a
depth reach the same pages with the same depth left, so a round carries them as one *group*
(pure: no Scrapy, no Twisted).

A frontier node, a request and the lease of a shared round hold a group's id and its depth
budget, never its members: a page reached for 10 URDs or for 10,000 that share their start
page costs the same. A group is named by its first member's id (in sorted order), so every
worker of a shared round names it alike, and components that look a URD id up (the redirect
scope check) find a URD with the group's start page and scope. Members are expanded only
where a person's name is needed: the owners on a page's item, the URDs its keywords are
judged for, the stats of a page budget reached.

Scope is decided once per link and scope: :func:`~webrace.urls.scope_anchor` gives what a
link must share with a group's start page (its host, its registrable domain, or nothing), and
groups with the same anchor share one decision.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from webrace.urd import Urd
from webrace.urls import hostname, registered_domain, scope_anchor


class Members(list):
    """A list of owners or URD ids shared by every page the same groups reached: the page
    items hold this one list instead of a copy each (feeds encode it once, see
    :mod:`webrace.exporters`). It cannot be changed: copy it (``list(members)``) to."""

    __slots__ = ()

    def _refuse(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("a page's owners are shared by every page the same groups reached: copy the list to change it")

    append = extend = insert = remove = pop = clear = sort = reverse = _refuse
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse

    def __reduce__(self) -> tuple:  # pickled (a disk queue, a process pool) as the plain list it reads as
        return (list, (list(self),))


OWNERS_KEPT = 4096  # distinct sets of groups whose owners are kept (a page's item asks once per set)
SENTINEL_PREFIX = "sentinel-"  # pseudo-URDs fetching the pages of due sentinels


@dataclass(frozen=True)
class Group:
    id: str  # its first member's id
    url: str  # the start page its members share
    scope: str
    depth: int
    members: tuple[str, ...]  # URD ids, sorted
    anchor: tuple[str, str]  # what a link shares with the start page to be in scope (scope_anchor)
    timing: int = 0  # the shortest timing of its members (ms; 0 for one a person asked to crawl now)
    key: str | None = None  # its reach key (None: only sentinels' pseudo-URDs), see reach_key


def reach_key(url: str, scope: str, depth: int) -> str:
    """What names the pages a URD reaches across rounds: URDs with the same start page, scope
    and depth reach the same pages, whatever their ids or the round. A page's meta-info keeps
    the keys of the URDs that reached it (``MetaInfo.wanted``), so a new version fetched in
    any round is judged for all of them."""
    return hashlib.sha1(f"{url}\n{scope}\n{depth}".encode(), usedforsecurity=False).hexdigest()[:12]


def _fresh_for(urd: Urd) -> int:
    """How recent a page must be to serve ``urd``'s round without a request: its timing,
    or 0 (always fetch) when a person asked for the crawl (`scrapy urd due`, ``-a urd=``)."""
    return 0 if urd.due_at is not None else urd.timing


def urd_reach_key(urd: Urd) -> str:
    return reach_key(urd.url, urd.scope, urd.depth)


class Groups:
    """The groups of one round's URDs, and what is derived from them once."""

    def __init__(self, urds: Mapping[str, Urd]) -> None:
        self.urds = urds
        members: dict[tuple[str, str, int], list[str]] = defaultdict(list)
        for urd in urds.values():
            members[(urd.url, urd.scope, urd.depth)].append(urd.id)
        self.groups: dict[str, Group] = {}
        for (url, scope, depth), ids in members.items():
            ids.sort()
            real = any(not i.startswith(SENTINEL_PREFIX) for i in ids)
            self.groups[ids[0]] = Group(ids[0], url, scope, depth, tuple(ids), scope_anchor(url, scope),
                                        min(_fresh_for(urds[i]) for i in ids),
                                        reach_key(url, scope, depth) if real else None)
        self._owners: dict[frozenset[str], dict[str, Any]] = {}
        self._reach: dict[frozenset[str], tuple[frozenset[str], int]] = {}

    def __len__(self) -> int:
        return len(self.groups)

    def __iter__(self) -> Iterator[Group]:
        return iter(self.groups.values())

    def get(self, group_id: str) -> Group | None:
        return self.groups.get(group_id)

    def members(self, group_ids: Iterable[str]) -> list[str]:
        """The URD ids of these groups, sorted."""
        return sorted(u for g in group_ids if (group := self.groups.get(g)) is not None for u in group.members)

    def owners(self, group_ids: Iterable[str]) -> dict[str, Any]:
        """``owners``, ``urd_ids`` (without sentinels' pseudo-URDs) and ``urgent`` of a page
        these groups reached; computed once per set of groups, the lists shared (:class:`Members`)."""
        key = frozenset(group_ids)
        found = self._owners.get(key)
        if found is None:
            if len(self._owners) >= OWNERS_KEPT:
                self._owners.clear()
            urds = [self.urds[i] for i in self.members(key)]
            found = self._owners[key] = {
                "owners": Members(sorted({u.owner for u in urds})),
                "urd_ids": Members(u.id for u in urds if not u.id.startswith(SENTINEL_PREFIX)),
                "urgent": any(u.urgent for u in urds),
            }
        return dict(found)


    def reach(self, group_ids: Iterable[str]) -> tuple[frozenset[str], int]:
        """The reach keys of these groups (their real URDs) and the shortest timing among
        them (ms; 0: fetch whatever): a page fetched or confirmed by a round that opened less
        than that before this one serves them all."""
        key = frozenset(group_ids)
        found = self._reach.get(key)
        if found is None:
            if len(self._reach) >= OWNERS_KEPT:
                self._reach.clear()
            groups = [g for i in key if (g := self.groups.get(i)) is not None]
            found = self._reach[key] = (frozenset(g.key for g in groups if g.key),
                                        min((g.timing for g in groups), default=0))
        return found


class LinkScope:
    """The scope decisions of one URL, each anchor decided once (its host read once)."""

    __slots__ = ("_decided", "_host", "url")

    def __init__(self, url: str) -> None:
        self.url = url
        self._host: str | None = None
        self._decided: dict[tuple[str, str], bool] = {}

    def within(self, anchor: tuple[str, str]) -> bool:
        decided = self._decided.get(anchor)
        if decided is None:
            decided = self._decided[anchor] = self._decide(anchor)
        return decided

    def _decide(self, anchor: tuple[str, str]) -> bool:
        kind, value = anchor
        if kind == "any":
            return True
        if self._host is None:
            self._host = hostname(self.url)
        return (self._host if kind == "host" else registered_domain(self._host)) == value


__all__ = ["SENTINEL_PREFIX", "Group", "Groups", "LinkScope", "Members", "reach_key", "urd_reach_key"]
