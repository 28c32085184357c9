"""Embedded state stores: SQLite files under ``WEBRACE_DATA_DIR``, a module a store;
:mod:`~webrace.backends.sqlite.connection` holds what they share."""

from webrace.backends.sqlite.aci import SqliteAciStore
from webrace.backends.sqlite.connection import Transaction, connect
from webrace.backends.sqlite.metainfo import SqliteMetaInfoStore
from webrace.backends.sqlite.results import SqliteResultsStore
from webrace.backends.sqlite.sentinels import SqliteSentinelStore
from webrace.backends.sqlite.urd import SqliteUrdStore

__all__ = [
    "SqliteAciStore",
    "SqliteMetaInfoStore",
    "SqliteResultsStore",
    "SqliteSentinelStore",
    "SqliteUrdStore",
    "Transaction",
    "connect",
]
