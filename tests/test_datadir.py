"""A data directory that cannot be made or used (issue 42: `crawl urd -s
WEBRACE_DATA_DIR=/dev/null/x` gave a traceback): every command says one line naming it."""

from __future__ import annotations

import os

import pytest
from scrapy.settings import Settings

from webrace.backends import open_urd_store
from webrace.datadir import DataDirUnusable, data_dir, objects_dir


@pytest.mark.parametrize("command", [
    ("crawl", "urd"),
    ("crawl", "dynabot", "-a", "scd=x.xml", "-a", "seeds=y.txt"),
    ("urd", "list"),
    ("aci", "list", "--owner", "alice"),
    ("sentinel", "list"),
    ("store", "gc"),
    ("store", "import", "--warc", "in.warc.gz"),
    ("user", "list"),
    ("web", "serve", "--port", "0"),
])
def test_every_command_says_one_line_when_the_data_directory_cannot_be_made(project, command):
    done = project.scrapy(*command, "-s", "WEBRACE_DATA_DIR=/dev/null/x")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.splitlines()[0] == ("error: cannot use /dev/null/x: Not a directory (set WEBRACE_DATA_DIR to "
                                           "a directory this user can create and write)")


@pytest.mark.parametrize("kind", ["a file", "a missing parent in /proc", "a NUL byte"])
def test_a_data_directory_that_cannot_be_made_is_one_line_naming_the_setting(tmp_path, kind):
    value = {"a file": tmp_path / "file", "a missing parent in /proc": "/proc/no/such/dir",
             "a NUL byte": "data\x00dir"}[kind]
    if kind == "a file":
        value.write_text("not a directory")
    with pytest.raises(DataDirUnusable) as info:
        data_dir(Settings({"WEBRACE_DATA_DIR": str(value)}))
    message = str(info.value)
    assert message.startswith("cannot use ") and "WEBRACE_DATA_DIR" in message and "\n" not in message
    assert "\x00" not in message


def test_the_body_store_directory_names_its_own_setting(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(DataDirUnusable, match="WEBRACE_OBJECTS_DIR"):
        objects_dir(Settings({"WEBRACE_DATA_DIR": str(tmp_path / "data"),
                              "WEBRACE_OBJECTS_DIR": str(tmp_path / "file" / "objects")}))


@pytest.mark.parametrize("kind", ["a directory", "not a database"])
def test_a_store_file_that_cannot_be_opened_is_one_line_and_left_as_it_was(tmp_path, kind):
    data = tmp_path / "data"
    data.mkdir()
    store = data / "urd.sqlite"
    if kind == "a directory":
        store.mkdir()
    else:
        store.write_bytes(b"garbage " * 100)
    with pytest.raises(DataDirUnusable, match=r"urd\.sqlite: (unable to open database file|file is not a database)"):
        open_urd_store(Settings({"WEBRACE_DATA_DIR": str(data)}))
    assert store.is_dir() if kind == "a directory" else store.read_bytes() == b"garbage " * 100


def test_a_crawl_with_a_store_file_that_is_no_database_stops_before_any_request(project):
    project.data.mkdir()
    (project.data / "cache.sqlite").write_bytes(b"garbage " * 100)
    done = project.scrapy("crawl", "urd")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.splitlines() == [
        f"error: cannot use {project.data / 'cache.sqlite'}: file is not a database (set WEBRACE_DATA_DIR to a "
        "directory this user can create and write)", "Nothing was crawled."]


def test_a_usable_data_directory_is_made_private(tmp_path):
    made = data_dir(Settings({"WEBRACE_DATA_DIR": str(tmp_path / "a" / "b")}))
    assert made.is_dir() and os.stat(made).st_mode & 0o777 == 0o700
