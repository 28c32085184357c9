"""The stores' errors that commands catch before any store is opened: importing this module
imports nothing else (``webrace.commands`` needs them for every command)."""


class RedisUnavailable(RuntimeError):
    """Redis cannot be reached, or the configured URL is not a Redis URL: one line naming the
    URL (without its password) and what to do."""


class RedisUnreachable(RedisUnavailable):
    """The configured Redis did not answer (refused, reset, timed out, still loading): unlike
    a URL that is no Redis URL, it may answer later."""


class SharedStoreMismatch(RuntimeError):
    """A worker's object store is not the one the other workers of this Redis use."""
