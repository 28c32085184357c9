"""The WebRACE demo: an example site served on 127.0.0.1, example URDs, and one crawl of them."""
