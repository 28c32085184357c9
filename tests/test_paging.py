"""Lists read a page at a time from an index (issue 46): an owner's ACIs and notifications,
keyset-paged by (time, id) in the embedded and the Redis stores, through the web app's API
and pages; what a page reads does not grow with the owner's history."""

from __future__ import annotations

import re
import sqlite3
from random import Random

import pytest
from conftest import redis_space
from scrapy.settings import Settings

import webrace.backends.sqlite.aci as sqlite_aci
from webrace.backends.redis import RedisAciStore
from webrace.backends.redis_sentinels import RedisSentinelStore
from webrace.backends.sqlite import SqliteAciStore, SqliteSentinelStore
from webrace.records.aci import Aci
from webrace.sentinels.evaluate import Notification
from webrace.web import owners
from webrace.web.accounts import open_accounts
from webrace.web.app import create_app


@pytest.fixture(params=["sqlite", "redis"])
def aci_store(request, tmp_path):
    if request.param == "sqlite":
        return SqliteAciStore(tmp_path / "aci.sqlite")
    return RedisAciStore(*redis_space(request))


@pytest.fixture(params=["sqlite", "redis"])
def sentinel_store(request, tmp_path):
    if request.param == "sqlite":
        return SqliteSentinelStore(tmp_path / "sentinels.sqlite")
    return RedisSentinelStore(*redis_space(request))


def aci(owner: str, at: int, n: int) -> Aci:
    return Aci(owner=owner, uri=f"http://a.test/{n}", relevance=2.0, updatetime=at, filesize=10, version=1,
               docbase=f"{n:064x}", summary="s", title=f"P{n}")


def note(owner: str, at: int, n: int) -> Notification:
    return Notification(sentinel=f"s{n % 3}", owner=owner, url=f"http://a.test/{n}", type="content", where=None,
                        changes={"added": [str(n)]}, before="", after=str(n), at=at, version=n)


def walk(read, owner: str, size: int, arriving=None) -> list:
    """Every page from the newest, following the cursor; ``arriving(k)`` runs after page k."""
    seen, cursor = [], None
    for k in range(10_000):
        page = read(owner, size, cursor)
        if not page:
            return seen
        seen += page
        cursor = owners.cursor_of(page[-1])
        if arriving is not None:
            arriving(k)
    raise AssertionError("paging did not end")


def _key(item) -> tuple:
    return owners.cursor_of(item)


def test_paging_acis_returns_each_once_in_order_while_new_ones_arrive(aci_store):
    """300 of carol's ACIs over 40 distinct times (ties), among others' ACIs, stored in
    batches so that the embedded store has both indexed runs and pages past its index; while
    the pages are read, newer ACIs arrive: the walk sees every ACI that was there when it began
    exactly once, newest first, and nothing older than where it stands is skipped."""
    rng = Random(46)
    with aci_store as store:
        n = 0
        for _ in range(30):
            pages = []
            for _ in range(10):
                pages.append([aci("carol", rng.randrange(1000, 1040) * 1000, n), aci("dave", 5, n)])
                n += 1
            store.add_pages(pages)
        before = {a.id for a in store.list("carol")}
        assert len(before) == 300 and store.count("carol") == 300

        def arriving(k: int) -> None:  # newer than anything read so far: they go before the cursor
            nonlocal n
            store.add_pages([[aci("carol", 2_000_000 + k, n)]])
            n += 1

        seen = walk(store.page, "carol", 7, arriving)
    ids = [a.id for a in seen]
    assert len(ids) == len(set(ids)) and set(ids) == before
    times = [a.updatetime for a in seen]
    assert times == sorted(times, reverse=True)
    assert all(a.owner == "carol" for a in seen)


def test_a_page_before_a_cursor_is_the_one_just_newer(aci_store):
    with aci_store as store:
        store.add_pages([[aci("erin", 1000 * (n // 2), n)] for n in range(25)])
        everything = walk(store.page, "erin", 4)
        for at in (0, 5, 13, 24):
            newer = store.page("erin", 4, _key(everything[at]), newer=True)
            assert [a.id for a in newer] == [a.id for a in everything[max(0, at - 4):at]]
        assert store.page("nobody", 4) == [] and store.page("erin", 0) == []


def test_paging_notifications_returns_each_once_in_order_while_new_ones_arrive(sentinel_store):
    rng = Random(7)
    with sentinel_store as store:
        store.add_notifications([note("carol", rng.randrange(50) * 1000, n) for n in range(120)])
        store.add_notifications([note("dave", 1, n) for n in range(10)])
        before = {n["id"] for n in store.notifications("carol")}
        extra = iter(range(1000, 2000))

        def arriving(k: int) -> None:
            store.add_notifications([note("carol", 10_000_000 + k, next(extra))])

        seen = walk(store.notifications_page, "carol", 9, arriving)
        assert store.notification("carol", seen[0]["id"]) == seen[0]
        assert store.notification("dave", seen[0]["id"]) is None
        newer = store.notifications_page("carol", 3, _key(seen[10]), newer=True)
        assert [n["id"] for n in newer] == [n["id"] for n in seen[7:10]]
    ids = [n["id"] for n in seen]
    assert len(ids) == len(set(ids)) and set(ids) == before
    assert [n["at"] for n in seen] == sorted((n["at"] for n in seen), reverse=True)


def test_the_embedded_stores_page_queries_search_their_index(tmp_path):
    with SqliteAciStore(tmp_path / "aci.sqlite") as store:
        plan = store.conn.execute("EXPLAIN QUERY PLAN SELECT updatetime, page, number FROM aci_owner_time "
                                  "WHERE owner = ? AND (updatetime, page) < (?, ?) "
                                  "ORDER BY updatetime DESC, page DESC LIMIT ?", (1, 5, 5, 5)).fetchall()
    assert [p[3] for p in plan] == ["SEARCH aci_owner_time USING PRIMARY KEY (owner=? AND (updatetime,page)<(?,?))"]
    with SqliteSentinelStore(tmp_path / "sentinels.sqlite") as store:
        plan = store.conn.execute("EXPLAIN QUERY PLAN SELECT json FROM notification WHERE owner = ? "
                                  "AND (at, id) < (?, ?) ORDER BY at DESC, id DESC LIMIT ?",
                                  ("a", 5, "x", 5)).fetchall()
    assert [p[3] for p in plan] == ["SEARCH notification USING INDEX notification_newest (owner=? AND (at,id)<(?,?))"]


def _rows_read(store: SqliteAciStore, owner: str, cursor) -> int:
    """Virtual-machine steps SQLite takes for one page: grows with the rows a query visits."""
    steps = 0

    def count() -> int:
        nonlocal steps
        steps += 1
        return 0

    store.conn.set_progress_handler(count, 1)
    try:
        assert len(store.page(owner, 50, cursor)) == 50
    finally:
        store.conn.set_progress_handler(None, 1)
    return steps


def test_a_page_reads_as_much_at_100_acis_as_at_20000(tmp_path, monkeypatch):
    """The same owner's page (first, and past a cursor in the middle) with 100 ACIs and with
    20,000: SQLite's steps differ by less than the page's own size, not by the history."""
    monkeypatch.setattr(sqlite_aci, "_TAIL_PAGES", 500)
    steps = {}
    for size in (100, 20_000):
        with SqliteAciStore(tmp_path / f"aci-{size}.sqlite") as store:
            for start in range(0, size, 1000):
                store.add_pages([[aci("fay", 1000 + k, k)] for k in range(start, min(start + 1000, size))])
            store.close()
        with SqliteAciStore(tmp_path / f"aci-{size}.sqlite") as store:
            middle = store.page("fay", 1, (1000 + max(size // 2, 75), "x"))[0]
            steps[size] = (_rows_read(store, "fay", None), _rows_read(store, "fay", _key(middle)))
    for first, later in zip(steps[100], steps[20_000], strict=True):
        assert later < first * 1.5, steps


def test_an_older_store_gets_its_time_index_from_its_first_read(tmp_path):
    """A store written before aci_owner_time: its ACIs are paged from the new index, made by the
    first read that needs it."""
    path = tmp_path / "aci.sqlite"
    with SqliteAciStore(path) as store:
        store.add_pages([[aci("gus", 1000 * n, n)] for n in range(50)])
        store.add_pages([[aci("gus", 10**6, 500)]])  # past the index until close
    with sqlite3.connect(path) as conn:  # as it was: no time index, no mark of how far it goes
        conn.execute("DROP TABLE aci_owner_time")
        conn.execute("DELETE FROM aci_meta WHERE name = 'time_indexed'")
    conn.close()
    with SqliteAciStore(path) as store:
        seen = walk(store.page, "gus", 8)
        assert store.conn.execute("SELECT count(*) FROM aci_owner_time").fetchone()[0] == 51
    assert [a.updatetime for a in seen] == [10**6, *(1000 * n for n in reversed(range(50)))]


def test_writing_acis_leaves_the_time_index_to_the_first_read(tmp_path):
    """The crawl does not pay for the web app's index (a row per ACI): the first page read
    after it brings the index up to date, once; the next reads write nothing."""
    path = tmp_path / "aci.sqlite"
    with SqliteAciStore(path) as store:
        store.add_pages([[aci(f"o{k}", 1000 * n, n) for k in range(30)] for n in range(200)])
    with SqliteAciStore(path) as store:
        rows = "SELECT count(*) FROM aci_owner_time"
        assert store.conn.execute(rows).fetchone()[0] == 0
        first = store.page("o7", 5)
        assert store.conn.execute(rows).fetchone()[0] == 30 * 200
        changes = store.conn.total_changes
        assert store.page("o7", 5) == first and store.conn.total_changes == changes
    assert [a.updatetime for a in first] == [1000 * n for n in range(199, 194, -1)]


# -- through the web app ----------------------------------------------------------------------------


@pytest.fixture
def api(tmp_path):
    settings = Settings({"WEBRACE_DATA_DIR": str(tmp_path), "WEBRACE_WEB_PAGE_SIZE": 6})
    with open_accounts(settings) as accounts:
        accounts.add("hal", "hal-secret")
        token = accounts.new_token("hal")
    with SqliteAciStore(tmp_path / "aci.sqlite") as store:
        store.add_pages([[aci("hal", 1000 * (n % 9), n)] for n in range(40)])
    with SqliteSentinelStore(tmp_path / "sentinels.sqlite") as store:
        store.add_notifications([note("hal", 1000 * (n % 4), n) for n in range(15)])
    return create_app(settings).test_client(), {"Authorization": f"Bearer {token}"}


@pytest.mark.parametrize(("path", "items"), [("/api/v1/owners/hal/acis", "acis"),
                                             ("/api/v1/owners/hal/notifications", "notifications")])
def test_the_api_pages_by_cursor_forwards_and_back(api, path, items):
    client, auth = api
    pages, cursor = [], None
    while True:
        answer = client.get(path, query_string={"after": cursor} if cursor else {}, headers=auth).json
        pages.append(answer)
        if not answer["more"]:
            assert answer["next"] is None
            break
        cursor = answer["next"]
    ids = [item["id"] for page in pages for item in page[items]]
    assert len(ids) == len(set(ids)) == (40 if items == "acis" else 15)
    assert all(len(p[items]) == 6 for p in pages[:-1]) and pages[0]["previous"] is None
    back = client.get(path, query_string={"before": pages[2]["previous"]}, headers=auth).json
    assert [i["id"] for i in back[items]] == [i["id"] for i in pages[1][items]]


def test_old_page_numbers_still_answer_their_page(api):
    client, auth = api
    by_number = [client.get("/api/v1/owners/hal/acis", query_string={"page": n}, headers=auth).json
                 for n in (1, 2, 7, 8)]
    first = client.get("/api/v1/owners/hal/acis", headers=auth).json
    second = client.get("/api/v1/owners/hal/acis", query_string={"after": first["next"]}, headers=auth).json
    assert by_number[0]["acis"] == first["acis"] and by_number[1]["acis"] == second["acis"]
    assert [p["page"] for p in by_number] == [1, 2, 7, 8]
    assert len(by_number[2]["acis"]) == 4 and not by_number[2]["more"] and by_number[3]["acis"] == []


@pytest.mark.parametrize("cursor", ["x", "12", ".abc", "1e3.abc", "1" * 17 + ".a", "5.a b", "5." + "a" * 400])
def test_a_cursor_that_is_none_answers_400_saying_so(api, cursor):
    client, auth = api
    for path in ("/api/v1/owners/hal/acis", "/api/v1/owners/hal/notifications"):
        answer = client.get(path, query_string={"after": cursor}, headers=auth)
        assert answer.status_code == 400 and "after: expected a cursor TIME.ID" in answer.json["error"]


def test_the_owner_page_links_older_and_newer_pages_by_cursor(api):
    client, auth = api
    form = client.get("/login").get_data(as_text=True)
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', form).group(1)
    login = {"username": "hal", "password": "hal-secret", "csrf_token": csrf}
    assert client.post("/login", data=login).status_code == 302
    first = client.get("/owner/hal/").get_data(as_text=True)
    assert 'id="older"' in first and 'id="newer"' not in first and "after=" in first
    older = first.split('id="older" href="')[1].split('"')[0].replace("&amp;", "&")
    second = client.get(older).get_data(as_text=True)
    assert 'id="newer"' in second and 'id="newest"' in second
    titles = [[t.split("<")[0] for t in page.split('rel="noreferrer noopener">')[1:]] for page in (first, second)]
    assert len(titles[0]) == len(titles[1]) == 6 and not set(titles[0]) & set(titles[1])

