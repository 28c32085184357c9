"""State stores behind one interface (``base``), an embedded SQLite implementation and,
with ``REDIS_URL`` set, a Redis one.

This module is the one factory: the mode is decided here, from the settings, and nowhere
else. The ``open_*`` functions return every store, the object cache and the round engine of
the mode (the URD spider configures the lease scheduler from :func:`distributed`)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from webrace.backends.base import AciStore, MetaInfoStore, ResultsStore, SentinelStore, UrdStore, Version
from webrace.backends.delivery import DeliveryStore, RedisDeliveryStore, SqliteDeliveryStore
from webrace.backends.redis import (
    RedisAciStore,
    RedisMetaInfoStore,
    RedisObjectStore,
    RedisResultsStore,
    RedisUnavailable,
    connect_url,
    prefix,
)
from webrace.backends.redis_sentinels import RedisSentinelStore
from webrace.backends.sqlite import (
    SqliteAciStore,
    SqliteMetaInfoStore,
    SqliteResultsStore,
    SqliteSentinelStore,
    SqliteUrdStore,
)
from webrace.distributed.delegation import RedisDelegation
from webrace.distributed.registry import RoundRegistry
from webrace.rounds.engine import Limits, RoundEngine
from webrace.rounds.local import LocalRounds
from webrace.rounds.redis import RedisRounds
from webrace.store.cache import ObjectCache
from webrace.store.objects import ObjectStore


def data_dir(settings: Any) -> Path:
    """``WEBRACE_DATA_DIR`` (setting, else environment variable, else ``.webrace``), created."""
    value = settings.get("WEBRACE_DATA_DIR") or os.environ.get("WEBRACE_DATA_DIR") or ".webrace"
    path = Path(value).expanduser().resolve()
    path.mkdir(parents=True, exist_ok=True)
    return path


def open_urd_store(settings: Any) -> UrdStore:
    """The URD-DB. It stays where the scheduler runs, so it is SQLite in both modes."""
    return SqliteUrdStore(data_dir(settings) / "urd.sqlite")


def open_metainfo_store(settings: Any) -> MetaInfoStore:
    """The object cache's index and meta-info store: shared in Redis when ``REDIS_URL`` is
    set (a page stored by one worker is re-crawled conditionally by any other)."""
    if distributed(settings):
        return RedisMetaInfoStore(connect(settings), prefix(settings))
    return SqliteMetaInfoStore(data_dir(settings) / "cache.sqlite")


def open_aci_store(settings: Any) -> AciStore:
    """The ACI store: in Redis with ``REDIS_URL`` (every worker adds to one store), else
    embedded (``WEBRACE_DATA_DIR/aci.sqlite``)."""
    if distributed(settings):
        return RedisAciStore(connect(settings), prefix(settings))
    return SqliteAciStore(data_dir(settings) / "aci.sqlite")


def open_results_store(settings: Any) -> ResultsStore:
    """Scout's results table: in Redis with ``REDIS_URL`` (shared by every worker), else
    ``WEBRACE_DATA_DIR/results.sqlite``."""
    if distributed(settings):
        return RedisResultsStore(connect(settings), prefix(settings))
    return SqliteResultsStore(data_dir(settings) / "results.sqlite")


def open_sentinel_store(settings: Any) -> SentinelStore:
    """Sentinels, their page digests and notifications: in Redis with ``REDIS_URL`` (the
    worker that fetches a page evaluates its sentinels), else
    ``WEBRACE_DATA_DIR/sentinels.sqlite``."""
    if distributed(settings):
        return RedisSentinelStore(connect(settings), prefix(settings))
    return SqliteSentinelStore(data_dir(settings) / "sentinels.sqlite")


def open_delivery_store(settings: Any) -> DeliveryStore:
    """Delivery channels, what each was sent and its retry state: in Redis with ``REDIS_URL``
    (any delivery loop or worker may push), else ``WEBRACE_DATA_DIR/delivery.sqlite``."""
    if distributed(settings):
        return RedisDeliveryStore(connect(settings), prefix(settings))
    return SqliteDeliveryStore(data_dir(settings) / "delivery.sqlite")


def distributed(settings: Any) -> bool:
    """Whether this process runs in distributed mode (``REDIS_URL`` set)."""
    return bool(settings.get("REDIS_URL"))


def connect(settings: Any) -> Any:
    """A checked client of the distributed mode's Redis (``REDIS_URL``); ``RedisUnavailable``
    (one line, no password) when it cannot be had."""
    return connect_url(settings.get("REDIS_URL") or "", settings)


def open_object_cache(settings: Any) -> ObjectCache:
    """The object cache: the meta-info index (:func:`open_metainfo_store`) and the bodies, in
    ``WEBRACE_DATA_DIR/objects`` or, distributed, in Redis too (any worker reads what another
    stored)."""
    if distributed(settings):
        objects: ObjectStore = RedisObjectStore(connect(settings), prefix(settings))
    else:
        objects = ObjectStore(data_dir(settings) / "objects")
    objects.xpack = settings.getbool("WEBRACE_STORE_XPACK")
    return ObjectCache(open_metainfo_store(settings), objects)


def open_round_engine(settings: Any, stats: Any = None, sentinels: Any = None,
                      with_urd_store: bool = True, worker: bool = True) -> RoundEngine:
    """The round engine of the mode, ``sentinels`` the due sentinels joining its rounds:
    :class:`LocalRounds` or :class:`RedisRounds` (with IPMicra routing when
    ``WEBRACE_DELEGATION`` is on, for a ``worker``: the engine's ``delegation``)."""
    limits = Limits(page_budget=settings.getint("WEBRACE_MAX_PAGES_PER_URD"),
                    max_queries=settings.getint("WEBRACE_TRAP_MAX_QUERIES_PER_PATH"))
    urd_store = (lambda: open_urd_store(settings)) if with_urd_store else None
    if not distributed(settings):
        return LocalRounds(urd_store, limits, stats, sentinels)
    client, key_prefix = connect(settings), prefix(settings)
    delegation = None
    if worker and settings.getbool("WEBRACE_DELEGATION"):
        delegation = RedisDelegation(client, key_prefix, settings)
        delegation.register()  # this worker joins the delegation (the others route hosts to it)
    registry = RoundRegistry(client, key_prefix, delegation.route if delegation else None)
    engine = RedisRounds(registry, urd_store, limits, stats, sentinels)
    engine.delegation = delegation
    return engine


__all__ = ["AciStore", "DeliveryStore", "MetaInfoStore", "RedisUnavailable", "ResultsStore", "SentinelStore",
           "UrdStore", "Version", "connect", "data_dir", "distributed", "open_aci_store", "open_delivery_store",
           "open_metainfo_store", "open_object_cache", "open_results_store", "open_round_engine", "open_sentinel_store",
           "open_urd_store"]
