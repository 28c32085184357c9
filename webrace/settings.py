"""Scrapy settings of the WebRACE project.

Every ``WEBRACE_*`` setting is declared here once, with its default and what it means.
Override any of them with ``-s NAME=VALUE`` or in your own settings module.
"""

import os

from webrace import __version__

BOT_NAME = "webrace"
SPIDER_MODULES = ["webrace.spiders"]
NEWSPIDER_MODULE = "webrace.spiders"
COMMANDS_MODULE = "webrace.commands"

# --- WebRACE ---------------------------------------------------------------------------
# Directory holding all embedded state (URD-DB, crawl summaries); environment variable too.
WEBRACE_DATA_DIR = os.environ.get("WEBRACE_DATA_DIR", ".webrace")
# File of extensions never fetched (the seed's conf/ignore.types); a list of entries also
# works; None = the shipped webrace/conf/ignore.types.
WEBRACE_IGNORE_TYPES = None
# File of accepted media types, `type/subtype` or `type/*` (the seed's conf/mime.types);
# None = the shipped webrace/conf/mime.types.
WEBRACE_MIME_TYPES = None
# File of blocked domains, hosts or URL prefixes, one per line (the seed's BlockDomain); None = none.
WEBRACE_BLOCKLIST = None
# URLs longer than this (after normalisation) are skipped and counted as error/too_long.
WEBRACE_MAX_URL_LENGTH = 2048
# XML files a user gives (URDs, rules templates) larger than this many bytes are refused unread.
WEBRACE_MAX_XML_BYTES = 50 * 1024 * 1024
# At most this many links of one page are followed, counted among those within the URDs'
# scope and depth (links out of scope take no room); the rest are counted as ignored/limit.
WEBRACE_MAX_LINKS_PER_PAGE = 5000
# Safety bound on the work per page: at most this many link candidates (hrefs, frame sources)
# of one page are read, resolved and stored; the rest are counted as webrace/links_unread.
WEBRACE_MAX_LINK_CANDIDATES = 50000
# A host whose robots.txt asks for a Crawl-delay longer than this (seconds) is not crawled.
WEBRACE_MAX_CRAWL_DELAY = 60.0
# robots.txt (RFC 9309): seconds to wait for it (then the host counts as unreachable: nothing
# is fetched from it this round), and how long its rules are kept (the RFC's 24 hours).
WEBRACE_ROBOTS_TIMEOUT = 10.0
WEBRACE_ROBOTS_MAX_AGE = 86400.0
# Pacing per host (docs/explanation/manners.md): after each answer the host rests this many times as long
# as the answer took to download, so with one request at a time our share of its time stays
# under 1 / (1 + factor): a third by default. 304s are cheap, so a re-crawl goes fast.
WEBRACE_DELAY_FACTOR = 2.0
# Bounds of that rest, seconds (robots.txt's Crawl-delay and DOWNLOAD_DELAY are floors too).
WEBRACE_MIN_DELAY = 0.0
WEBRACE_MAX_DELAY = 30.0
# Requests in flight to one host at most.
WEBRACE_HOST_CONCURRENCY = 1
# Traps (docs/explanation/manners.md): pages one URD may request in one round; links past it are
# counted as ignored/budget and the summary names the URD.
WEBRACE_MAX_PAGES_PER_URD = 10000
# A link whose path repeats one segment more than this many times, or has more segments than
# this, is a trap (Heritrix's PathologicalPath / TooManyPathSegments); 0 switches a rule off.
WEBRACE_TRAP_MAX_SEGMENT_REPEATS = 3
WEBRACE_TRAP_MAX_SEGMENTS = 20
# One path followed with at most this many distinct query strings in a round (`?page=N`
# forever); 0 switches the rule off.
WEBRACE_TRAP_MAX_QUERIES_PER_PATH = 100
# Conditional re-crawl: ask with If-None-Match / If-Modified-Since for pages already stored.
WEBRACE_RECRAWL = True
# Builds the object cache (callable: settings -> ObjectCache, loaded with load_object); the
# default picks the mode's stores (WEBRACE_DATA_DIR, or Redis with REDIS_URL).
WEBRACE_OBJECT_CACHE = "webrace.backends.open_object_cache"
# Keep running: start each URD again when it falls due (the seed's mini-crawler).
WEBRACE_CONTINUOUS = False
# The wall clock moving this many seconds more or less than the monotonic clock between two
# rounds is a step (NTP, a resumed VM): said in one line; after a step back, URDs checked "in
# the future" and sentinels due beyond their interval are made due now.
WEBRACE_CLOCK_STEP_THRESHOLD = 60.0
# A new version relevant to none of its owners (their URDs have keywords, none matched enough)
# is not kept: its body is dropped from the object store, its meta-info stays (the seed's way).
WEBRACE_DROP_IRRELEVANT = True
# A Scout rules template (XML, webrace/schemas/template.xsd) whose rules see every document
# of `scrapy crawl urd` (`-a template=FILE` too); None = no rules.
WEBRACE_RULES_TEMPLATE = None
# A template variable or parameter expanding to more characters than this refuses the template.
WEBRACE_TEMPLATE_MAX_EXPANSION = 1024 * 1024
# Sentinels fire at multiples of this many seconds (intervals are rounded up to it), so that
# sentinels on one URL fall due together and share one fetch.
WEBRACE_SENTINEL_TICK = 60
# `scrapy store gc` keeps this many newest versions of each URL.
WEBRACE_KEEP_VERSIONS = 3
# `scrapy store gc` spares bodies and temporary files younger than this many seconds, so it
# may run while workers crawl (a body is written just before the version pointing to it).
WEBRACE_STORE_GC_GRACE = 3600
# The body store (loaded with load_object, built with its from_settings(settings)): a directory,
# content-addressed, atomic writes. In the distributed mode every worker must mount the same one
# (WEBRACE_OBJECTS_DIR on a network filesystem); "webrace.store.s3.S3ObjectStore" keeps them in an
# S3-compatible bucket (WEBRACE_S3_*: no shared filesystem needed); "webrace.backends.redis.RedisObjectStore"
# keeps bodies in Redis instead (bounded by its RAM: small crawls only).
WEBRACE_OBJECT_STORE = "webrace.store.objects.ObjectStore"
# Where the directory store keeps bodies; None = WEBRACE_DATA_DIR/objects.
WEBRACE_OBJECTS_DIR = os.environ.get("WEBRACE_OBJECTS_DIR") or None
# The S3 store ("webrace.store.s3.S3ObjectStore", pip install 'webrace[s3]'): bodies in this bucket,
# under this key prefix; credentials from boto3's chain (AWS_ACCESS_KEY_ID..., ~/.aws, a role).
WEBRACE_S3_BUCKET = None
WEBRACE_S3_PREFIX = "objects/"
# An S3-compatible server's URL (MinIO, Ceph...); None = AWS S3. Region: None = boto3's default.
WEBRACE_S3_ENDPOINT_URL = None
WEBRACE_S3_REGION = None
# Attempts per S3 request, retries included (botocore's standard mode, with backoff).
WEBRACE_S3_MAX_ATTEMPTS = 3
# Seconds to connect to the S3 endpoint, and to wait for each read of an answer.
WEBRACE_S3_TIMEOUT = 20
# 304 answers remembered per URL (for WARC revisit records), newest first; 0 = none.
WEBRACE_STORE_REVISITS = 50
# fsync each stored body before it gets its name (its bytes are on disk before anything points to
# them); False: faster, and a power failure may leave damaged bodies, found by the crawl's check
# and fetched again.
WEBRACE_STORE_FSYNC = True
# Threads doing the object cache's I/O during a crawl (bodies written and fsynced, Redis round
# trips, reads on a shared mount), so that none of it blocks the reactor.
WEBRACE_STORE_THREADS = 4
# threads judging new versions (webrace.annotation.middleware): the work holds the interpreter
# lock, so one more thread mostly takes turns from the reactor (measured: 1 is fastest)
WEBRACE_ANNOTATE_THREADS = 1
# Store versions with an XML media type (text/xml, application/xml, application/*+xml, e.g.
# XHTML, RSS, Atom) XPack-encoded: smaller, and `scrapy store query` answers XPath from them
# without unpacking. They read back equal under canonical XML, not byte for byte (docs/how-to/xpack.md).
WEBRACE_STORE_XPACK = False
# A directory: the crawl writes its own WARC files there as it goes (request + response per full
# fetch, revisit per 304; webrace/archive.py), rotated by size. None = off.
WEBRACE_STORE_WARC = None
# Size at which a WARC file of WEBRACE_STORE_WARC is closed and the next one begun.
WEBRACE_STORE_WARC_MAX_BYTES = 1024 ** 3
# Finding leaks (webrace/memprofile.py, bench/soak.py): a file to which the crawl appends, every
# WEBRACE_MEMORY_PROFILE_INTERVAL seconds, the allocation sites (tracemalloc, by traceback of
# WEBRACE_MEMORY_PROFILE_FRAMES frames) that grew most since the first interval. None = off.
WEBRACE_MEMORY_PROFILE = None
WEBRACE_MEMORY_PROFILE_INTERVAL = 120.0
WEBRACE_MEMORY_PROFILE_FRAMES = 12

# The web app (`scrapy web serve`, webrace/web/): Host names it answers (others get 400: DNS
# rebinding); None = 127.0.0.1, localhost and the address it is bound to.
WEBRACE_WEB_ALLOWED_HOSTS = None
# Clients allowed over plain http besides loopback (over https the session cookie is Secure and
# every client is): None, "private" (private addresses) or networks ["192.168.1.0/24", ...].
WEBRACE_WEB_PLAIN_HTTP = None
# Key signing the session cookies; None = a random key kept in WEBRACE_DATA_DIR/web-secret-key.
WEBRACE_WEB_SECRET_KEY = None
# Hours a login lasts (then the owner logs in again).
WEBRACE_WEB_SESSION_HOURS = 12
# The production server (waitress): request threads, open connections served at most (as many
# more are accepted only to be answered 503 with Retry-After; past those they wait in the
# backlog; each costs a file descriptor, no thread), seconds a silent connection is kept.
WEBRACE_WEB_THREADS = 4
WEBRACE_WEB_CONNECTION_LIMIT = 1000
WEBRACE_WEB_CHANNEL_TIMEOUT = 30
# Requests that may wait for a thread; one arriving past them is answered 503 with Retry-After
# at once (a burst is told to come back rather than left waiting in silence).
WEBRACE_WEB_QUEUE_LIMIT = 64
# Seconds a connection has to send a whole request (from its opening or its previous answer),
# however slowly it trickles: then it is closed, so half-open connections cannot hold every slot.
WEBRACE_WEB_REQUEST_TIMEOUT = 20
# Bytes a request body may have (a pasted URD list); larger ones are refused with 413.
WEBRACE_WEB_MAX_BODY = 1024 * 1024
# ACIs (and notifications) shown per page of an owner's page and of the API.
WEBRACE_WEB_PAGE_SIZE = 50
# Login attempts allowed per client address and account name in a moving window, counted before
# the password is checked and shared by the server processes of the data directory (a right
# password is not counted); more: 429.
WEBRACE_WEB_LOGIN_LIMIT = "5/minute"
# Address of a reverse proxy (TLS in front of the app) whose X-Forwarded-Proto/-For are
# believed (then https there gets Secure cookies); None = none.
WEBRACE_WEB_TRUSTED_PROXY = None

# Delivery (`scrapy deliver`, webrace/delivery/): the crawl runs a delivery pass after each
# round and when it ends, in a thread (owners without channels cost one read; nothing is sent).
WEBRACE_DELIVERY = True
# Seconds between passes of `scrapy deliver --loop` and, during a crawl, between extra passes
# (a distributed worker sees no round close); 0 = none but after rounds.
WEBRACE_DELIVERY_INTERVAL = 60.0
# Seconds one send may take (connect, answer) before it counts as failed.
WEBRACE_DELIVERY_TIMEOUT = 10.0
# Seconds before the first retry of a failed channel; doubled after each failure up to the maximum.
WEBRACE_DELIVERY_RETRY_BASE = 30.0
WEBRACE_DELIVERY_RETRY_MAX = 3600.0
# Failures in a row after which a channel is reported failing (log, stats, `deliver channel list`).
WEBRACE_DELIVERY_FAILING_AFTER = 3
# Items listed in one message at most (the rest are counted: "and 37 more").
WEBRACE_DELIVERY_MAX_ITEMS = 20
# Channels sent to at once (threads) in a pass.
WEBRACE_DELIVERY_THREADS = 4
# The web app's address as owners reach it (links in messages: http://host:port); "" = no links.
WEBRACE_DELIVERY_BASE_URL = ""
# Apprise schemes owners' channels may use (a list or "a,b"): mail and webhooks; others at the admin's risk.
WEBRACE_DELIVERY_SCHEMES = "mailto,mailtos,json,jsons,xml,xmls,form,forms"
# Internal hosts sends may reach besides public addresses: names, addresses, networks ("mail.internal,10.0.0.0/8").
WEBRACE_DELIVERY_ALLOW_HOSTS = ""
# Whether owners may set a webhook's method, headers, query or payload fields (?method=, ?+H=, ?-p=, ?:f=).
WEBRACE_DELIVERY_CUSTOM_REQUESTS = False
# Days the delivery agent remembers what it delivered to each channel (its own journal,
# WEBRACE_DATA_DIR/delivery-journal.sqlite), so that nothing is sent again when Redis forgot its
# marks; 0 = no journal.
WEBRACE_DELIVERY_JOURNAL_DAYS = 30.0
# Entries the journal keeps at most (the oldest go first; about 100 bytes each).
WEBRACE_DELIVERY_JOURNAL_MAX = 1_000_000
# The Fernet key channel URLs are encrypted with; None = WEBRACE_DATA_DIR/channel-key (made on first use).
# Distributed mode on several machines: give every process the same one.
WEBRACE_DELIVERY_CHANNEL_KEY = None

# DynaBot (`scrapy crawl dynabot`): probes sent per form and per source at most, intermediate
# pages followed after a probe at most, pages a crawling frontier fetches at most.
WEBRACE_DYNABOT_MAX_PROBES_PER_FORM = 20
WEBRACE_DYNABOT_MAX_PROBES_PER_SOURCE = 60
WEBRACE_DYNABOT_MAX_HOPS = 8
WEBRACE_DYNABOT_MAX_PAGES = 200
# POSTs DynaBot sends to one site (host:port) in a crawl at most, probes and their control probes
# included; forms with side effects are never submitted at all (webrace.dynabot.sideeffects).
WEBRACE_DYNABOT_MAX_POSTS_PER_SITE = 10
# Result objects (resultType) a profile lists at most (its "extracted").
WEBRACE_DYNABOT_MAX_EXTRACTED = 20
# Words of a start page (its most frequent) tried as probe values after the command line's
# (-a probe=...) and the probing template's own, where the argument's type takes them.
WEBRACE_DYNABOT_SITE_WORDS = 2
# Order probes by the probing templates' hints, fill optional arguments and read the answers
# to choose the next probe (False: the seed's plain Algorithm 2, parameters in page order; the
# benchmark's baseline).
WEBRACE_DYNABOT_USE_HINTS = True
# A page that refreshes itself ("your job is running") is fetched again after the delay it
# asks for, up to this many seconds; a probe's answer larger than this is not read.
WEBRACE_DYNABOT_MAX_REFRESH_WAIT = 10.0
WEBRACE_DYNABOT_MAX_RESPONSE_BYTES = 4 * 1024 * 1024
# Browser mode, for pages that build their form with scripts: "auto" (on when scrapy-playwright
# and Chromium are installed), True (required: the crawl refuses to start without them) or
# False. Requests through the browser per source at most (the page, each probe, script-built answers);
# Chromium's path (Debian's package by default: nothing is downloaded at run time).
WEBRACE_DYNABOT_BROWSER = "auto"
WEBRACE_DYNABOT_BROWSER_PROBES = 10
WEBRACE_BROWSER_EXECUTABLE = "/usr/bin/chromium"

# Distributed mode: set REDIS_URL (setting or environment variable) and the workers share the
# rounds' queues, the object cache (meta-info and bodies) and coalescing through Redis.
REDIS_URL = os.environ.get("REDIS_URL") or None
# Every Redis key WebRACE writes starts with this, so several deployments can share a server.
WEBRACE_REDIS_PREFIX = os.environ.get("WEBRACE_REDIS_PREFIX", "webrace:")
# Distributed mode: a leased page not finished within this many seconds goes back to the queue.
WEBRACE_LEASE_TIMEOUT = 300.0
# Distributed mode: pages one worker leases (fetches) at once; raise it for rounds over many hosts.
WEBRACE_MAX_LEASED = 8
# Distributed mode: a worker stops after this many seconds without work; None = never.
WEBRACE_IDLE_CLOSE = None
# Distributed mode: a worker started while Redis does not answer waits for it (one line each
# way, tries 1 s apart doubling to 30 s) at most this many seconds, then exits 1; None = as long
# as it takes (a worker is long-running: Redis may start after it); 0 = not at all.
WEBRACE_REDIS_START_WAIT = None

# IPMicra in the distributed mode: each worker has its own queue per round and a page waits
# in the queue of the worker its host's IP is delegated to (docs/explanation/ipmicra.md).
WEBRACE_DELEGATION = False
WEBRACE_WORKER_ID = None  # this worker's name (default: host name and process id)
WEBRACE_WORKER_IP = None  # the address this worker crawls from (its home subnet is delegated to it)
WEBRACE_WORKER_CAPACITY = None  # pages (distinct addresses) this worker takes at most; None: no limit
WEBRACE_DELEGATION_RIR = []  # RIR delegated-extended files: the IP hierarchy
WEBRACE_DELEGATION_SUBNETS = None  # a file of finer subnets, one CIDR per line
WEBRACE_DELEGATION_LATENCY = None  # a crawler,ip,ms CSV the probes read (else measured: TCP connect)
WEBRACE_DELEGATION_HOSTS = {}  # host -> address pins, before DNS
WEBRACE_DELEGATION_STRATEGY = "knowledge"  # knowledge: probes kept, probe where they cannot decide; search: the seed's
WEBRACE_DELEGATION_THRESHOLD_MS = 50.0  # the probing threshold (the search strategy)
WEBRACE_DELEGATION_PROBE_TIMEOUT = 2.0  # seconds to wait for the other workers' probe answers
# SCHEDULER stays Scrapy's own; with REDIS_URL the URD spider sets its lease scheduler
# (webrace.distributed.scheduler.LeaseScheduler).

# --- Scrapy, set for a polite, honest user-driven crawler ------------------------------
USER_AGENT = f"WebRACE/{__version__} (user-driven crawler; Scrapy)"
ROBOTSTXT_OBEY = True
ROBOTSTXT_USER_AGENT = "WebRACE"
CONCURRENT_REQUESTS = 32
# Per-host concurrency and delays are WEBRACE_HOST_CONCURRENCY and the pacing above;
# DOWNLOAD_DELAY stays a floor (seconds between two requests' starts) when set.
DOWNLOAD_DELAY = 0
DOWNLOAD_TIMEOUT = 30
DOWNLOAD_MAXSIZE = 16 * 1024 * 1024
DOWNLOAD_WARNSIZE = 4 * 1024 * 1024
REDIRECT_MAX_TIMES = 10
RETRY_TIMES = 2
# Scrapy starts this many tasks for every callback's output; ours yields one item and links.
CONCURRENT_ITEMS = 8
# The spider sees every status (a 404 is news to someone watching a page) and counts it.
HTTPERROR_ALLOW_ALL = True
# Breadth-first: requests are prioritised by depth, FIFO within a priority.
SCHEDULER_DISK_QUEUE = "scrapy.squeues.PickleFifoDiskQueue"
SCHEDULER_MEMORY_QUEUE = "scrapy.squeues.FifoMemoryQueue"

DOWNLOADER_MIDDLEWARES = {
    # replaced by ExclusionMiddleware (robots.txt per RFC 9309 with no race, pacing, traps, block lists)
    "scrapy.downloadermiddlewares.robotstxt.RobotsTxtMiddleware": None,
    "webrace.middlewares.exclusion.ExclusionMiddleware": 100,
    # Scrapy's, with the target claimed in the round's frontier before it is downloaded
    "scrapy.downloadermiddlewares.redirect.RedirectMiddleware": None,
    "webrace.middlewares.redirect.RedirectMiddleware": 600,
    # Scrapy's, recording the wire's Content-Encoding and length (X-WebRACE-Orig-*) of what it decodes
    "scrapy.downloadermiddlewares.httpcompression.HttpCompressionMiddleware": None,
    "webrace.middlewares.compression.HttpCompressionMiddleware": 590,
    # after RedirectMiddleware (600): a redirected request gets its own validators
    "webrace.middlewares.recrawl.RecrawlMiddleware": 650,
    # Scrapy's, with tldextract's bundled public suffix list (Scrapy's would download it on first use)
    "scrapy.downloadermiddlewares.cookies.CookiesMiddleware": None,
    "webrace.middlewares.cookies.CookiesMiddleware": 700,
}
SPIDER_MIDDLEWARES = {
    # the outermost: a page that met Redis away (distributed mode) is given up in one line, not a traceback
    "webrace.middlewares.outage.RedisOutageMiddleware": 10,
    # depth is per URD and kept by the spider's frontier; Scrapy's counter would mislead
    "scrapy.spidermiddlewares.depth.DepthMiddleware": None,
    # sees the spider's items first: new versions of watched URLs, before annotation may drop a body
    "webrace.sentinels.crawl.SentinelMiddleware": 960,
    # judges new versions for their owners, emits ACIs
    "webrace.annotation.middleware.AnnotationMiddleware": 950,
}
EXTENSIONS = {
    # a page's ACIs leave the crawl as one item; feeds still write one ACI per line (webrace/exporters.py)
    "scrapy.extensions.feedexport.FeedExporter": None,
    "webrace.exporters.FeedExporter": 0,
    "webrace.summary.CrawlSummary": 500,
    "webrace.delivery.extension.DeliveryExtension": 510,  # pushes ACIs, notifications (WEBRACE_DELIVERY)
    "webrace.archive.WarcArchiver": 520,  # the crawl's own WARC files (WEBRACE_STORE_WARC)
    "webrace.memprofile.MemoryProfile": 530,  # allocation sites that grow (WEBRACE_MEMORY_PROFILE)
    "webrace.progress.Progress": 540,  # the progress line on a terminal (WEBRACE_PROGRESS)
}
# Scrapy's telnet console is off: a shell into the crawl on a port every local user can reach
# (it has a password, printed in the log) is not for a shared installation, and its two log lines
# are noise on every crawl; TELNETCONSOLE_ENABLED=True turns it on for debugging.
TELNETCONSOLE_ENABLED = False
FEED_EXPORT_ENCODING = "utf-8"
# one item type per CSV file; a page's owner lists encoded once for all pages sharing them (webrace/exporters.py)
FEED_EXPORTERS = {
    "csv": "webrace.exporters.CsvItemExporter",
    "json": "webrace.exporters.JsonItemExporter",
    **dict.fromkeys(("jsonlines", "jsonl", "jl"), "webrace.exporters.JsonLinesItemExporter"),
}
LOG_LEVEL = "INFO"
# Scrapy's dumps (its versions, settings and components at the start, its stats at the end) at
# INFO too; off, they are DEBUG lines and a crawl ends with the WebRACE summary (webrace/crawllog.py)
WEBRACE_SCRAPY_DUMPS = False
# While a crawl runs, one line on stderr rewritten in place (pages, queued, rate, failed), when
# stderr is a terminal; never in a pipe or a log file (webrace/progress.py)
WEBRACE_PROGRESS = True
# Scrapy 2.19's RemoteControl runs any Python code POSTed to a localhost HTTP port whose token
# sits in the user's profile directory: off for crawls that run unattended on users' behalf.
# Turn it on (-s REMOTE_CONTROL_ENABLED=True) to inspect one running crawl.
REMOTE_CONTROL_ENABLED = False
