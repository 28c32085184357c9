"""State stores behind one interface (``base``), an embedded SQLite implementation and,
with ``REDIS_URL`` set, a Redis one; the ``open_*`` functions pick from the settings."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from webrace.backends.base import AciStore, MetaInfoStore, ResultsStore, SentinelStore, UrdStore, Version


def data_dir(settings: Any) -> Path:
    """``WEBRACE_DATA_DIR`` (setting, else environment variable, else ``.webrace``), created."""
    value = settings.get("WEBRACE_DATA_DIR") or os.environ.get("WEBRACE_DATA_DIR") or ".webrace"
    path = Path(value).expanduser().resolve()
    path.mkdir(parents=True, exist_ok=True)
    return path


def open_urd_store(settings: Any) -> UrdStore:
    """The URD-DB. It stays where the scheduler runs, so it is SQLite in both modes."""
    from webrace.backends.sqlite import SqliteUrdStore

    return SqliteUrdStore(data_dir(settings) / "urd.sqlite")


def open_metainfo_store(settings: Any) -> MetaInfoStore:
    """The object cache's index and meta-info store: shared in Redis when ``REDIS_URL`` is
    set (a page stored by one worker is re-crawled conditionally by any other)."""
    if settings.get("REDIS_URL"):
        from webrace.backends.redis import RedisMetaInfoStore, connect, prefix

        return RedisMetaInfoStore(connect(settings), prefix(settings))
    from webrace.backends.sqlite import SqliteMetaInfoStore

    return SqliteMetaInfoStore(data_dir(settings) / "cache.sqlite")


def open_aci_store(settings: Any) -> AciStore:
    """The ACI store: in Redis with ``REDIS_URL`` (every worker adds to one store), else
    embedded (``WEBRACE_DATA_DIR/aci.sqlite``)."""
    if settings.get("REDIS_URL"):
        from webrace.backends.redis import RedisAciStore, connect, prefix

        return RedisAciStore(connect(settings), prefix(settings))
    from webrace.backends.sqlite import SqliteAciStore

    return SqliteAciStore(data_dir(settings) / "aci.sqlite")


def open_results_store(settings: Any) -> ResultsStore:
    """Scout's results table: in Redis with ``REDIS_URL`` (shared by every worker), else
    ``WEBRACE_DATA_DIR/results.sqlite``."""
    if settings.get("REDIS_URL"):
        from webrace.backends.redis import RedisResultsStore, connect, prefix

        return RedisResultsStore(connect(settings), prefix(settings))
    from webrace.backends.sqlite import SqliteResultsStore

    return SqliteResultsStore(data_dir(settings) / "results.sqlite")


def open_sentinel_store(settings: Any) -> SentinelStore:
    """Sentinels, their page digests and notifications (``WEBRACE_DATA_DIR/sentinels.sqlite``;
    kept where `scrapy sentinel` and the crawl run)."""
    from webrace.backends.sqlite import SqliteSentinelStore

    return SqliteSentinelStore(data_dir(settings) / "sentinels.sqlite")


__all__ = ["AciStore", "MetaInfoStore", "ResultsStore", "SentinelStore", "UrdStore", "Version", "data_dir",
           "open_aci_store", "open_metainfo_store", "open_results_store", "open_sentinel_store", "open_urd_store"]
