"""The opt-in memory profile (webrace/memprofile.py): off by default; on, it names the lines
whose allocations grew since its first snapshot."""

from __future__ import annotations

import re
import tracemalloc

import pytest
from scrapy.exceptions import NotConfigured
from scrapy.utils.test import get_crawler

from webrace.memprofile import MemoryProfile


def test_the_memory_profile_is_off_unless_a_file_is_named():
    with pytest.raises(NotConfigured):
        MemoryProfile.from_crawler(get_crawler(settings_dict={"WEBRACE_MEMORY_PROFILE": None}))


def test_the_memory_profile_names_the_line_whose_allocations_grew(tmp_path):
    profile = MemoryProfile(tmp_path / "profile.txt", 60.0, 4)
    tracemalloc.start(4)
    try:
        profile.dump()  # the baseline
        kept = [bytearray(1024) for _ in range(4096)]  # 4 MiB more, made on this line
        profile.dump()
    finally:
        tracemalloc.stop()
    baseline, grown = re.split(r"^== pid", (tmp_path / "profile.txt").read_text(), flags=re.MULTILINE)[1:]
    assert "baseline snapshot" in baseline
    first = grown.splitlines()[1:4]
    assert float(first[0].split()[0]) >= 4096, grown[:800]  # KiB grown, the largest growth first
    assert "test_memprofile.py" in first[1] and "kept = [bytearray(1024)" in first[2], grown[:800]
    assert len(kept) == 4096
