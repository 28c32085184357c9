"""WebRACE's Scrapy commands (``COMMANDS_MODULE = "webrace.commands"``)."""
