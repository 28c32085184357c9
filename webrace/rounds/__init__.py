"""The round engine (pure: no Scrapy, no Twisted): coalescing, following, owners, held
items, due bookkeeping; a local implementation and a Redis one."""
