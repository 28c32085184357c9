"""The S3 object store (issue 47) on a real S3 API server (moto's, tests/s3server.py): what it
adds to the store contract (tests/test_store.py runs that on it), what a user gets wrong, and
two workers with no shared directory keeping their bodies in one bucket."""

from __future__ import annotations

import gzip
import re
import socket
import threading

import pytest
from conftest import urd
from scrapy.settings import Settings

from webrace.backends import SharedStoreMismatch, open_object_cache, open_object_store
from webrace.backends.sqlite import SqliteMetaInfoStore
from webrace.store.cache import ObjectCache
from webrace.store.objects import ObjectStoreUnwritable, digest_of
from webrace.store.s3 import S3ObjectStore

STORE = "webrace.store.s3.S3ObjectStore"


def s3_settings(server, bucket: str, prefix: str = "crawl/", **extra) -> dict:
    return {"WEBRACE_OBJECT_STORE": STORE, "WEBRACE_S3_BUCKET": bucket, "WEBRACE_S3_PREFIX": prefix,
            "WEBRACE_S3_ENDPOINT_URL": server.url, "WEBRACE_S3_REGION": "us-east-1", **extra}


def set_args(settings: dict) -> list[str]:
    return [arg for name, value in settings.items() for arg in ("-s", f"{name}={value}")]


def keys(server, bucket: str) -> list[str]:
    listed = server.client().list_objects_v2(Bucket=bucket)
    return sorted(item["Key"] for item in listed.get("Contents", ()))


def test_bodies_go_under_content_addressed_keys_and_other_keys_are_never_listed_or_deleted(
        s3_server, s3_bucket, tmp_path):
    store = S3ObjectStore.from_settings(Settings(s3_settings(s3_server, s3_bucket, prefix="/team/crawl")))
    digest = store.put(b"a body")[0]
    assert digest == digest_of(b"a body")
    client = s3_server.client()
    for foreign in ("team/crawl/notes.txt", f"team/crawl/zz/{digest}.z", "team/crawl/ab/short.z", "elsewhere/x"):
        client.put_object(Bucket=s3_bucket, Key=foreign, Body=b"not ours")
    assert list(store.digests()) == [digest]
    with ObjectCache(SqliteMetaInfoStore(tmp_path / "cache.sqlite"), store) as cache:
        assert cache.gc(keep=1, force=True).objects_deleted == 1  # the body nothing points to, nothing else
    assert keys(s3_server, s3_bucket) == ["elsewhere/x", "team/crawl/.webrace-store", "team/crawl/ab/short.z",
                                          "team/crawl/notes.txt", f"team/crawl/zz/{digest}.z"]


def test_a_write_finding_its_body_re_dates_it_by_a_copy_unless_it_was_re_dated_lately(s3_server, s3_bucket):
    store = S3ObjectStore(s3_server.client(), s3_bucket, "objects", refresh_after=900)
    digest = store.put(b"an unchanged page")[0]
    s3_server.date_back(s3_bucket, store.key(digest), 600)
    lately = store.mtime(digest)
    assert store.put(b"an unchanged page")[1] is False
    assert store.mtime(digest) == lately  # younger than refresh_after: no copy
    s3_server.date_back(s3_bucket, store.key(digest), 1200)
    before = len(s3_server.requests)
    assert store.put(b"an unchanged page")[1] is False
    assert store.mtime(digest) > lately  # copied onto itself: LastModified is now
    assert ("PUT", f"/{s3_bucket}/{store.key(digest)}") in s3_server.requests[before:]  # (CopyObject is a PUT)
    assert store.get(digest) == b"an unchanged page"


def test_a_bucket_that_cannot_be_used_is_one_line_naming_it_and_the_reason(s3_server, s3_bucket):
    def problem(**settings) -> str:
        with pytest.raises(ObjectStoreUnwritable) as info:
            S3ObjectStore.from_settings(Settings(s3_settings(s3_server, s3_bucket, **settings)))
        said = str(info.value)
        assert "\n" not in said and "secret" not in said
        return said

    assert problem(WEBRACE_S3_BUCKET=None) == ("WEBRACE_OBJECT_STORE is the S3 store but WEBRACE_S3_BUCKET is not "
                                               "set: name the bucket")
    assert problem(WEBRACE_S3_BUCKET="no-such-bucket-here") == (
        f"cannot use the object store s3://no-such-bucket-here/crawl/ at {s3_server.url}: the bucket does not "
        "exist (create it, or set WEBRACE_S3_BUCKET)")
    with socket.socket() as unused:  # a port nothing listens on
        unused.bind(("127.0.0.1", 0))
        nobody = f"http://127.0.0.1:{unused.getsockname()[1]}"
    assert problem(WEBRACE_S3_ENDPOINT_URL=nobody, WEBRACE_S3_MAX_ATTEMPTS=2) == (
        f"cannot use the object store s3://{s3_bucket}/crawl/ at {nobody}: cannot connect to {nobody}")
    assert problem(WEBRACE_S3_ENDPOINT_URL="not a url").startswith("WEBRACE_S3_ENDPOINT_URL 'not a url' is not usable")
    s3_server.require_credentials(True)
    try:
        assert problem().endswith(": access denied (InvalidAccessKeyId): check the credentials and the bucket's "
                                  "policy")
    finally:
        s3_server.require_credentials(False)


def test_a_worker_pointed_at_another_bucket_or_prefix_is_refused(s3_server, s3_bucket, redis_url, redis_prefix):
    mode = {"REDIS_URL": redis_url, "WEBRACE_REDIS_PREFIX": redis_prefix}
    first = open_object_store(Settings({**mode, **s3_settings(s3_server, s3_bucket)}))  # names the store in Redis
    again = open_object_store(Settings({**mode, **s3_settings(s3_server, s3_bucket)}))
    assert first.identity() == again.identity()
    for other in (s3_settings(s3_server, s3_server.bucket()), s3_settings(s3_server, s3_bucket, prefix="other/")):
        with pytest.raises(SharedStoreMismatch, match="point WEBRACE_S3_BUCKET, WEBRACE_S3_PREFIX and "
                                                      "WEBRACE_S3_ENDPOINT_URL at the ones they use"):
            open_object_store(Settings({**mode, **other}))


# -- two workers, no shared directory (the must-show 2) ----------------------------------------


class Gate:
    """The site answers no page until both workers have asked for one (told apart by their
    User-Agent), so neither can take the whole round before the other has started (at most
    ``limit`` seconds). Every page is queued when the round opens (a URD each), and a worker
    leases a few at a time: the second one finds pages left however late it starts."""

    def __init__(self, site, limit: float = 60) -> None:
        self.lookup, self.limit = site.lookup, limit
        self.changed, self.agents, self.opened = threading.Condition(), set(), True
        site.lookup = self.answer

    def close(self) -> None:
        with self.changed:
            self.agents, self.opened = set(), False

    def answer(self, host: str, path: str, headers: dict) -> object:
        if path != "/robots.txt":
            with self.changed:
                self.agents.add(headers.get("User-Agent"))
                if len(self.agents) >= 2:
                    self.opened = True
                    self.changed.notify_all()
                self.changed.wait_for(lambda: self.opened, timeout=self.limit)
        return self.lookup(host, path, headers)


def test_two_workers_with_no_shared_directory_keep_every_body_once_in_s3_read_them_back_and_gc_and_export_work(
        tmp_path, redis_url, redis_prefix, site, s3_server, s3_bucket):
    from test_distributed import finish, schedule, start_worker, worker_project
    from warcio.archiveiterator import ArchiveIterator

    paths = [f"/p{i}.html" for i in range(30)]
    site.validators = True
    site.html("/", paths)
    for i, path in enumerate(paths):  # /p0.html and /p1.html serve the same body: stored once
        site.add(path, f"<html><body><p>page {max(i, 1)}</p>{'lorem ipsum ' * 300}<a href='/'>home</a></body></html>")
    bodies = {site.url(path): site.routes[(None, path)][2] for path in ["/", *paths]}
    s3 = s3_settings(s3_server, s3_bucket)
    env = {"REDIS_URL": redis_url, "WEBRACE_REDIS_PREFIX": redis_prefix}  # and no WEBRACE_OBJECTS_DIR
    scheduler = worker_project(tmp_path, "scheduler", env)
    scheduler.add_urds(*(urd(f"u{n}", "alice", url, depth=0) for n, url in enumerate(bodies)))
    a, b = worker_project(tmp_path, "a", env), worker_project(tmp_path, "b", env)
    gate = Gate(site)

    def crawl_round() -> list:
        schedule(scheduler)
        gate.close()  # both workers fetch pages: the site waits for the second one
        runs = [start_worker(w, USER_AGENT=f"webrace-test-{w.root.name}", WEBRACE_MAX_LEASED=4, **s3)
                for w in (a, b)]
        # (a machine loaded by the whole suite: the first worker may wait up to the gate's limit)
        done = [finish(w, *run, timeout=420) for w, run in zip((a, b), runs, strict=True)]
        for run in done:
            assert run.returncode == 0 and "Traceback" not in run.stderr, run.stderr[-3000:]
        assert all(run.pages for run in done), [(len(run.items), run.stderr[-1500:]) for run in done]
        assert sum(len(run.pages) for run in done) == 31
        return done

    crawl_round()
    assert sorted(site.paths()) == sorted(["/", *paths])
    settings = Settings({**env, **s3, "WEBRACE_DATA_DIR": str(tmp_path / "reader")})
    with open_object_cache(settings) as cache:
        stored = set(cache.objects.digests())
        assert stored == set(cache.index.referenced_digests())  # nothing half-written, nothing stray
        assert {digest_of(body) for body in bodies.values()} <= stored
        assert len({digest_of(body) for body in bodies.values()}) == 30  # 31 pages, 30 bodies, each once
        for url, body in bodies.items():
            assert cache.get(url)[1] == body
    for worker in (a, b, scheduler):  # no body on any machine's disk
        assert not list(worker.root.rglob("*.z"))

    schedule(scheduler)  # closes round 1
    scheduler.make_due()
    site.clear_hits()
    before = len(s3_server.requests)
    second = crawl_round()  # conditional: each worker checks the stored body (from S3) before it asks
    assert set(site.statuses().values()) == {304}
    assert sum(run.stat("recrawl/conditional") for run in second) == 31
    read = {path for method, path in s3_server.requests[before:] if method == "GET"}
    assert {f"/{s3_bucket}/crawl/{digest[:2]}/{digest}.z" for digest in map(digest_of, bodies.values())} <= read

    # gc on the bucket: an old body nothing points to goes, a young one stays (another worker's)
    objects = S3ObjectStore.from_settings(settings)
    old, young = objects.put(b"an old orphan")[0], objects.put(b"a young orphan")[0]
    s3_server.date_back(s3_bucket, objects.key(old), 7200)
    gc = a.scrapy("store", "gc", "--keep", "1", *set_args(s3))
    assert gc.returncode == 0, gc.stderr
    assert "deleted 1 object(s)" in gc.stdout and "spared 1 unreferenced object(s)" in gc.stdout, gc.stdout
    assert not objects.exists(old) and objects.exists(young)

    out = tmp_path / "crawl.warc.gz"
    export = b.scrapy("store", "export", "--warc", str(out), *set_args(s3))
    assert export.returncode == 0, export.stderr
    assert "Wrote 31 response, 62 request and 31 revisit record(s) of 31 URL(s)" in export.stderr, export.stderr
    with gzip.open(out, "rb") as raw:
        responses = {record.rec_headers.get_header("WARC-Target-URI"): record.content_stream().read()
                     for record in ArchiveIterator(raw) if record.rec_type == "response"}
    assert responses == bodies

    broken = a.scrapy("store", "gc", *set_args({**s3, "WEBRACE_S3_BUCKET": "no-such-bucket-here"}))
    assert broken.returncode == 1 and "Traceback" not in broken.stderr
    assert re.fullmatch(r"error: cannot use the object store s3://no-such-bucket-here/crawl/ at \S+: the bucket "
                        r"does not exist \(create it, or set WEBRACE_S3_BUCKET\)\n", broken.stderr), broken.stderr
