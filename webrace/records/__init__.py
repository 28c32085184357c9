"""The record types every part of WebRACE shares (leaf modules: they import nothing of WebRACE
but pure helpers), so that stores, engines and crawl components depend on them and not on
each other."""
