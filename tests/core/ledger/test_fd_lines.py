"""Reading a ledger file line by line in large blocks: every line whole, whatever the block size."""

from __future__ import annotations

import os

import pytest

from jupyterlab_gradcheck.core.ledger import store as reader


@pytest.fixture
def small_blocks(monkeypatch):
    """Blocks of 64 bytes (CHUNK * 64 with CHUNK = 1), so that lines straddle blocks and outgrow them."""
    monkeypatch.setattr(reader, "CHUNK", 1)


def _lines(path, offset=0):
    fd = os.open(path, os.O_RDONLY)
    try:
        return list(reader.fd_lines(fd, offset))
    finally:
        os.close(fd)


def test_lines_that_straddle_and_outgrow_blocks_come_out_whole(tmp_path, small_blocks):
    """Given a file of lines of 10, 63, 64, 65 and 300 bytes (blocks of 64 bytes) ending with a newline,
    when it is read,
    then each line comes out whole and complete, numbered from 1, and nothing follows the last."""
    lines = [bytes([97 + k]) * n for k, n in enumerate((10, 63, 64, 65, 300))]
    path = tmp_path / "l.jsonl"
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    assert _lines(path) == [(k + 1, line, True) for k, line in enumerate(lines)]


def test_a_last_line_without_its_newline_comes_out_incomplete(tmp_path, small_blocks):
    """Given two complete lines and a torn third of 150 bytes with no newline,
    when it is read,
    then the third comes out whole with complete false, and the others complete."""
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"x" * 70 + b"\n" + b"y" * 5 + b"\n" + b"z" * 150)
    assert _lines(path) == [(1, b"x" * 70, True), (2, b"y" * 5, True), (3, b"z" * 150, False)]


def test_reading_from_an_offset_starts_at_that_line(tmp_path, small_blocks):
    """Given the same complete lines, when reading starts at the offset of the second line,
    then the lines from the second on come out (numbered from 1 again, as the caller counts on)."""
    path = tmp_path / "o.jsonl"
    path.write_bytes(b"a" * 70 + b"\n" + b"b" * 80 + b"\n" + b"c\n")
    assert _lines(path, offset=71) == [(1, b"b" * 80, True), (2, b"c", True)]


def test_an_empty_file_has_no_lines(tmp_path):
    """Given an empty file, when it is read, then there are no lines, torn or not."""
    path = tmp_path / "e.jsonl"
    path.write_bytes(b"")
    assert _lines(path) == []
