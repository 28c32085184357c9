"""State stores behind one interface (``base``), an embedded SQLite implementation and,
with ``REDIS_URL`` set, a Redis one.

This module is the one factory: the mode is decided here, from the settings, and nowhere
else. The ``open_*`` functions return every store, the object cache and the round engine of
the mode (the URD spider configures the lease scheduler from :func:`distributed`)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from scrapy.utils.misc import load_object

from webrace.backends.errors import RedisUnavailable, RedisUnreachable, SharedStoreMismatch
from webrace.datadir import data_dir, objects_dir

# The stores' modules are imported where a store is opened, not here: every `scrapy` command
# imports this package (Scrapy imports each command module to list them), and most open one
# store or none; importing all of them (Redis, numpy, Twisted's web) cost each command a third
# of a second. The store classes are still importable from here (``__getattr__`` below).
_LATE = {
    "AciStore": "base", "MetaInfoStore": "base", "ResultsStore": "base", "SentinelStore": "base",
    "UrdStore": "base", "Version": "base",
    "DeliveryStore": "delivery",
}


def __getattr__(name: str) -> Any:
    if name in _LATE:
        import importlib

        return getattr(importlib.import_module(f"webrace.backends.{_LATE[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


if TYPE_CHECKING:
    from webrace.backends.base import AciStore, MetaInfoStore, ResultsStore, SentinelStore, UrdStore
    from webrace.backends.delivery import DeliveryStore
    from webrace.backends.sqlite.journal import DeliveryJournal
    from webrace.rounds.engine import RoundEngine
    from webrace.store.cache import ObjectCache
    from webrace.store.objects import CompressedObjects, ObjectStore
    from webrace.store.s3 import S3ObjectStore

logger = logging.getLogger(__name__)


def open_urd_store(settings: Any) -> UrdStore:
    """The URD-DB. It stays where the scheduler runs, so it is SQLite in both modes."""
    from webrace.backends.sqlite.urd import SqliteUrdStore

    return SqliteUrdStore(data_dir(settings) / "urd.sqlite")


def open_urd_view(settings: Any) -> Any:
    """Every URD, read only (``with open_urd_view(s) as view: view.all()``), where a crawl
    process can read them: the URD-DB (embedded), or in the distributed mode the copy in
    Redis the scheduler keeps (:meth:`~webrace.distributed.registry.RoundRegistry.sync_urds`):
    workers have no URD-DB."""
    if not distributed(settings):
        return open_urd_store(settings)
    from webrace.backends.redis import prefix
    from webrace.distributed.registry import RoundRegistry

    return _UrdCopy(RoundRegistry(connect(settings), prefix(settings)))


class _UrdCopy:
    def __init__(self, registry: Any) -> None:
        self.registry = registry

    def __enter__(self) -> _UrdCopy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.registry.client.close()

    def all(self) -> list[Any]:
        return self.registry.all_urds()


def open_metainfo_store(settings: Any, objects: CompressedObjects | None = None) -> MetaInfoStore:
    """The object cache's index and meta-info store: shared in Redis when ``REDIS_URL`` is
    set (a page stored by one worker is re-crawled conditionally by any other; the headers
    and links of its records go to ``objects``, default :func:`open_object_store`)."""
    from webrace.backends.redis import RedisMetaInfoStore, legacy_layout, prefix
    from webrace.backends.sqlite.metainfo import SqliteMetaInfoStore

    if distributed(settings):
        client = connect(settings)
        if legacy_layout(client, prefix(settings)):
            logger.warning("Redis holds meta-info and bodies in the layout before bodies left Redis (%smeta, "
                           "%sobject:...), which is not read any more: `scrapy store migrate` moves them",
                           prefix(settings), prefix(settings))
        return RedisMetaInfoStore(client, prefix(settings),
                                  objects if objects is not None else open_object_store(settings))
    return SqliteMetaInfoStore(data_dir(settings) / "cache.sqlite")


def open_object_store(settings: Any) -> CompressedObjects:
    """The body store ``WEBRACE_OBJECT_STORE`` names (loaded with ``load_object``; built with
    its ``from_settings(settings)``): by default a directory (:class:`ObjectStore` on
    :func:`objects_dir`) in both modes. In the distributed mode every worker must use the same
    one: a directory store, or a bucket (:mod:`webrace.store.s3`), carries an id, recorded in
    Redis by the first worker; a worker whose store has another id (a share not mounted, a
    typo) is refused with :class:`SharedStoreMismatch` before it stores anything."""
    from webrace.backends.redis import RedisObjectStore, prefix
    from webrace.store.objects import ObjectStore
    from webrace.store.s3 import S3ObjectStore

    cls = load_object(settings.get("WEBRACE_OBJECT_STORE") or "webrace.store.objects.ObjectStore")
    if issubclass(cls, RedisObjectStore):  # the mode's own Redis: the factory connects
        store = cls(connect(settings), prefix(settings))
    else:
        store = cls.from_settings(settings)
    store.xpack = settings.getbool("WEBRACE_STORE_XPACK")
    if distributed(settings) and isinstance(store, ObjectStore | S3ObjectStore):
        _check_shared(store, connect(settings), prefix(settings))
    return store


def _check_shared(store: ObjectStore | S3ObjectStore, client: Any, key_prefix: str) -> None:
    mine = store.identity()
    key = f"{key_prefix}objects:id"
    client.set(key, mine, nx=True)
    shared = client.get(key)
    shared = shared.decode() if isinstance(shared, bytes) else shared
    if shared != mine:
        raise SharedStoreMismatch(
            f"the object store {store.where} (id {mine}) is not the one the other workers of this Redis use "
            f"(id {shared}): {store.share_hint}")


def open_aci_store(settings: Any) -> AciStore:
    """The ACI store: in Redis with ``REDIS_URL`` (every worker adds to one store), else
    embedded (``WEBRACE_DATA_DIR/aci.sqlite``)."""
    from webrace.backends.redis import RedisAciStore, prefix
    from webrace.backends.sqlite.aci import SqliteAciStore

    if distributed(settings):
        return RedisAciStore(connect(settings), prefix(settings))
    return SqliteAciStore(data_dir(settings) / "aci.sqlite")


def open_results_store(settings: Any) -> ResultsStore:
    """Scout's results table: in Redis with ``REDIS_URL`` (shared by every worker), else
    ``WEBRACE_DATA_DIR/results.sqlite``."""
    from webrace.backends.redis import RedisResultsStore, prefix
    from webrace.backends.sqlite.results import SqliteResultsStore

    if distributed(settings):
        return RedisResultsStore(connect(settings), prefix(settings))
    return SqliteResultsStore(data_dir(settings) / "results.sqlite")


def open_sentinel_store(settings: Any) -> SentinelStore:
    """Sentinels, their page digests and notifications: in Redis with ``REDIS_URL`` (the
    worker that fetches a page evaluates its sentinels), else
    ``WEBRACE_DATA_DIR/sentinels.sqlite``."""
    from webrace.backends.redis import prefix
    from webrace.backends.redis_sentinels import RedisSentinelStore
    from webrace.backends.sqlite.sentinels import SqliteSentinelStore

    if distributed(settings):
        return RedisSentinelStore(connect(settings), prefix(settings))
    return SqliteSentinelStore(data_dir(settings) / "sentinels.sqlite")


def open_delivery_store(settings: Any) -> DeliveryStore:
    """Delivery channels, what each was sent and its retry state: in Redis with ``REDIS_URL``
    (any delivery loop or worker may push), else ``WEBRACE_DATA_DIR/delivery.sqlite``; channel
    URLs encrypted with :func:`~webrace.backends.sealing.channel_cipher`'s key."""
    from webrace.backends.delivery import RedisDeliveryStore, SqliteDeliveryStore
    from webrace.backends.redis import prefix
    from webrace.backends.sealing import channel_cipher

    cipher = channel_cipher(settings)
    if distributed(settings):
        return RedisDeliveryStore(connect(settings), cipher, prefix(settings))
    return SqliteDeliveryStore(data_dir(settings) / "delivery.sqlite", cipher)


def open_delivery_journal(settings: Any) -> DeliveryJournal | None:
    """What this delivery agent delivered (``WEBRACE_DATA_DIR/delivery-journal.sqlite``, in both
    modes: it is the process's own); None when ``WEBRACE_DELIVERY_JOURNAL_DAYS`` is 0."""
    from webrace.backends.sqlite.journal import DeliveryJournal

    days = settings.getfloat("WEBRACE_DELIVERY_JOURNAL_DAYS", 30.0)
    if days <= 0:
        return None
    return DeliveryJournal(data_dir(settings) / "delivery-journal.sqlite", int(days * 86_400_000),
                           settings.getint("WEBRACE_DELIVERY_JOURNAL_MAX", 1_000_000))


def distributed(settings: Any) -> bool:
    """Whether this process runs in distributed mode (``REDIS_URL`` set)."""
    return bool(settings.get("REDIS_URL"))


def connect(settings: Any) -> Any:
    """A checked client of the distributed mode's Redis (``REDIS_URL``); ``RedisUnavailable``
    (one line, no password) when it cannot be had."""
    from webrace.backends.redis import connect_url

    return connect_url(settings.get("REDIS_URL") or "", settings)


def open_object_cache(settings: Any) -> ObjectCache:
    """The object cache: the meta-info index (:func:`open_metainfo_store`) and the bodies
    (:func:`open_object_store`: a directory, shared by the workers in the distributed mode)."""
    from webrace.store.cache import ObjectCache

    objects = open_object_store(settings)
    return ObjectCache(open_metainfo_store(settings, objects), objects,
                       revisits_kept=settings.getint("WEBRACE_STORE_REVISITS", 50))


def open_round_engine(settings: Any, stats: Any = None, sentinels: Any = None,
                      with_urd_store: bool = True, worker: bool = True) -> RoundEngine:
    """The round engine of the mode, ``sentinels`` the due sentinels joining its rounds:
    :class:`LocalRounds` or :class:`RedisRounds` (with IPMicra routing when
    ``WEBRACE_DELEGATION`` is on, for a ``worker``: the engine's ``delegation``)."""
    from webrace.backends.redis import prefix
    from webrace.clock import STEP_THRESHOLD_S, ClockWatch
    from webrace.distributed.delegation import RedisDelegation
    from webrace.distributed.registry import RoundRegistry, closed_round_ttl
    from webrace.rounds.engine import Limits
    from webrace.rounds.local import LocalRounds
    from webrace.rounds.redis import RedisRounds

    limits = Limits(page_budget=settings.getint("WEBRACE_MAX_PAGES_PER_URD"),
                    max_queries=settings.getint("WEBRACE_TRAP_MAX_QUERIES_PER_PATH"),
                    max_links=settings.getint("WEBRACE_MAX_LINKS_PER_PAGE"))
    urd_store = (lambda: open_urd_store(settings)) if with_urd_store else None
    clock = ClockWatch(settings.getfloat("WEBRACE_CLOCK_STEP_THRESHOLD", STEP_THRESHOLD_S))
    if not distributed(settings):
        engine = LocalRounds(urd_store, limits, stats, sentinels)
        engine.clock = clock
        return engine
    client, key_prefix = connect(settings), prefix(settings)
    delegation = None
    if worker and settings.getbool("WEBRACE_DELEGATION"):
        delegation = RedisDelegation(client, key_prefix, settings)
        delegation.register()  # this worker joins the delegation (the others route hosts to it)
    registry = RoundRegistry(client, key_prefix, delegation.route if delegation else None, closed_round_ttl(settings))
    engine = RedisRounds(registry, urd_store, limits, stats, sentinels)
    engine.delegation, engine.clock = delegation, clock
    return engine


__all__ = [
    "AciStore", "DeliveryStore", "MetaInfoStore", "RedisUnavailable", "RedisUnreachable", "ResultsStore",
    "SentinelStore", "SharedStoreMismatch", "UrdStore", "Version", "connect", "data_dir", "distributed", "objects_dir",
    "open_aci_store", "open_delivery_store", "open_metainfo_store", "open_object_cache", "open_object_store",
    "open_results_store", "open_round_engine", "open_sentinel_store", "open_urd_store"]
