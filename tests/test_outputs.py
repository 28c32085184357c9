"""Files written where a user says (``-o PATH``): all or nothing for a regular file, written
through for a symlink or a FIFO (webrace/outputs.py; ipmicra delegate's own cases are in
test_ipmicra_command.py)."""

from __future__ import annotations

import os
import stat
import threading

import pytest

from webrace.outputs import output_problem, write_output
from webrace.xpack.cli import run as xpack


def test_a_regular_file_is_replaced_whole_and_keeps_its_mode(tmp_path):
    target = tmp_path / "out.txt"
    target.write_bytes(b"old\n")
    target.chmod(0o640)
    assert write_output(target, lambda handle: handle.write(b"new\n")) == 4
    assert target.read_bytes() == b"new\n" and stat.S_IMODE(target.stat().st_mode) == 0o640
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]  # no temporary file left


def test_a_new_file_gets_the_umasks_mode(tmp_path):
    old = os.umask(0o027)
    try:
        write_output(tmp_path / "new.txt", lambda handle: handle.write(b"x"))
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "new.txt").stat().st_mode) == 0o640


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    target = tmp_path / "out.txt"
    target.write_bytes(b"old\n")

    def fail(handle):
        handle.write(b"half")
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError):
        write_output(target, fail)
    assert target.read_bytes() == b"old\n" and [p.name for p in tmp_path.iterdir()] == ["out.txt"]


def test_a_symlink_is_written_through_and_stays_a_symlink(tmp_path):
    real, link = tmp_path / "real.txt", tmp_path / "link.txt"
    real.write_bytes(b"old")
    link.symlink_to(real)
    write_output(link, lambda handle: handle.write(b"new"))
    assert link.is_symlink() and real.read_bytes() == b"new"


def test_a_fifo_is_written_through_to_its_reader(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    write_output(fifo, lambda handle: handle.write(b"through the pipe\n"))
    reader.join()
    assert got == [b"through the pipe\n"] and stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_an_output_path_is_refused_before_any_work_where_it_cannot_be_written(tmp_path):
    assert output_problem(tmp_path) == "is a directory"
    assert output_problem(tmp_path / "no" / "out.txt").startswith("no directory")
    assert output_problem(tmp_path / "out.txt") is None


def test_xpack_writes_through_a_symlink_and_refuses_a_missing_directory(tmp_path, capsys):
    source, real, link = tmp_path / "in.xml", tmp_path / "real.xpk", tmp_path / "link.xpk"
    source.write_text("<a><b>text</b></a>")
    real.write_bytes(b"")
    link.symlink_to(real)
    assert xpack(["pack", str(source), str(link)]) == 0
    assert link.is_symlink() and real.stat().st_size > 0
    assert xpack(["pack", str(source), str(tmp_path / "no" / "out.xpk")]) != 0
    assert "no directory" in capsys.readouterr().err
