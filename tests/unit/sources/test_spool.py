"""Spooled stdin inputs: every non-empty line once, in order, read back on each pass."""

from __future__ import annotations

import io
from typing import IO

import pytest
from doubles import job_spec

from swarm.errors import InputError
from swarm.records import InputItem
from swarm.sources.spool import SpooledLines, StreamedInputs
from swarm.store import MemoryJobStore


def test_lines_are_spooled_with_their_line_numbers_and_read_back_each_pass() -> None:
    stream = io.StringIO("first\n\n  \nsecond\twith a tab\nlast")
    spooled = SpooledLines(stream)
    assert stream.read() == ""  # consumed once, while spooling
    expected = [("stdin:1", "first"), ("stdin:4", "second\twith a tab"), ("stdin:5", "last")]
    assert spooled.count == 3
    assert [(i.ref, i.text) for i in spooled] == expected
    assert [(i.ref, i.text) for i in spooled] == expected
    spooled.close()


def test_streamed_inputs_keep_the_order_of_files_and_stdin() -> None:
    files = [InputItem(ref="a.txt", text="A")]
    items = StreamedInputs([files, SpooledLines(io.StringIO("x\ny\n")), []])
    assert len(items) == 3 and bool(items)
    assert [i.ref for i in items] == ["a.txt", "stdin:1", "stdin:2"]
    assert items[1].text == "x" and items[-1].text == "y"
    assert [i.ref for i in items[1:]] == ["stdin:1", "stdin:2"]
    with pytest.raises(IndexError):
        items[3]
    items.close()


def test_a_store_takes_the_inputs_as_they_are_read() -> None:
    store = MemoryJobStore()
    items = StreamedInputs([SpooledLines(io.StringIO("a\nb\nc\n"))])
    spec = job_spec(3, job_id="job")
    store.create_job(spec, (item.text for item in items))
    assert [store.input_text("job", f"n{i:02d}") for i in range(3)] == ["a", "b", "c"]


@pytest.mark.parametrize(
    ("stream", "message"),
    [
        (io.BytesIO(b"good\nab\xffcd\n"), "stdin:2: not UTF-8 text (byte 7)"),
        (io.StringIO("good\nab\udcffcd\n"), "stdin:2: not UTF-8 text (byte 7)"),
        (io.StringIO("a lone \ud800 surrogate\n"), "stdin:1: not UTF-8 text (byte 7)"),
        (io.BytesIO(b"good\na\0b\n"), "stdin:2: binary input (contains NUL bytes)"),
        (io.StringIO("a\0b\n"), "stdin:1: binary input (contains NUL bytes)"),
    ],
    ids=["bytes not UTF-8", "surrogate escape", "lone surrogate", "NUL bytes", "NUL text"],
)
def test_a_line_is_held_to_the_rule_of_a_file(stream: IO[str] | IO[bytes], message: str) -> None:
    with pytest.raises(InputError) as refused:
        SpooledLines(stream)
    assert str(refused.value) == message


def test_a_stream_of_bytes_is_decoded_as_utf8_with_its_line_ends() -> None:
    spooled = SpooledLines(io.BytesIO("caf\u00e9\r\n\r\nna\u00efve".encode()))
    expected = [("stdin:1", "caf\u00e9"), ("stdin:3", "na\u00efve")]
    assert [(i.ref, i.text) for i in spooled] == expected
    spooled.close()
