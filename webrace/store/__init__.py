"""The object cache (seed 000 section 5): an index and meta-info store (a state store, see
``webrace.backends``), and a versioned, content-addressed object store of compressed bodies.
:class:`webrace.store.cache.ObjectCache` puts them together."""
