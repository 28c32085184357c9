"""Files a user names on the command line are read to a bound (webrace/userfiles.py; issue 42:
`/dev/zero` as a URL list, a seed list, a service class, a document to pack or an RIR file
never ended, or filled the memory), and other values out of range are one usage line."""

from __future__ import annotations

import pytest
from scrapy.settings import Settings

from webrace.commands import setting_problems
from webrace.userfiles import UserFileTooLarge, open_bounded_text, read_bounded, read_stream_bounded


def test_a_file_within_the_bound_is_read_whole(tmp_path):
    path = tmp_path / "urls.txt"
    path.write_bytes(b"http://a.test/\n" * 100)
    assert read_bounded(path, limit=1500) == b"http://a.test/\n" * 100
    with open_bounded_text(path, limit=1500, encoding="utf-8") as lines:
        assert sum(1 for _ in lines) == 100


@pytest.mark.parametrize("how", ["whole", "by lines"])
def test_dev_zero_stops_at_the_bound_in_one_line(how):
    with pytest.raises(UserFileTooLarge) as info:
        if how == "whole":
            read_bounded("/dev/zero", limit=1 << 20)
        else:
            with open_bounded_text("/dev/zero", limit=1 << 20, encoding="utf-8") as lines:
                next(iter(lines))  # one endless line
    assert str(info.value) == "/dev/zero: more than 1,048,576 bytes: not read (a device such as /dev/zero never ends)"


def test_a_stream_past_the_bound_is_refused():
    with open("/dev/zero", "rb") as stream, pytest.raises(UserFileTooLarge, match="standard input"):
        read_stream_bounded(stream, "standard input", limit=4096)


@pytest.mark.parametrize(("args", "code", "says"), [
    (("sentinel", "add", "--owner", "alice", "--urls", "/dev/zero"), 2, "/dev/zero: more than"),
    (("crawl", "dynabot", "-a", "scd=/dev/zero", "-a", "seeds=/dev/zero"), 1, "/dev/zero: more than"),
    (("xpack", "pack", "/dev/zero", "out.xpk"), 1, "/dev/zero: more than"),
    (("ipmicra", "delegate", "--rir", "/dev/zero", "--crawlers", "/dev/zero", "--latency", "/dev/zero", "--urls",
      "/dev/zero", "-o", "out.jsonl"), 1, "cannot read RIR file /dev/zero: more than"),
])
def test_a_command_given_dev_zero_ends_with_one_error(project, args, code, says):
    done = project.scrapy(*args, timeout=60)
    assert done.returncode == code and "Traceback" not in done.stderr and says in done.stderr


@pytest.mark.parametrize("interval", ["inf", "nan", "0", "-1"])
def test_urd_schedule_loop_with_an_interval_out_of_range_is_one_usage_line(project, interval):
    done = project.scrapy("urd", "schedule", "--loop", "--interval", interval, timeout=60)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "--interval must be more than 0 and at most 31,622,400 seconds" in done.stderr


def test_sentinel_add_with_a_url_list_that_is_not_utf8_is_one_usage_line(project, tmp_path):
    path = tmp_path / "urls.txt"
    path.write_bytes(b"http://a.test/\n\xff\xfe\n")
    done = project.scrapy("sentinel", "add", "--owner", "alice", "--urls", str(path), timeout=60)
    assert done.returncode == 2 and "Traceback" not in done.stderr and "not UTF-8 (byte 0xff" in done.stderr


# -- a setting given a value that is no number ------------------------------------------------


def test_setting_problems_name_each_number_setting_given_something_else():
    settings = Settings({"WEBRACE_KEEP_VERSIONS": "abc", "DOWNLOAD_MAXSIZE": "9" * 5000,
                         "WEBRACE_STORE_GC_GRACE": "0.5", "CONCURRENT_REQUESTS": "8", "TELNETCONSOLE_ENABLED": "False",
                         "WEBRACE_STORE_XPACK": "yes", "WEBRACE_WEB_LOGIN_LIMIT": "5/hour"})
    assert setting_problems(settings) == [
        "DOWNLOAD_MAXSIZE must be a number, not '" + "9" * 59 + "... (5,002 characters)",
        "WEBRACE_KEEP_VERSIONS must be a number, not 'abc'"]


@pytest.mark.parametrize("args", [
    ("store", "gc", "-s", "WEBRACE_KEEP_VERSIONS=abc"),
    ("deliver", "-s", "WEBRACE_DELIVERY_INTERVAL=soon"),
    ("crawl", "urd", "-s", "CONCURRENT_REQUESTS=" + "9" * 5000),
    ("crawl", "urd", "-s", "WEBRACE_OBJECTS_DIR=/dev/null/x"),
])
def test_a_command_with_a_setting_it_cannot_use_is_one_error_line(project, args):
    done = project.scrapy(*args, timeout=60)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.splitlines()[0].startswith("error: ")


@pytest.mark.parametrize("args", [("--crawlers", "99999999999"), ("--urls", "99999999999"), ("--crawlers", "0")])
def test_ipmicra_simulate_with_a_world_out_of_range_is_one_usage_line(project, args):
    done = project.scrapy("ipmicra", "simulate", *args, timeout=60)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "`simulate` takes --crawlers 1 to 1,000 and --urls 1 to 100,000" in done.stderr
