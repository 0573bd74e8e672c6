"""The answer server's wire format under values nested past any limit: every refusal
is the wire's own :class:`WireError`, never Python's ``RecursionError``, whatever the
interpreter's recursion limit (a learner's code may have lowered it in the server)."""
from __future__ import annotations

import json
import socket
import struct
import sys
import threading

import pytest
import torch

from classroom.isolation import wire


pytestmark = pytest.mark.fast  # in `make test-fast`: no book, no browser, no sandboxed class


def _nested_list(depth: int):
    value = []
    for _ in range(depth):
        value = [value]
    return value


def _frame(header: bytes, payload: bytes = b"") -> bytes:
    return struct.pack(">II", len(header), len(payload)) + header + payload


def _recv(frame: bytes):
    a, b = socket.socketpair()

    def feed():
        try:
            a.sendall(frame)
        except OSError:
            pass  # the reader gave up early: fine
        a.close()

    threading.Thread(target=feed, daemon=True).start()
    return wire.recv(b, timeout=5)


@pytest.mark.parametrize("depth", [wire.MAX_DEPTH + 1, 100_000])
def test_sending_a_value_nested_too_deeply_is_refused_by_the_wire(depth):
    with pytest.raises(wire.WireError, match="nested too deeply"):
        wire.pack({"op": "reply"}, {"out": _nested_list(depth)})


def test_a_value_that_holds_itself_is_refused():
    loop: list = []
    loop.append(loop)
    with pytest.raises(wire.WireError):
        wire.pack({"op": "reply"}, {"out": loop})


def test_a_header_field_nested_deeply_is_refused():
    with pytest.raises(wire.WireError):
        wire.pack({"op": "reply", "extra": _nested_list(100_000)})


@pytest.mark.parametrize("header", [
    b"[" * 200_000 + b"]" * 200_000,                                                  # deep JSON arrays
    b'{"a":' * 100_000 + b"1" + b"}" * 100_000,                                      # deep JSON objects
    json.dumps({"values": json.loads(json.dumps(wire.encode(_nested_list(wire.MAX_DEPTH), []))),
                "blobs": []}).replace('"items": []', '"items": [{"t": "list", "items": []}]').encode(),
])
def test_receiving_a_frame_nested_too_deeply_raises_the_wires_error(header):
    with pytest.raises(wire.WireError):
        _recv(_frame(header))


def test_brackets_inside_strings_do_not_count_as_nesting():
    header, values = _recv(wire.pack({"op": "t", "note": "[[[[{{{{" * 1000}, {"x": "]]]]}}}}" * 100}))
    assert header["note"] == "[[[[{{{{" * 1000 and values == {"x": "]]]]}}}}" * 100}


def test_a_dict_with_a_key_twice_is_refused():
    header = json.dumps({"values": {"t": "dict", "items": [["k", 1], ["k", 2]]}, "blobs": []}).encode()
    with pytest.raises(wire.WireError, match="twice"):
        _recv(_frame(header))


def _with_recursion_limit(margin: int, call):
    """``call()`` with the recursion limit ``margin`` frames above the current depth."""
    depth, frame = 0, sys._getframe()
    while frame is not None:
        depth, frame = depth + 1, frame.f_back
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(depth + margin)
    try:
        return call()
    finally:
        sys.setrecursionlimit(old)


def test_the_caps_hold_under_a_low_recursion_limit():
    deepest = _nested_list(wire.MAX_DEPTH - 1)  # within the caps
    values = {"out": deepest, "t": (torch.ones(2), ("a", {"b": None}))}
    # a limit far below the value's nesting in Python terms: the caps still decide
    with pytest.raises(wire.WireError, match="nested too deeply"):
        _with_recursion_limit(60, lambda: wire.pack({"op": "reply"}, {"out": _nested_list(5000)}))
    frame = _with_recursion_limit(60, lambda: wire.pack({"op": "reply"}, values))
    header, got = _with_recursion_limit(60, lambda: _recv(frame))
    assert got["out"] == deepest and torch.equal(got["t"][0], torch.ones(2))
    assert got["t"][1] == ("a", {"b": None}) and isinstance(got["t"][1], tuple)
    # a limit too low even for JSON of allowed depth: still the wire's own error
    with pytest.raises(wire.WireError):
        _with_recursion_limit(20, lambda: wire.pack({"op": "reply"}, values))


@pytest.mark.parametrize("frame", [
    struct.pack(">II", wire.MAX_HEADER + 1, 0),                                       # oversized header
    struct.pack(">II", 5, 0) + b"nope!",                                               # not JSON
    (lambda h: struct.pack(">II", len(h), 4) + h + b"\0\0\0\0")(
        json.dumps({"values": {"t": "tensor", "dtype": "float32", "shape": [2], "blob": 0}, "blobs": [4]}).encode()),
    (lambda h: struct.pack(">II", len(h), 0) + h)(
        json.dumps({"values": {"t": "pickle", "items": []}, "blobs": []}).encode()),  # unknown kind
    (lambda h: struct.pack(">II", len(h), 8) + h + b"\0" * 8)(
        json.dumps({"values": {"t": "tensor", "dtype": "object", "shape": [1], "blob": 0}, "blobs": [8]}).encode()),
    (lambda h: struct.pack(">II", len(h), 0) + h)(
        json.dumps({"values": {"t": "list", "items": [{"t": "list", "items": []}] * 20000}, "blobs": []}).encode()),
])
def test_wire_refuses_malformed_frames(frame):
    with pytest.raises(wire.WireError):
        _recv(frame)
