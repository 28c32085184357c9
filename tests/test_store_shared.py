"""Bodies on a shared disk, meta-info compact in Redis (issue 22): the distributed mode's
object store is a directory every worker mounts; Redis keeps a few hundred bytes per page."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap

import pytest
import redis
from conftest import Project, urd
from scrapy.settings import Settings

from webrace.backends import SharedStoreMismatch, open_object_cache, open_object_store
from webrace.backends.redis import RedisMetaInfoStore
from webrace.backends.sqlite import SqliteMetaInfoStore
from webrace.store.cache import IndexLost, ObjectCache
from webrace.store.objects import ObjectStore, ObjectStoreUnwritable, digest_of
from webrace.xmlutil import schema


def settings(tmp_path, redis_url, redis_prefix, data="data", **extra) -> Settings:
    return Settings({"REDIS_URL": redis_url, "WEBRACE_REDIS_PREFIX": redis_prefix,
                     "WEBRACE_DATA_DIR": str(tmp_path / data),
                     "WEBRACE_OBJECTS_DIR": str(tmp_path / "shared"), **extra})


def redis_bytes(client: redis.Redis, prefix: str, lasting: bool = False) -> int:
    """Memory Redis itself reports for every key under ``prefix`` (MEMORY USAGE, all samples);
    ``lasting``: only keys that do not expire (not a closed round's queues)."""
    return sum(client.memory_usage(key, samples=0) or 0 for key in client.scan_iter(match=f"{prefix}*")
               if not lasting or client.ttl(key) == -1)


@pytest.fixture(params=["sqlite", "redis"])
def cache(request, tmp_path):
    objects = ObjectStore(tmp_path / "objects")
    if request.param == "sqlite":
        index = SqliteMetaInfoStore(tmp_path / "cache.sqlite")
    else:
        client, prefix = redis.Redis.from_url(request.getfixturevalue("redis_url")), \
            request.getfixturevalue("redis_prefix")
        index = RedisMetaInfoStore(client, prefix, objects)
    with ObjectCache(index, objects, revisits_kept=3) as c:
        yield c


def fetch(cache, url, body, at, header="HTTP/1.1 200 OK\r\nETag: \"e\"", links=()):
    return cache.record_fetch(url, 200, body, fetched=at, header=header, links=list(links), etag='"e"')


# -- per-version headers and 304 answers, both backends ----------------------------------------


def test_each_version_keeps_the_header_of_its_own_fetch(cache):
    fetch(cache, "http://a.test/", b"v1", 1, header="HTTP/1.1 200 OK\r\nX-Fetch: one")
    fetch(cache, "http://a.test/", b"v2", 2, header="HTTP/1.1 200 OK\r\nX-Fetch: two")
    assert [v.header for v in cache.versions("http://a.test/")] == [
        "HTTP/1.1 200 OK\r\nX-Fetch: one", "HTTP/1.1 200 OK\r\nX-Fetch: two"]
    assert cache.lookup("http://a.test/").header == "HTTP/1.1 200 OK\r\nX-Fetch: two"


def test_a_304_is_logged_as_a_revisit_of_the_version_it_confirmed_and_only_the_newest_are_kept(cache):
    meta = fetch(cache, "http://a.test/", b"v1", 1).meta
    for at in range(10, 15):
        meta = cache.record_not_modified(meta, at, '"e"', None, header="HTTP/1.1 304 Not Modified")
    revisits = cache.revisits("http://a.test/")
    assert [(r.fetched, r.number, r.digest) for r in revisits] == [(at, 1, digest_of(b"v1")) for at in (12, 13, 14)]
    assert cache.lookup("http://a.test/").fetched == 1  # the meta-info keeps the time of the full fetch


def test_pruning_a_version_forgets_the_304s_that_confirmed_it(cache):
    meta = fetch(cache, "http://a.test/", b"v1", 1).meta
    cache.record_not_modified(meta, 5, '"e"', None)
    meta = fetch(cache, "http://a.test/", b"v2", 6).meta
    cache.record_not_modified(meta, 7, '"e"', None)
    cache.gc(keep=1)
    assert [(r.fetched, r.number) for r in cache.revisits("http://a.test/")] == [(7, 2)]


# -- what Redis keeps ------------------------------------------------------------------------------


def test_redis_keeps_a_few_hundred_bytes_a_page_however_long_its_header_and_links(tmp_path, redis_url,
                                                                                  redis_prefix):
    client = redis.Redis.from_url(redis_url)
    header = "HTTP/1.1 200 OK\r\n" + "".join(f"X-Header-{i}: {'v' * 60}\r\n" for i in range(40))  # 3 KB
    links = [f"http://a.test/some/rather/long/path/to/page-{i}.html" for i in range(300)]  # 15 KB
    with open_object_cache(settings(tmp_path, redis_url, redis_prefix)) as c:
        before = redis_bytes(client, redis_prefix)
        for i in range(200):
            fetch(c, f"http://a.test/page-{i}.html", f"body {i} ".encode() * 1000, 1000 + i, header, links)
        per_page = (redis_bytes(client, redis_prefix) - before) / 200
        assert per_page < 400, per_page
        meta = c.lookup("http://a.test/page-7.html")
        assert meta.header == header and list(meta.links) == links  # from the shared store
        assert c.get("http://a.test/page-7.html")[1] == b"body 7 " * 1000


# a link list long enough for a side object of its own (more than INLINE_SIDE bytes with the header)
MANY_LINKS = [f"http://a.test/a/rather/long/path/to/page-{i}.html" for i in range(40)]


def test_a_short_header_and_link_list_stay_in_the_record_and_cost_no_file(tmp_path, redis_url, redis_prefix):
    with open_object_cache(settings(tmp_path, redis_url, redis_prefix)) as c:
        fetch(c, "http://a.test/short", b"body", 1, links=["http://a.test/x"])
        assert set(c.index.referenced_digests()) == {digest_of(b"body")}  # no side object
        assert sorted(p.name for p in c.objects.root.glob("??/*")) == [c.objects.path(digest_of(b"body")).name]
        fetch(c, "http://a.test/long", b"other", 2, links=MANY_LINKS)
        assert len(set(c.index.referenced_digests()) - {digest_of(b"body"), digest_of(b"other")}) == 1
        for url, links in (("http://a.test/short", ("http://a.test/x",)), ("http://a.test/long", tuple(MANY_LINKS))):
            meta = c.lookup(url)
            assert meta.links == links and meta.header == "HTTP/1.1 200 OK\r\nETag: \"e\"" and meta.etag == '"e"'
            assert [v.header for v in c.versions(url)] == [meta.header]


def test_the_records_preset_dictionary_never_changes_and_records_written_without_it_still_read():
    import hashlib
    import json
    import zlib

    from webrace.backends.redis import _RECORD_DICT, _dumps, _loads

    # every record written with it needs it to be read: a change would make them all unreadable
    assert hashlib.sha256(_RECORD_DICT).hexdigest() == \
        "f71d38b20223f9b495b579bd6a7c932c1ca1302fd8ba38beae35b17763c06bdd"
    record = {"m": {"s": 200, "f": 1, "z": 3, "H": "HTTP/1.1 200 OK\nContent-Type: text/html", "L": ["http://a.test/"]}}
    packer = zlib.compressobj(6, zlib.DEFLATED, -15)  # as records were written before the dictionary
    before = packer.compress(json.dumps(record, separators=(",", ":")).encode()) + packer.flush()
    assert _loads(before) == record
    assert _loads(_dumps(record)) == record
    assert len(_dumps(record)) < len(before)


def test_a_lost_side_object_makes_the_next_request_unconditional(tmp_path, redis_url, redis_prefix):
    with open_object_cache(settings(tmp_path, redis_url, redis_prefix)) as c:
        fetch(c, "http://a.test/", b"body", 1, links=MANY_LINKS)
        sides = set(c.index.referenced_digests()) - {digest_of(b"body")}
        assert sides
        for digest in sides:
            c.objects.delete(digest)
        meta = c.lookup("http://a.test/")
        assert meta.etag is None and meta.lastmodified is None and not meta.validators
        assert meta.digest == digest_of(b"body")  # an unchanged body is still recognised


def test_a_record_read_back_right_after_its_write_needs_no_side_object_read(tmp_path, redis_url, redis_prefix):
    # the annotation reads each page's record back moments after the store thread wrote it: the
    # side object it just wrote (content-addressed, so what it kept cannot be stale) is not read again
    with open_object_cache(settings(tmp_path, redis_url, redis_prefix)) as c:
        fetch(c, "http://a.test/", b"body", 1, links=MANY_LINKS)
        sides = set(c.index.referenced_digests()) - {digest_of(b"body")}
        assert sides
        for digest in sides:
            c.objects.delete(digest)
        assert c.lookup("http://a.test/", recent=True).links == tuple(MANY_LINKS)
        assert c.lookup("http://a.test/").links == ()  # a request's lookup reads it, and notices it is gone
        # nor the record itself: it answers as it wrote it, without a round trip
        fetch(c, "http://a.test/b", b"other", 2)
        redis.Redis.from_url(redis_url).delete(f"{redis_prefix}url:http://a.test/b")
        assert c.lookup("http://a.test/b", recent=True).digest == digest_of(b"other")
        assert c.lookup("http://a.test/b") is None


# -- one directory, many workers --------------------------------------------------------------------


# (two writers storing one body at once, and a lost side object repaired: the store contract,
# tests/test_store.py, on the directory and the S3 store)


def test_a_worker_whose_directory_is_not_the_shared_one_is_refused(tmp_path, redis_url, redis_prefix):
    open_object_store(settings(tmp_path, redis_url, redis_prefix))  # the first worker names the store
    other = settings(tmp_path, redis_url, redis_prefix, WEBRACE_OBJECTS_DIR=str(tmp_path / "not-mounted"))
    with pytest.raises(SharedStoreMismatch, match="mount the shared directory and point WEBRACE_OBJECTS_DIR"):
        open_object_store(other)
    open_object_store(settings(tmp_path, redis_url, redis_prefix, data="another-worker"))  # same share: fine


def test_a_worker_with_another_directory_is_refused_before_any_request(tmp_path, redis_url, redis_prefix, site):
    site.html("/")
    open_object_store(settings(tmp_path, redis_url, redis_prefix))
    (tmp_path / "w").mkdir()
    project = Project(tmp_path / "w")
    project.env.update(REDIS_URL=redis_url, WEBRACE_REDIS_PREFIX=redis_prefix,
                       WEBRACE_OBJECTS_DIR=str(tmp_path / "elsewhere"))
    done = project.crawl()
    assert done.returncode == 1
    assert done.stderr.splitlines()[0].startswith("error: the object store ") and not site.paths()


WRITER = textwrap.dedent("""
    import sys
    import redis
    from webrace.backends.redis import RedisMetaInfoStore
    from webrace.store.cache import ObjectCache
    from webrace.store.objects import ObjectStore
    url, prefix, shared, name = sys.argv[1:]
    objects = ObjectStore(shared)
    cache = ObjectCache(RedisMetaInfoStore(redis.Redis.from_url(url), prefix, objects), objects)
    n = 0
    while True:
        n += 1
        body = (f"{name} version {n} " * 30000).encode()
        cache.record_fetch(f"http://{name}.test/{n % 7}", 200, body, fetched=n, header="HTTP/1.1 200 OK",
                           links=[f"http://{name}.test/{n}"])
        print(n, flush=True)
""")


def test_kill_9_of_two_writers_on_one_directory_leaves_no_partial_object(tmp_path, redis_url, redis_prefix):
    shared = tmp_path / "shared"
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, redis_url, redis_prefix, str(shared), name],
                              stdout=subprocess.PIPE, text=True) for name in ("a", "b")]
    try:
        for proc in procs:
            for line in proc.stdout:
                if int(line) >= 25:
                    break
        for proc in procs:
            proc.send_signal(signal.SIGKILL)  # wherever each is: inside a write or between two
    finally:
        for proc in procs:
            proc.wait(timeout=30)
    objects = ObjectStore(shared)
    digests = list(objects.digests())
    assert len(digests) >= 50
    for digest in digests:  # every object under its name is whole: it reads back to its digest
        objects.get(digest)
    index = RedisMetaInfoStore(redis.Redis.from_url(redis_url), redis_prefix, objects)
    urls = index.urls()
    assert len(urls) == 14
    for url in urls:
        meta = index.get(url)
        assert meta.links and meta.header == "HTTP/1.1 200 OK"
        for version in index.versions(url):
            assert objects.get(version.digest).startswith(url.split("/")[2].split(".")[0].encode())
    objects.sweep()  # what a killed write left is a temporary file, and gc's sweep removes it
    assert not list((shared / "tmp").iterdir())


# -- gc on a shared store -------------------------------------------------------------------------------


# (gc's grace period: the store contract, tests/test_store.py)


def test_gc_refuses_when_the_index_is_empty_but_bodies_are_stored(tmp_path, redis_url, redis_prefix):
    with open_object_cache(settings(tmp_path, redis_url, redis_prefix)) as c:
        fetch(c, "http://a.test/", b"body", 1)
        redis.Redis.from_url(redis_url).delete(f"{redis_prefix}url:http://a.test/")  # Redis came back empty
        with pytest.raises(IndexLost):
            c.gc(keep=3)
        assert c.objects.exists(digest_of(b"body"))
        assert c.gc(keep=3, force=True).objects_deleted == 1  # the body (its short header stays in the record)


# -- a store that cannot be written -------------------------------------------------------------------


@pytest.fixture
def immutable(tmp_path):
    """A directory nothing can be created in, even by root (``chattr +i``)."""
    path = tmp_path / "ro"
    (path / "tmp").mkdir(parents=True)
    done = subprocess.run(["chattr", "+i", str(path / "tmp")], capture_output=True)
    if done.returncode:
        pytest.skip(f"chattr +i not permitted here: {done.stderr.decode().strip()}")
    yield path
    subprocess.run(["chattr", "-i", str(path / "tmp")], check=True)


def test_a_read_only_store_is_one_clear_error_and_keeps_nothing_half_written(immutable, tmp_path):
    objects = ObjectStore(immutable)
    with ObjectCache(SqliteMetaInfoStore(tmp_path / "cache.sqlite"), objects) as c:
        with pytest.raises(ObjectStoreUnwritable) as info:
            fetch(c, "http://a.test/", b"body", 1)
        assert str(info.value).startswith(f"cannot write to the object store {immutable}: ")
        assert "\n" not in str(info.value)
        assert c.lookup("http://a.test/") is None and not list(objects.digests())


@pytest.fixture
def tiny_disk(tmp_path):
    """A filesystem of 256 KB (a real tmpfs): writes past it fail with ENOSPC."""
    path = tmp_path / "tiny"
    path.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(path)], capture_output=True)
    if done.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    yield path
    subprocess.run(["umount", "-l", str(path)], check=True)


def test_a_full_store_stops_the_crawl_with_one_error_and_nothing_half_written(tiny_disk, project, site):
    pages = [f"/p{i}.html" for i in range(20)]
    site.html("/", pages)
    for i, path in enumerate(pages):  # 60 KB that do not compress: the disk fills after a few pages
        site.add(path, b"<html><body>" + os.urandom(30_000).hex().encode() + f"{i}</body></html>".encode())
    project.add_urds(urd("u", "alice", site.url("/"), depth=1))
    done = project.crawl(WEBRACE_OBJECTS_DIR=str(tiny_disk))
    assert done.returncode == 1
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert errors == [f"error: cannot write to the object store {tiny_disk}: the disk is full"]
    assert done.summary["reason"] == "store_unwritable"
    objects = ObjectStore(tiny_disk)
    assert not list(objects.tmp.glob("*.part"))
    with open_object_cache(Settings({"WEBRACE_DATA_DIR": str(project.data),
                                     "WEBRACE_OBJECTS_DIR": str(tiny_disk)})) as c:
        urls = c.index.urls()
        assert urls
        for url in urls:  # every recorded version's body is there, whole
            for version in c.versions(url):
                assert digest_of(c.get(url, version.number)[1]) == version.digest



def test_a_continuous_crawl_waits_out_a_full_store_and_keeps_the_pages_once_it_can(tiny_disk, project, site):
    site.html("/", ["/a.html", "/b.html"])
    site.html("/a.html")
    site.html("/b.html")
    project.add_urds(urd("u", "alice", site.url("/"), depth=1, timing=300))
    ObjectStore(tiny_disk)  # its directories made while there is room
    ballast = tiny_disk / "ballast"
    with open(ballast, "wb", buffering=0) as f:  # the disk filled to its last block
        for size in (1 << 14, 512):
            with contextlib.suppress(OSError):
                while f.write(b"\0" * size):
                    pass
    crawl = project.start(*project.crawl_args(project.root / "pages.jsonl", WEBRACE_CONTINUOUS=True,
                                              WEBRACE_OBJECTS_DIR=str(tiny_disk), LOG_LEVEL="INFO"))
    try:
        crawl.wait_for("The object store cannot be written; pages fail until it can")
        ballast.unlink()
        back = crawl.wait_for("The object store can be written again")
        crawl.wait_for("Round", "crawling", after=back + 1)  # a whole round after it: every page kept
    finally:
        code = crawl.stop()
    said = crawl.stream("stderr")
    assert code == 0 and "Traceback" not in said, said[-5000:]
    assert said.count("The object store cannot be written") == 1, said[-5000:]
    settings = Settings({"WEBRACE_DATA_DIR": str(project.data), "WEBRACE_OBJECTS_DIR": str(tiny_disk)})
    with open_object_cache(settings) as c:
        assert sorted(c.index.urls()) == sorted(site.url(p) for p in ("/", "/a.html", "/b.html"))
        for url in c.index.urls():
            newest = c.versions(url)[-1]
            assert digest_of(c.get(url, newest.number)[1]) == newest.digest


# -- two real workers on one shared directory (the must-show) ---------------------------------


def test_two_workers_on_one_shared_directory_store_500_pages_in_a_few_hundred_redis_bytes_each(
        tmp_path, redis_url, redis_prefix, site):
    from test_distributed import finish, schedule, start_worker, worker_project

    paths = [f"/p{i}.html" for i in range(500)]
    site.validators = True
    site.html("/", paths)
    for i, path in enumerate(paths):
        site.add(path, f"<html><body><p>page {i}</p>{'lorem ipsum dolor ' * 500}<a href='/'>home</a>"
                       f"</body></html>")
    env = {"REDIS_URL": redis_url, "WEBRACE_REDIS_PREFIX": redis_prefix,
           "WEBRACE_OBJECTS_DIR": str(tmp_path / "shared")}
    scheduler = worker_project(tmp_path, "scheduler", env)
    scheduler.add_urds(urd("u", "alice", site.url("/"), depth=1))
    schedule(scheduler)
    client = redis.Redis.from_url(redis_url)
    before = redis_bytes(client, redis_prefix)
    a, b = worker_project(tmp_path, "a", env), worker_project(tmp_path, "b", env)
    # what is measured is Redis's bytes, not failures: a request the loaded test server drops is retried
    (pa, oa), (pb, ob) = start_worker(a, RETRY_TIMES=2), start_worker(b, RETRY_TIMES=2)
    run_a, run_b = finish(a, pa, oa), finish(b, pb, ob)
    assert run_a.returncode == 0 and run_b.returncode == 0, run_a.stderr[-2000:] + run_b.stderr[-2000:]
    assert run_a.pages and run_b.pages  # both stored pages
    assert len(run_a.pages) + len(run_b.pages) == 501
    schedule(scheduler)  # closes the finished round: its queues expire a while later
    per_page = (redis_bytes(client, redis_prefix, lasting=True) - before) / 501
    print(f"Redis bytes per stored page: {per_page:.0f} (the round's expiring queues: "
          f"{(redis_bytes(client, redis_prefix) - redis_bytes(client, redis_prefix, lasting=True)) / 501:.0f} more)")
    assert per_page < 600, per_page  # (headers and link lists up to INLINE_SIDE bytes stay in the record)
    for worker in (a, b):  # every body readable by both
        with open_object_cache(Settings({"WEBRACE_DATA_DIR": str(worker.data), **env})) as c:
            for i in (0, 123, 499):
                assert f"<p>page {i}</p>".encode() in c.get(site.url(f"/p{i}.html"))[1]
            assert len(c.index.urls()) == 501


# -- the layout before bodies left Redis ----------------------------------------------------------------


def test_the_earlier_redis_layout_migrates_bodies_to_the_shared_store_and_records_to_one_key_each(
        tmp_path, redis_url, redis_prefix):
    import json
    import zlib

    from webrace.backends.redis import legacy_layout, migrate_legacy
    from webrace.records.metainfo import MetaInfo

    client = redis.Redis.from_url(redis_url)
    url = "http://a.test/"
    for n, body in ((1, b"first"), (2, b"second")):  # what the earlier code wrote
        client.set(f"{redis_prefix}object:{digest_of(body)}", zlib.compress(body))
        client.rpush(f"{redis_prefix}versions:{url}", json.dumps(
            {"n": n, "digest": digest_of(body), "fetched": n * 1000, "size": len(body), "status": 200}))
    meta = MetaInfo(url, 200, 2000, "HTTP/1.1 200 OK", ("http://a.test/x",), etag='"e"', size=6,
                    digest=digest_of(b"second"), version=2)
    client.hset(f"{redis_prefix}meta", url, meta.to_xml())
    client.hset(f"{redis_prefix}refs", digest_of(b"first"), 1)
    assert legacy_layout(client, redis_prefix)
    with open_object_cache(settings(tmp_path, redis_url, redis_prefix)) as c:
        assert migrate_legacy(client, redis_prefix, c.index, c.objects) == (1, 2, 2)
        assert not legacy_layout(client, redis_prefix)
        assert not list(client.scan_iter(match=f"{redis_prefix}object:*"))
        assert c.lookup(url) == meta
        assert [(v.number, c.get(url, v.number)[1]) for v in c.versions(url)] == [(1, b"first"), (2, b"second")]
        assert migrate_legacy(client, redis_prefix, c.index, c.objects) == (0, 0, 0)  # again: nothing to do


def test_two_fetches_of_one_url_recorded_at_once_give_one_version_each_body_and_no_error(cache):
    # both requests read "no record" before either was stored (two routes to one page in flight)
    first = cache.record_fetch("http://a.test/", 200, b"body", fetched=1, header="HTTP/1.1 200 OK", links=[],
                               previous=None)
    second = cache.record_fetch("http://a.test/", 200, b"body", fetched=2, header="HTTP/1.1 200 OK", links=[],
                                previous=None)
    assert (first.version, first.new_version) == (1, True)
    assert (second.version, second.new_version, second.unchanged) == (1, False, True)
    other = cache.record_fetch("http://b.test/", 200, b"one", fetched=1, header="HTTP/1.1 200 OK", links=[],
                               previous=None)
    changed = cache.record_fetch("http://b.test/", 200, b"two", fetched=2, header="HTTP/1.1 200 OK", links=[],
                                 previous=None)  # as if nothing were stored: it takes the next number all the same
    assert (other.version, changed.version, changed.new_version) == (1, 2, True)
    assert [(v.number, v.digest) for v in cache.versions("http://b.test/")] == [(1, digest_of(b"one")),
                                                                                (2, digest_of(b"two"))]


def test_a_pages_refresh_target_is_kept_in_its_meta_info(cache):
    cache.record_fetch("http://a.test/", 200, b"<meta>", fetched=1, header="HTTP/1.1 200 OK",
                       links=["http://a.test/en/"], refresh="http://a.test/en/")
    assert cache.lookup("http://a.test/").refresh == "http://a.test/en/"
    schema("metainfo").validate(cache.lookup("http://a.test/").to_xml())
