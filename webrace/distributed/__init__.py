"""The distributed runtime: the lease scheduler, the round registry, the shared frontier and
IPMicra routing (``REDIS_URL`` set)."""
