"""The frontier of one round, shared by every worker through Redis (distributed mode).

The same contract as :class:`webrace.frontier.Frontier` (coalescing, per-URD depth budgets,
active URDs), made atomic with Lua scripts, and it is also the round's queue: a page offered
for the first time is queued in the same step that records it, so no request can be lost
between "seen" and "queued". Workers *lease* pages instead of popping them: a leased page
that is not finished within the lease (its worker was killed) goes back to the queue. A
page is thus fetched once per round, or again only after a crash (at-least-once).

Keys, under ``<prefix>round:<id>:`` —
``nodes`` (hash URL -> node JSON: parent, depth, budgets, state, counted URDs, links),
``queue`` (zset URL by depth then arrival: breadth first), ``leases`` (zset URL by lease
deadline, Redis server time), ``active`` (hash URD id -> pending pages that keep it active),
``seq`` (arrival counter); with IPMicra delegation (``WEBRACE_DELEGATION``) also
``queue:<worker>`` (the pages delegated to a worker, same ordering) and ``queues`` (the set of
those keys).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import redis

from webrace.distributed.scripts import evalsha, pipeline_with_scripts
from webrace.records.rounds import DONE, PENDING, Node, Offer

_OFFER_MANY = """
local parent, depth = ARGV[1], tonumber(ARGV[2])
local out = {}
for _, pair in ipairs(cjson.decode(ARGV[3])) do
  local url, budgets = pair[1], pair[2]
  local raw = redis.call('HGET', KEYS[1], url)
  local node = raw and cjson.decode(raw)
  if node and node.a then  -- a redirect's target: the page is the node of the URL that redirected
    local real = redis.call('HGET', KEYS[1], node.a)
    if real then url = node.a; node = cjson.decode(real) end
  end
  if not raw then
    local counted = {}
    for u, r in pairs(budgets) do
      if r >= 1 then table.insert(counted, u); redis.call('HINCRBY', KEYS[3], u, 1) end
    end
    local node = {p = parent, d = depth, b = budgets, s = 'pending', c = counted, l = {}}
    redis.call('HSET', KEYS[1], url, cjson.encode(node))
    local seq = redis.call('INCR', KEYS[4])
    local queue = KEYS[2]
    if pair[3] and pair[3] > 0 then  -- delegated: the queue of the worker its host went to
      queue = KEYS[5 + pair[3]]
      redis.call('SADD', KEYS[5], queue)
    end
    redis.call('ZADD', queue, depth * 1e12 + seq, url)
    table.insert(out, 'new'); table.insert(out, cjson.encode(budgets)); table.insert(out, 'pending')
  else
    local gained, any = {}, false
    for u, r in pairs(budgets) do
      local have = node.b[u]
      if have == nil or r > have then gained[u] = r; node.b[u] = r; any = true end
    end
    if not any and node.s == 'done' and type(node.x) == 'table' and next(node.x) ~= nil then
      -- URDs merged into this page after it was done, their links never followed (the worker that
      -- merged them died, or lost the answer): whoever offers it now follows them
      table.insert(out, 'merged'); table.insert(out, cjson.encode(node.x)); table.insert(out, node.s)
    elseif not any then
      table.insert(out, 'duplicate'); table.insert(out, '{}'); table.insert(out, node.s)
    else
      if depth < node.d then node.d = depth; node.p = parent end
      if node.s == 'pending' then
        local counted = {}
        for _, u in ipairs(node.c) do counted[u] = true end
        for u, r in pairs(gained) do
          if r >= 1 and not counted[u] then table.insert(node.c, u); redis.call('HINCRBY', KEYS[3], u, 1) end
        end
      elseif node.s == 'done' then
        -- its links are to be followed for these URDs from its stored links (RedisFrontier.expanded
        -- clears this once they are): kept until then, so a worker dying first loses none of them
        if type(node.x) ~= 'table' then node.x = {} end
        for u, r in pairs(gained) do
          if r >= 1 and (node.x[u] == nil or r > node.x[u]) then node.x[u] = r end
        end
        if next(node.x) == nil then node.x = nil end
      end
      redis.call('HSET', KEYS[1], url, cjson.encode(node))
      table.insert(out, 'merged'); table.insert(out, cjson.encode(gained)); table.insert(out, node.s)
    end
  end
end
return out
"""

_FINISH = """
local raw = redis.call('HGET', KEYS[1], ARGV[1])
if not raw then return {'{}', '{}'} end
local node = cjson.decode(raw)
if ARGV[3] ~= '' then
  local expanded = cjson.decode(ARGV[3])
  local missed, any = {}, false
  for u, r in pairs(node.b) do
    local e = expanded[u]
    if e == nil or r > e then missed[u] = r; any = true end
  end
  if any then return {cjson.encode(missed), '{}'} end
end
local ended = {}
for _, u in ipairs(node.c) do
  local left = redis.call('HINCRBY', KEYS[2], u, -1)
  if left <= 0 then redis.call('HDEL', KEYS[2], u); table.insert(ended, u) end
end
node.c = {}
node.s = ARGV[2]
node.x = nil  -- fetched again and its links followed with every budget: nothing left to expand
node.l = cjson.decode(ARGV[4])
if ARGV[6] ~= '' then node.u = ARGV[6] end  -- answered from a redirect's target
redis.call('HSET', KEYS[1], ARGV[1], cjson.encode(node))
if ARGV[5] ~= '1' then redis.call('ZREM', KEYS[3], ARGV[1]) end  -- else: until its item is written (ack)
return {'{}', cjson.encode(ended)}
"""

# Extend the leases of ARGV[2..] that still exist by ARGV[1] ms (Redis server time); return
# the URLs renewed.
_RENEW = """
local t = redis.call('TIME')
local deadline = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + tonumber(ARGV[1])
local renewed = {}
for i = 2, #ARGV do
  if redis.call('ZSCORE', KEYS[1], ARGV[i]) then
    redis.call('ZADD', KEYS[1], deadline, ARGV[i]); table.insert(renewed, ARGV[i])
  end
end
return renewed
"""

# Take the next ARGV[2] pages (default 1) from the queue KEYS[1] (the shared one, or a
# worker's own): first put expired leases back in the shared queue KEYS[5], then move the
# head of KEYS[1] to the leases, as many times. Members whose node is missing, unreadable or
# no longer pending are dropped and counted. Returns {reaped, skipped, url, node, url, node...}.
_LEASE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local reaped, skipped = 0, 0
for _, url in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now)) do
  redis.call('ZREM', KEYS[2], url)
  local ok, node = pcall(cjson.decode, redis.call('HGET', KEYS[3], url) or '')
  if ok and type(node) == 'table' and node.s == 'done' then
    -- fetched, but its worker died before its item was written: fetch it again
    node.s = 'pending'
    redis.call('HSET', KEYS[3], url, cjson.encode(node))
  end
  if ok and type(node) == 'table' and node.s == 'pending' then
    local seq = redis.call('INCR', KEYS[4])
    redis.call('ZADD', KEYS[5], node.d * 1e12 + seq, url)  -- back to the shared queue: any worker
    reaped = reaped + 1
  end
end
local want = tonumber(ARGV[2] or '1')
local taken = {}
while #taken < 2 * want do
  local head = redis.call('ZRANGE', KEYS[1], 0, 0)
  if #head == 0 then break end
  local url = head[1]
  redis.call('ZREM', KEYS[1], url)
  local raw = redis.call('HGET', KEYS[3], url)
  local ok, node = pcall(cjson.decode, raw or '')
  if ok and type(node) == 'table' and node.s == 'pending' then
    redis.call('ZADD', KEYS[2], now + tonumber(ARGV[1]), url)
    table.insert(taken, url); table.insert(taken, raw)
  else
    skipped = skipped + 1
  end
end
local out = {reaped, skipped}
for _, v in ipairs(taken) do table.insert(out, v) end
return out
"""

# The links of the done page ARGV[1] were followed for the budgets ARGV[2] (URDs merged into it
# after it was done): those of its pending expansions they cover are cleared.
_EXPANDED = """
local raw = redis.call('HGET', KEYS[1], ARGV[1])
if not raw then return 0 end
local node = cjson.decode(raw)
if type(node.x) ~= 'table' or next(node.x) == nil then return 0 end
local followed = cjson.decode(ARGV[2])
local left = false
for u, r in pairs(node.x) do
  if followed[u] ~= nil and followed[u] >= r then node.x[u] = nil else left = true end
end
if not left then node.x = nil end
redis.call('HSET', KEYS[1], ARGV[1], cjson.encode(node))
return 1
"""

# Give back leased pages this worker will not fetch (it stops with leases it had not started):
# those of ARGV still leased and pending go back to the shared queue KEYS[2] at once, instead
# of waiting for their lease to expire. Returns how many went back.
_RELEASE = """
local back = 0
for _, url in ipairs(ARGV) do
  if redis.call('ZREM', KEYS[1], url) == 1 then
    local ok, node = pcall(cjson.decode, redis.call('HGET', KEYS[3], url) or '')
    if ok and type(node) == 'table' and node.s == 'pending' then
      local seq = redis.call('INCR', KEYS[4])
      redis.call('ZADD', KEYS[2], node.d * 1e12 + seq, url)
      back = back + 1
    end
  end
end
return back
"""


class RedisFrontier:
    """``router`` (distributed mode with delegation): URLs -> the worker each one is
    delegated to (None: the shared queue); a delegated URL waits in that worker's queue
    (``queue:<worker>``) and the round's ``queues`` set lists those queues."""

    def __init__(self, client: redis.Redis, key_prefix: str, round_id: str,
                 router: Callable[[list[str]], list[str | None]] | None = None) -> None:
        self.client = client
        self.base = f"{key_prefix}round:{round_id}:"
        self.keys = {name: self.base + name for name in ("nodes", "queue", "leases", "active", "seq", "queues")}
        self.router = router
        self._offer_many = client.register_script(_OFFER_MANY)
        self._finish = client.register_script(_FINISH)
        self._lease = client.register_script(_LEASE)
        self._renew = client.register_script(_RENEW)
        self._release = client.register_script(_RELEASE)
        self._expanded = client.register_script(_EXPANDED)
        self.reaped = 0  # leases that expired and went back to the queue
        self.skipped = 0  # queue entries without a readable pending node

    def worker_queue(self, worker: str) -> str:
        return f"{self.base}queue:{worker}"

    def offer(
        self, url: str, parent_url: str | None, depth: int, budgets: dict[str, int]
    ) -> tuple[Offer, dict[str, int]]:
        verdict, gained, _ = self.offer_many(parent_url or "", depth, [(url, budgets)])[0]
        return verdict, gained

    def offer_many(
        self, parent_url: str | None, depth: int, offers: list[tuple[str, dict[str, int]]]
    ) -> list[tuple[Offer, dict[str, int], str]]:
        if not offers:
            return []
        k = self.keys
        routes = self.router([url for url, _ in offers]) if self.router else [None] * len(offers)
        queues = sorted({route for route in routes if route})
        index = {worker: n + 1 for n, worker in enumerate(queues)}
        flat = self._offer_many(
            keys=[k["nodes"], k["queue"], k["active"], k["seq"], k["queues"], *map(self.worker_queue, queues)],
            args=[parent_url or "", depth, json.dumps([[url, budgets, index.get(route, 0)]
                                                       for (url, budgets), route in zip(offers, routes, strict=True)])],
        )
        return [(Offer(_text(flat[i])), _dict(flat[i + 1]), _text(flat[i + 2])) for i in range(0, len(flat), 3)]

    def get(self, url: str) -> Node | None:
        raw = self.client.hget(self.keys["nodes"], url)
        if raw and (alias := json.loads(raw).get("a")):  # a redirect's target: the node that redirected
            url, raw = alias, self.client.hget(self.keys["nodes"], alias)
        return _node(url, raw) if raw else None

    def contains(self, url: str) -> bool:
        return bool(self.client.hexists(self.keys["nodes"], url))

    def known(self, urls: list[str]) -> set[str]:
        if not urls:
            return set()
        found = self.client.hmget(self.keys["nodes"], urls)
        return {url for url, raw in zip(urls, found, strict=True) if raw is not None}

    def snapshot(self, urls: list[str]) -> tuple[set[str], dict[str, Node | None]]:
        pipe = self.client.pipeline(transaction=False)
        pipe.hgetall(self.keys["active"])
        if urls:
            pipe.hmget(self.keys["nodes"], urls)
        results = pipe.execute()
        active = {_text(u) for u, n in results[0].items() if int(n) > 0}
        raws = results[1] if urls else []
        # (held pages are nodes of their own, never a redirect's alias: one is read through it)
        return active, {url: (self.get(url) if "a" in json.loads(raw) else _node(url, raw)) if raw else None
                        for url, raw in zip(urls, raws, strict=True)}

    def finish(
        self, node: Node, state: str = DONE, expanded: dict[str, int] | None = None, keep_lease: bool = False
    ) -> tuple[set[str], dict[str, int]]:
        """As :meth:`Frontier.finish`; ``keep_lease``: the page's item is not written yet, so
        its lease stays until :meth:`ack` (a worker dying before that loses no page: the
        lease expires and another worker fetches the page again)."""
        return self._finished(node, state, self._finish(**self._finish_call(node, state, expanded, keep_lease)))

    def known_then_finish(
        self, urls: list[str], node: Node, state: str, expanded: dict[str, int], keep_lease: bool = False
    ) -> tuple[set[str], tuple[set[str], dict[str, int]]]:
        """As :meth:`Frontier.known_then_finish`: both in one pipeline (the links are looked up
        first, as separate calls would)."""
        if not urls:
            return set(), self.finish(node, state, expanded, keep_lease)
        call = self._finish_call(node, state, expanded, keep_lease)

        def fill(pipe: Any) -> None:
            pipe.hmget(self.keys["nodes"], urls)
            evalsha(pipe, self._finish, call["keys"], call["args"])

        found, answer = pipeline_with_scripts(self.client, fill, [self._finish])
        known = {url for url, raw in zip(urls, found, strict=True) if raw is not None}
        return known, self._finished(node, state, answer)

    def _finish_call(self, node: Node, state: str, expanded: dict[str, int] | None,
                     keep_lease: bool) -> dict[str, Any]:
        k = self.keys
        return {"keys": [k["nodes"], k["active"], k["leases"]],
                "args": [node.url, state, "" if expanded is None else json.dumps(expanded), json.dumps(node.links),
                         "1" if keep_lease else "0", node.answered_from or ""]}

    def _finished(self, node: Node, state: str, answer: Any) -> tuple[set[str], dict[str, int]]:
        missed, ended = answer
        missed = _dict(missed)
        if missed:
            node.budgets.update(missed)
            return set(), missed
        node.state = state
        return set(_list(ended)), {}

    def expanded(self, url: str, budgets: dict[str, int]) -> None:
        """The stored links of the done page ``url`` were followed for ``budgets`` (URDs merged
        into it after it was done): its pending expansion is cleared. Until then every offer of
        the page answers MERGED with what is pending, so a worker that died after the merge and
        before following, or lost the merge's answer, leaves it to the next one that offers the
        page (its parent fetched again once the dead worker's lease expired)."""
        self._expanded(keys=[self.keys["nodes"]], args=[url, json.dumps(budgets)])

    def claim(self, url: str, node: Node) -> tuple[bool, dict[str, int], str]:
        """As :meth:`Frontier.claim`: ``url`` is recorded as an alias of ``node.url`` (a
        node ``{"a": node.url}``, which offers and reads resolve) unless the round has it,
        atomically (HSETNX): a worker offering ``url`` as a link at the same moment either
        finds the alias or makes the node this claim then merges into."""
        nodes = self.keys["nodes"]
        if url == node.url:
            return True, {}, node.state
        if self.client.hsetnx(nodes, url, json.dumps({"a": node.url})):
            return True, {}, node.state
        raw = self.client.hget(nodes, url)
        if raw is not None and json.loads(raw).get("a") == node.url:
            return True, {}, node.state
        _, gained, state = self.offer_many(node.parent_url or "", node.depth, [(url, node.budgets)])[0]
        return False, gained, state

    def adopt(self, node: Node) -> Node:
        self.client.hsetnx(self.keys["nodes"], node.url, _encode(node, node.state))
        return self.get(node.url) or node

    def active_urds(self) -> set[str]:
        return {_text(u) for u, n in self.client.hgetall(self.keys["active"]).items() if int(n) > 0}

    def forget_active(self) -> None:
        self.client.delete(self.keys["active"])

    def lease(self, lease_ms: int, worker: str | None = None, also: tuple[str, ...] = ()) -> Node | None:
        """The next page to fetch (breadth first), leased for ``lease_ms``: from ``worker``'s
        own queue first, then the shared queue, then the queues of the workers in ``also``
        (those that stopped: their pages must not wait for them); None when there is none
        (pages may still be leased by other workers: see :meth:`pending`)."""
        nodes = self.lease_many(lease_ms, 1, worker, also)
        return nodes[0] if nodes else None

    def lease_many(self, lease_ms: int, count: int, worker: str | None = None,
                   also: tuple[str, ...] = ()) -> list[Node]:
        """Up to ``count`` pages, as :meth:`lease` takes one: one script call per queue
        looked at (a worker's lease prefetch: one round trip for several pages)."""
        k = self.keys
        sources = [self.worker_queue(worker)] if worker else []
        sources += [k["queue"], *(self.worker_queue(w) for w in also if w != worker)]
        nodes: list[Node] = []
        for queue in sources:
            if len(nodes) >= count:
                break
            result = self._lease(keys=[queue, k["leases"], k["nodes"], k["seq"], k["queue"]],
                                 args=[lease_ms, count - len(nodes)])
            self.reaped += int(result[0])
            self.skipped += int(result[1])
            nodes += [_node(_text(result[i]), result[i + 1]) for i in range(2, len(result) - 1, 2)]
        return nodes

    def release(self, urls: list[str]) -> int:
        """Give back leases this worker took but will not fetch: still pending, they go back
        to the shared queue now (else they would wait for their lease to expire)."""
        if not urls:
            return 0
        k = self.keys
        return int(self._release(keys=[k["leases"], k["queue"], k["nodes"], k["seq"]], args=urls))

    def expire(self, urls: list[str]) -> None:
        """End the leases of ``urls`` now, as if their worker had died: the next lease call
        (any worker's) puts them back in the queue, fetched or not (a page whose item was not
        written is fetched again)."""
        if urls:
            self.client.zadd(self.keys["leases"], dict.fromkeys(urls, 0), xx=True)

    def ack(self, urls: list[str]) -> None:
        """The items of ``urls`` are written: their leases end."""
        if urls:
            self.client.zrem(self.keys["leases"], *urls)

    def renew(self, urls: list[str], lease_ms: int) -> set[str]:
        """Extend the leases of ``urls`` (this worker's); returns those that still exist."""
        if not urls:
            return set()
        return {_text(u) for u in self._renew(keys=[self.keys["leases"]], args=[lease_ms, *urls])}

    def worker_queues(self) -> list[str]:
        return sorted(_text(q) for q in self.client.smembers(self.keys["queues"]))

    def queued(self, worker: str | None = None) -> int:
        """Pages waiting (not leased): in every queue, or in the shared queue and ``worker``'s."""
        queues = [self.keys["queue"], *([self.worker_queue(worker)] if worker else self.worker_queues())]
        pipe = self.client.pipeline(transaction=False)
        for queue in queues:
            pipe.zcard(queue)
        return sum(int(n) for n in pipe.execute())

    def pending(self) -> int:
        """Pages queued or leased: the round is over when this is 0."""
        return self.queued() + int(self.client.zcard(self.keys["leases"]))

    def all_keys(self) -> list[str]:
        return [*self.keys.values(), *self.worker_queues()]

    def delete(self) -> None:
        self.client.delete(*self.all_keys())


def _node(url: str, raw: bytes | str) -> Node:
    data = json.loads(raw)
    return Node(
        url=url,
        parent_url=data.get("p") or None,
        depth=int(data["d"]),
        budgets={u: int(r) for u, r in data["b"].items()},
        state=data["s"],
        links=_list(data.get("l")),
        counted=set(_list(data.get("c"))),
        answered_from=data.get("u") or None,
    )


def _encode(node: Node, state: str) -> str:
    data = {"p": node.parent_url or "", "d": node.depth, "b": node.budgets, "s": state, "c": [], "l": node.links}
    if node.answered_from:
        data["u"] = node.answered_from
    return json.dumps(data)


def _dict(value: Any) -> dict[str, int]:
    data = json.loads(value) if isinstance(value, (bytes, str)) else value
    return {u: int(r) for u, r in data.items()} if isinstance(data, dict) else {}


def _list(value: Any) -> list[str]:
    data = json.loads(value) if isinstance(value, (bytes, str)) else value
    return list(data) if isinstance(data, list) else []  # Lua's cjson writes an empty list as {}


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


__all__ = ["PENDING", "RedisFrontier"]
