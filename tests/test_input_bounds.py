"""Every value a user gives is bounded where it enters: refused with ``file:line``, nothing
stored, and every error the user caused is one line, never a traceback (issue 18, b e f g h)."""

from __future__ import annotations

import os
import socket
import threading
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import urd
from scrapy.settings import Settings

from webrace.backends import RedisUnavailable, connect
from webrace.backends.redis import safe_url
from webrace.backends.sqlite import SqliteUrdStore
from webrace.commands.urd import format_table
from webrace.scout.template import TemplateError, parse_template
from webrace.urd import Urd, UrdError, iter_files, load_files, parse

SQLITE_MAX_INTEGER = 2**63 - 1
URD_LINE_3 = '<urds>\n<urd id="a" owner="o">\n{uri}\n<depth level="{depth}"/></urd>\n</urds>'


def urd_file(uri: str, depth: int = 0) -> bytes:
    """A URD file whose ``<uri>`` is on line 3."""
    return URD_LINE_3.format(uri=uri, depth=depth).encode()


def refusal(data: bytes, source: str = "f.xml") -> str:
    with pytest.raises(UrdError) as info:
        parse(data, source=source)
    (problem,) = info.value.problems
    return problem


# --- (b) timing, lastcheck, depth, port -------------------------------------------------

@pytest.mark.parametrize(("uri", "depth", "line", "reason"), [
    ('<uri timing="3155760000001">http://a.test/</uri>', 0, 3, "3155760000000"),  # over 100 years
    ('<uri timing="99999999999999999999">http://a.test/</uri>', 0, 3, "3155760000000"),
    ('<uri timing="1" lastcheck="253402300800000">http://a.test/</uri>', 0, 3, "253402300799999"),  # year 10000
    (f'<uri timing="1" lastcheck="{2**64}">http://a.test/</uri>', 0, 3, "253402300799999"),
    ('<uri timing="1">http://a.test/</uri>', 65, 4, "64"),
    ('<uri timing="1">http://a.test:99999/</uri>', 0, 3, "Port out of range"),
    ('<uri timing="1">http://a.test:abc/</uri>', 0, 3, "Port could not be cast"),
    ('<uri timing="1">http://a.test:0/</uri>', 0, 3, "port 0"),
    ('<uri timing="1" port="70000">http://a.test/</uri>', 0, 3, "65535"),
    ('<uri timing="1" port="80">http://a.test:abc/</uri>', 0, 3, "Port could not be cast"),  # was a ValueError
])
def test_out_of_range_values_are_refused_with_the_line_of_their_element(uri, depth, line, reason):
    problem = refusal(urd_file(uri, depth))
    assert problem.startswith(f"f.xml:{line}: ") and reason in problem, problem


def test_the_largest_values_are_accepted_and_stored(tmp_path):
    (largest,) = parse(urd_file('<uri timing="3155760000000" lastcheck="253402300799999">http://a.test/</uri>', 64))
    assert largest.next_due <= SQLITE_MAX_INTEGER
    with SqliteUrdStore(tmp_path / "urd.sqlite") as store:
        store.put_many([largest])
        store.mark_checked(["a"], 253402300799999)
        assert store.get("a").lastcheck == 253402300799999


def test_mark_checked_of_a_stored_urd_with_a_huge_timing_does_not_overflow(tmp_path):
    """Data stored before the bounds existed must not crash a crawl's idle handler."""
    with SqliteUrdStore(tmp_path / "urd.sqlite") as store:
        store.put_many([Urd("a", "o", "http://a.test/", timing=10**20, depth=0),
                        Urd("b", "o", "http://b.test/", timing=2**62, depth=0, lastcheck=2**62)])
        store.mark_checked(["a", "b"], 1_700_000_000_000)
        stored = {u.id: u for u in store.all()}
    assert stored["a"].lastcheck == 1_700_000_000_000
    assert 1_700_000_000_000 < stored["a"].next_due <= SQLITE_MAX_INTEGER
    assert not stored["a"].is_due(1_800_000_000_000)


def test_urd_list_shows_a_next_due_beyond_the_year_9999(tmp_path):
    far = Urd("a", "o", "http://a.test/", timing=10**20, depth=0, lastcheck=2**62)
    table = format_table([far], now=1_700_000_000_000)
    assert "a" in table.splitlines()[1]


def test_a_lastcheck_beyond_2_63_is_one_line_and_nothing_is_stored(project):
    path = project.write("big.xml", urd_file(f'<uri timing="1" lastcheck="{2**64}">http://a.test/</uri>').decode())
    result = project.scrapy("urd", "add", str(path))
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    first, last = result.stderr.splitlines()
    assert first.startswith(f"error: {path}:3: ") and last == "Nothing was stored."
    assert project.scrapy("urd", "list", "--format", "jsonl").stdout == ""


# --- (f) credentials in URD URLs --------------------------------------------------------

@pytest.mark.parametrize("url", [
    "http://alice:s3cret@a.test/",
    "https://s3cret@a.test/x",
    "http://alice:s3cret@a.test:99999/",
    "HTTP://alice:s3cret@a.test/",
])
def test_a_url_with_credentials_is_refused_without_echoing_the_password(url):
    problem = refusal(urd_file(f'<uri timing="1">{url}</uri>'))
    assert problem.startswith("f.xml:3: ")
    assert "put credentials in settings, not in URLs" in problem
    assert "s3cret" not in problem


@pytest.mark.parametrize("uri", [
    '<uri timing="1">http://alice:s3cret@a.test/a b</uri>',  # fails the schema's pattern
    f'<uri timing="1">http://alice:s3cret@a.test/{"x" * 2100}</uri>',  # too long
])
def test_a_schema_error_never_echoes_a_password(uri):
    assert "s3cret" not in refusal(urd_file(uri))


def test_urd_add_with_credentials_stores_nothing_and_never_prints_the_password(project):
    path = project.write("cred.xml", urd_file('<uri timing="1">http://alice:s3cret@a.test/</uri>').decode())
    result = project.scrapy("urd", "add", str(path))
    assert result.returncode == 1
    assert "put credentials in settings, not in URLs" in result.stderr
    assert "s3cret" not in result.stderr + result.stdout and "Traceback" not in result.stderr
    assert project.scrapy("urd", "list", "--format", "jsonl").stdout == ""


# --- (g) template expansion -------------------------------------------------------------

def doubling_template(count: int) -> bytes:
    """``v0`` is 64 characters, each next variable twice the one before."""
    lines = ['<template>', f'<var name="v0">{"x" * 64}</var>']
    lines += [f'<var name="v{i}">${{v{i - 1}}}${{v{i - 1}}}</var>' for i in range(1, count)]
    return ("\n".join(lines) + "\n</template>").encode()


@pytest.fixture
def traced() -> Iterator[None]:
    """Memory traced from here: the template schema is built first (xmlschema is imported on
    first use, and building the schema once takes ~10 MB that is not the expansion's)."""
    from webrace.xmlutil import schema

    schema("template")
    tracemalloc.start()
    yield
    tracemalloc.stop()


def test_doubling_variables_are_refused_in_one_line_naming_the_variable(traced):
    """The issue's doubling variables, fewer of them: 20 would be 64 MB and 22 would be
    256 MB if the bound were broken, so the test then fails without exhausting memory."""
    with pytest.raises(TemplateError) as info:
        parse_template(doubling_template(20), "t.xml", max_expansion=1024 * 1024)
    assert tracemalloc.get_traced_memory()[1] < 8 * 1024 * 1024
    (problem,) = info.value.problems
    # v14 is 64 x 2^14 = 1 MiB; v15, on line 17, would be 2 MiB
    assert problem.startswith("t.xml:17: ") and "'v15'" in problem and "1048576" in problem
    with pytest.raises(TemplateError, match="'v15'"):
        parse_template(doubling_template(22), "t.xml")  # the default bound, 1 MiB


def test_expansion_is_bounded_while_expanding_not_after(traced):
    """One reference repeated 16384 times to a 900-character variable: 14 MB if expanded
    first and measured after."""
    body = (f'<template><var name="a">{"x" * 900}</var>\n<var name="b">{"${a}" * 16384}</var>\n'
            '<rule name="r" class="rules.RegExpRule"><param name="pattern">${a}${a}</param></rule></template>')
    with pytest.raises(TemplateError) as info:
        parse_template(body.encode(), "t.xml", max_expansion=1000)
    assert tracemalloc.get_traced_memory()[1] < 4 * 1024 * 1024
    problems = info.value.problems
    assert problems[0].startswith("t.xml:2: ") and "'b'" in problems[0]
    assert "parameter 'pattern'" in problems[1]  # a parameter's expansion is bounded too


# --- (h) XML size and bounded memory ----------------------------------------------------

def test_a_urd_file_over_the_size_limit_is_refused_before_parsing(tmp_path):
    path = tmp_path / "big.xml"
    path.write_bytes(b"<urds>" + b" " * 200)  # not even well-formed: never parsed
    with pytest.raises(UrdError) as info:
        load_files([path], max_bytes=100)
    (problem,) = info.value.problems
    assert problem.startswith(f"{path}: ") and "206 bytes" in problem and "WEBRACE_MAX_XML_BYTES" in problem


def test_a_template_over_the_size_limit_is_refused_before_parsing():
    with pytest.raises(TemplateError, match="WEBRACE_MAX_XML_BYTES"):
        parse_template(b"<template>" + b" " * 200, "t.xml", max_bytes=100)


def many_urds(path: Path, count: int, tail: str = "</urds>\n") -> Path:
    with path.open("w") as out:
        out.write("<urds>\n")
        for i in range(count):
            out.write(urd(f"u{i}", "o", f"http://h{i}.test/") + "\n")
        out.write(tail)
    return path


def test_urds_stream_from_the_file_before_it_is_read_to_the_end(tmp_path):
    """The file is a pipe whose writer holds its malformed end back until the reader has the
    first URD: read to the end first, the reader would have nothing until the writer gave up."""
    path = tmp_path / "u.xml"
    os.mkfifo(path)
    # 95 kB: more than the parser reads at once (lxml asks for 32 kB), so it has whole URDs to give
    head = "<urds>\n" + "".join(urd(f"u{i}", "o", f"http://h{i}.test/") + "\n" for i in range(1000))
    first_urd = threading.Event()
    held_back: list[bool] = []

    def write() -> None:
        with path.open("w") as pipe:
            pipe.write(head)
            pipe.flush()
            held_back.append(first_urd.wait(timeout=60))
            pipe.write("<broken")

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    urds = iter_files([path])
    assert next(urds).id == "u0"
    first_urd.set()
    with pytest.raises(UrdError, match=rf"{path}:1002: not well-formed"):
        list(urds)
    writer.join(timeout=60)
    assert held_back == [True]  # the first URD came before the end was written


def test_urd_add_refuses_a_file_over_the_size_limit_in_one_line(project):
    path = project.write("u.xml", urd_file('<uri timing="1">http://a.test/</uri>').decode())
    result = project.scrapy("urd", "add", "-s", "WEBRACE_MAX_XML_BYTES=50", str(path))
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.startswith(f"error: {path}: ") and "WEBRACE_MAX_XML_BYTES" in result.stderr
    assert project.scrapy("urd", "list", "--format", "jsonl").stdout == ""


def test_an_error_after_many_urds_stores_none_of_them(tmp_path):
    path = many_urds(tmp_path / "u.xml", 5_000, tail=urd("u0", "p", "http://x.test/") + "</urds>")
    with SqliteUrdStore(tmp_path / "urd.sqlite") as store:
        with pytest.raises(UrdError, match="u.xml:5002: duplicated URD id 'u0': also defined in"):
            store.put_many(iter_files([path]))
        assert store.all() == []


# --- (e) REDIS_URL: passwords never shown, bad URLs and a Redis down are one line -------

@pytest.mark.parametrize("url", [
    "redis://alice:s3cret@127.0.0.1:1/0",
    "redis://:s3cret@127.0.0.1:1/0",
    "redis://127.0.0.1:1/0?password=s3cret",
    "redis://127.0.0.1:1/0?username=alice&password=s3cret",
    "rediss://127.0.0.1:1/0?socket_timeout=1&PASSWORD=s3cret",
    "redis://alice:s3cret@127.0.0.1:1/0?password=s3cret",
    "unix:///tmp/redis.sock?db=0&password=s3cret",
    "redis://alice:s3cret@127.0.0.1:99999/0",
    "redis://127.0.0.1:abc/0?password=s3cret",
])
def test_safe_url_hides_every_form_of_password(url):
    assert "s3cret" not in safe_url(url)


@pytest.mark.parametrize("url", [
    "redis://127.0.0.1:99999/0?password=s3cret",
    "redis://alice:s3cret@127.0.0.1:abc/0",
    "127.0.0.1:6379",
    "redis://[::1/0?password=s3cret",
])
def test_a_bad_redis_url_is_one_clear_error(url):
    with pytest.raises(RedisUnavailable) as info:
        connect(Settings({"REDIS_URL": url}))
    message = str(info.value)
    assert "REDIS_URL" in message and "s3cret" not in message and "\n" not in message


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A port on 127.0.0.1 that refuses connections: bound, never listening."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


@pytest.mark.parametrize("command", [
    ("aci", "list", "--owner", "alice"),
    ("aci", "feed", "--owner", "alice"),
    ("aci", "ack", "--owner", "alice", "--all"),
])
def test_aci_commands_with_redis_down_say_so_in_one_line(project, closed_port, command):
    project.env["REDIS_URL"] = f"redis://alice:s3cret@127.0.0.1:{closed_port}/0?password=s3cret"
    result = project.scrapy(*command)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr and "s3cret" not in result.stderr + result.stdout
    (line,) = result.stderr.splitlines()
    assert line.startswith("error: Cannot reach Redis at redis://alice:***@127.0.0.1:")


@pytest.mark.parametrize("port", ["99999", "abc"])
def test_aci_list_with_a_bad_port_in_redis_url_is_one_line(project, port):
    project.env["REDIS_URL"] = f"redis://127.0.0.1:{port}/0?password=s3cret"
    result = project.scrapy("aci", "list", "--owner", "alice")
    assert result.returncode == 1
    assert "Traceback" not in result.stderr and "s3cret" not in result.stderr
    (line,) = result.stderr.splitlines()
    assert line.startswith("error: ") and "REDIS_URL" in line


# -- a sentinel's interval and pattern, on every entry path (issue 42) ---------------------


def test_sentinel_add_with_an_interval_beyond_any_date_is_one_line_and_stores_nothing(project):
    done = project.scrapy("sentinel", "add", "--owner", "alice", "--url", "http://a.test/",
                          "--every", "99999999999999999999999d")
    assert done.returncode != 0 and "Traceback" not in done.stderr and "longer than" in done.stderr
    assert project.scrapy("sentinel", "list", "--format", "jsonl").stdout == ""


@pytest.mark.parametrize(("field", "value", "says"), [
    ("every", "99999999999999999999999d", "longer than"),
    ("pattern", r"(a)\1", "RE2"),
])
def test_the_profile_form_and_api_refuse_what_the_command_refuses(project, field, value, says):
    from webrace.backends import open_sentinel_store
    from webrace.web.profile import ProfileError, add_sentinel

    form = {"url": "http://a.test/", "type": "regex", "pattern": "a+", field: value}
    with pytest.raises(ProfileError, match=says):
        add_sentinel(project.settings(), "alice", form)
    with open_sentinel_store(project.settings()) as store:
        assert store.all() == []


def test_the_data_directory_and_its_stores_are_private_whatever_the_umask(project, tmp_path):
    import stat

    from webrace.backends import open_aci_store, open_metainfo_store, open_sentinel_store, open_urd_store

    old = os.umask(0o022)
    try:
        settings = project.settings()
        for opener in (open_urd_store, open_metainfo_store, open_aci_store, open_sentinel_store):
            opener(settings).close()
    finally:
        os.umask(old)
    assert stat.S_IMODE(project.data.stat().st_mode) == 0o700
    stores = list(project.data.glob("*.sqlite"))
    assert len(stores) >= 4
    assert [p.name for p in stores if stat.S_IMODE(p.stat().st_mode) & 0o077] == []


@pytest.mark.parametrize("owner", ["alice\nroot", "", "a" * 129, "bob smith", "Ω"])
def test_sentinel_add_refuses_an_owner_name_no_account_or_urd_could_have(project, owner):
    done = project.scrapy("sentinel", "add", "--owner", owner, "--url", "http://a.test/")
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert "owner" in done.stderr.lower()
    assert project.scrapy("sentinel", "list", "--format", "jsonl").stdout == ""


@pytest.mark.parametrize(("args", "says"), [
    (("store", "gc", "--keep", "99999999999999999999999"), "--keep must be from 1"),
    (("deliver", "--loop", "--interval", "inf"), "--interval must be more than 0"),
    (("deliver", "--loop", "--interval", "nan"), "--interval must be more than 0"),
    (("aci", "list", "--owner", "alice", "--since", "9" * 5000), "expected a duration"),
])
def test_a_value_out_of_range_on_the_command_line_is_one_usage_line(project, args, says):
    done = project.scrapy(*args, timeout=60)
    assert done.returncode == 2 and "Traceback" not in done.stderr and says in done.stderr


def test_urd_add_of_a_file_that_opens_but_cannot_be_read_is_one_line(project):
    done = project.scrapy("urd", "add", "/proc/self/mem")
    assert done.returncode != 0 and "Traceback" not in done.stderr and "cannot read" in done.stderr
