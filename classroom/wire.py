"""The narrow channel between the grader and a process that runs a learner's code.

A message is one frame on a stream socket::

    8 bytes   header length H and payload length P (two big-endian uint32)
    H bytes   a JSON header (UTF-8)
    P bytes   the raw bytes of the tensors the header refers to

Values are plain data only -- never pickle, which would run code on the receiving
side. :func:`encode` turns None, bools, ints, floats, strings, lists, tuples, dicts
with string keys and ``torch.Tensor`` into JSON-able data plus byte blobs (a tensor is
its dtype, shape and raw bytes); :func:`decode` turns them back and checks everything
on the way: dtypes from a fixed list, shapes that match the bytes, bounded nesting,
lengths and sizes. Whatever the other side sends, decoding either gives plain values
or raises :class:`WireError`.
"""
from __future__ import annotations

import json
import math
import socket
import struct
import time

import torch

MAX_HEADER = 1 << 20  # bytes of JSON in one frame
MAX_PAYLOAD = 64 << 20  # bytes of tensor data in one frame
MAX_DEPTH = 8
MAX_ITEMS = 10_000
MAX_DIMS = 8
MAX_STRING = 20_000

DTYPES = {
    "float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32,
    "float64": torch.float64, "int64": torch.int64, "int32": torch.int32, "int8": torch.int8,
    "uint8": torch.uint8, "bool": torch.bool,
}
_NAMES = {v: k for k, v in DTYPES.items()}
_HEAD = struct.Struct(">II")


class WireError(Exception):
    """The other side broke the protocol (or went away)."""


# ----------------------------------------------------------------------------- values
def dtype_name(dtype) -> str | None:
    return _NAMES.get(dtype)


def encode(value, blobs: list[bytes], _depth: int = 0):
    """JSON-able form of ``value``; tensor bytes are appended to ``blobs``."""
    if _depth > MAX_DEPTH:
        raise WireError("value nested too deeply")
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else {"t": "float", "v": repr(value)}
    if type(value) is torch.Tensor:
        name = dtype_name(value.dtype)
        if name is None:
            raise WireError(f"tensors of dtype {value.dtype} are not sent")
        t = value.detach().to("cpu").contiguous()
        data = t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
        blobs.append(data)
        return {"t": "tensor", "dtype": name, "shape": list(t.shape), "blob": len(blobs) - 1}
    if isinstance(value, (list, tuple)):
        items = [encode(v, blobs, _depth + 1) for v in value]
        return {"t": "tuple" if isinstance(value, tuple) else "list", "items": items}
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise WireError("only dicts with string keys are sent")
        return {"t": "dict", "items": [[k, encode(v, blobs, _depth + 1)] for k, v in value.items()]}
    raise WireError(f"values of type {type(value).__name__} are not sent")


def decode(data, blobs: list[bytes], _depth: int = 0, _budget: list | None = None):
    """The value :func:`encode` described; raises :class:`WireError` on anything odd."""
    budget = _budget if _budget is not None else [MAX_ITEMS]
    budget[0] -= 1
    if budget[0] < 0 or _depth > MAX_DEPTH:
        raise WireError("value too large or nested too deeply")
    if data is None or isinstance(data, bool):
        return data
    if isinstance(data, int):
        if abs(data) > 1 << 63:
            raise WireError("integer out of range")
        return data
    if isinstance(data, float):
        return data
    if isinstance(data, str):
        if len(data) > MAX_STRING:
            raise WireError("string too long")
        return data
    if not isinstance(data, dict):
        raise WireError(f"unexpected {type(data).__name__}")
    kind = data.get("t")
    if kind == "float":
        text = data.get("v")
        if text not in ("inf", "-inf", "nan"):
            raise WireError("bad float")
        return float(text)
    if kind == "tensor":
        return _decode_tensor(data, blobs)
    items = data.get("items")
    if not isinstance(items, list) or len(items) > MAX_ITEMS:
        raise WireError("bad container")
    if kind in ("list", "tuple"):
        out = [decode(v, blobs, _depth + 1, budget) for v in items]
        return tuple(out) if kind == "tuple" else out
    if kind == "dict":
        out = {}
        for pair in items:
            if not (isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str)
                    and len(pair[0]) <= 200):
                raise WireError("bad dict item")
            out[pair[0]] = decode(pair[1], blobs, _depth + 1, budget)
        return out
    raise WireError(f"unknown value kind {str(kind)[:40]!r}")


def _decode_tensor(data: dict, blobs: list[bytes]) -> torch.Tensor:
    dtype = DTYPES.get(data.get("dtype"))
    shape = data.get("shape")
    index = data.get("blob")
    if dtype is None or not isinstance(shape, list) or len(shape) > MAX_DIMS:
        raise WireError("bad tensor description")
    if not all(isinstance(n, int) and not isinstance(n, bool) and 0 <= n <= MAX_PAYLOAD for n in shape):
        raise WireError("bad tensor shape")
    if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < len(blobs):
        raise WireError("bad tensor data reference")
    raw = blobs[index]
    numel = math.prod(shape)
    itemsize = torch.empty((), dtype=dtype).element_size()
    if numel * itemsize != len(raw):
        raise WireError("tensor data does not match its shape")
    if numel == 0:
        return torch.empty(shape, dtype=dtype)
    flat = torch.frombuffer(bytearray(raw), dtype=torch.uint8)
    return flat.view(dtype).reshape(shape).clone()


# ----------------------------------------------------------------------------- frames
def pack(header: dict, values: dict | None = None) -> bytes:
    """One frame: ``header`` (JSON-able) with ``values`` encoded under header["values"]."""
    blobs: list[bytes] = []
    if values is not None:
        header = {**header, "values": encode(values, blobs)}
    header = {**header, "blobs": [len(b) for b in blobs]}
    head = json.dumps(header, separators=(",", ":")).encode()
    payload = b"".join(blobs)
    if len(head) > MAX_HEADER or len(payload) > MAX_PAYLOAD:
        raise WireError("message too large to send")
    return _HEAD.pack(len(head), len(payload)) + head + payload


def send(sock: socket.socket, header: dict, values: dict | None = None) -> None:
    sock.sendall(pack(header, values))


def _recv_exact(sock: socket.socket, n: int, deadline: float | None) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no answer in time")
            sock.settimeout(left)
        try:
            chunk = sock.recv(min(n - len(buf), 1 << 20))
        except socket.timeout:
            raise TimeoutError("no answer in time") from None
        except OSError as exc:
            raise WireError(f"connection lost: {exc}") from None
        if not chunk:
            raise WireError("connection closed")
        buf += chunk
    return bytes(buf)


def recv(sock: socket.socket, timeout: float | None = None) -> tuple[dict, object]:
    """Read one frame: (header without its values, the decoded values or None).

    Raises ``TimeoutError`` when nothing complete arrives within ``timeout`` seconds
    and :class:`WireError` on a closed connection or a malformed frame."""
    deadline = None if timeout is None else time.monotonic() + timeout
    hlen, plen = _HEAD.unpack(_recv_exact(sock, _HEAD.size, deadline))
    if hlen > MAX_HEADER or plen > MAX_PAYLOAD:
        raise WireError(f"frame too large ({hlen} + {plen} bytes)")
    try:
        header = json.loads(_recv_exact(sock, hlen, deadline))
    except ValueError:
        raise WireError("header is not JSON") from None
    payload = _recv_exact(sock, plen, deadline)
    if not isinstance(header, dict):
        raise WireError("header is not an object")
    sizes = header.pop("blobs", [])
    if not isinstance(sizes, list) or not all(isinstance(n, int) and n >= 0 for n in sizes) \
            or sum(sizes) != plen:
        raise WireError("blob sizes do not add up")
    blobs, at = [], 0
    for n in sizes:
        blobs.append(payload[at:at + n])
        at += n
    values = header.pop("values", None)
    return header, (decode(values, blobs) if values is not None else None)
