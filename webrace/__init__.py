"""WebRACE: user-driven crawling on Scrapy."""

__version__ = "0.1.0"
