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
import re
import socket
import struct
import time

import torch

MAX_HEADER = 1 << 20  # bytes of JSON in one frame
MAX_PAYLOAD = 64 << 20  # bytes of tensor data in one frame
MAX_DEPTH = 8
MAX_ITEMS = 10_000
# JSON nesting of a frame's header: an encoded value adds at most three levels per level
# of its own (dict -> items -> [key, value]); the header's own fields a few more
MAX_JSON_DEPTH = 3 * (MAX_DEPTH + 1) + 8
MAX_DIMS = 8
MAX_STRING = 20_000

DTYPES = {
    "float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32,
    "float64": torch.float64, "int64": torch.int64, "int32": torch.int32, "int8": torch.int8,
    "uint8": torch.uint8, "bool": torch.bool,
}
_NAMES = {v: k for k, v in DTYPES.items()}
_HEAD = struct.Struct(">II")
# A tensor's bytes are read with the methods of PyTorch's C base class, captured here:
# they cannot be replaced, unlike the Python class's (torch.Tensor.detach = ...), so
# a process that sends a tensor sends what it holds.
_TensorBase = torch._C.TensorBase
_detach, _to, _contiguous, _reshape, _view, _numel, _numpy = (
    _TensorBase.detach, _TensorBase.to, _TensorBase.contiguous, _TensorBase.reshape, _TensorBase.view,
    _TensorBase.numel, _TensorBase.numpy)


class WireError(Exception):
    """The other side broke the protocol (or went away)."""


class Ref(str):
    """The name of a function the receiving process provides itself
    (``andrea_ref.grading.watch.PROVIDED``): how a check hands the learner's function a
    function (the reference model, to the capstone's ``train``). Code never travels."""


# ----------------------------------------------------------------------------- values
def dtype_name(dtype) -> str | None:
    return _NAMES.get(dtype)


def encode(value, blobs: list[bytes]):
    """JSON-able form of ``value``; tensor bytes are appended to ``blobs``.

    Iterative (an explicit stack, never Python recursion): a value nested deeper than
    ``MAX_DEPTH`` or holding more than ``MAX_ITEMS`` values raises :class:`WireError`
    whatever the interpreter's recursion limit (which a learner's code may have set)."""
    root = [None]
    todo = [(value, root, 0, 0)]  # (value, container of its encoded form, index there, depth)
    count = 0
    while todo:
        v, into, at, depth = todo.pop()
        count += 1
        if depth > MAX_DEPTH or count > MAX_ITEMS:
            raise WireError("value too large or nested too deeply")
        if isinstance(v, Ref):
            into[at] = {"t": "ref", "v": str(v)[:200]}
        elif v is None or isinstance(v, (bool, str, int)):
            into[at] = v
        elif isinstance(v, float):
            into[at] = v if math.isfinite(v) else {"t": "float", "v": repr(v)}
        elif type(v) is torch.Tensor:
            into[at] = _encode_tensor(v, blobs)
        elif isinstance(v, (list, tuple)):
            items = [None] * len(v)
            into[at] = {"t": "tuple" if isinstance(v, tuple) else "list", "items": items}
            todo.extend((item, items, i, depth + 1) for i, item in reversed(list(enumerate(v))))
        elif isinstance(v, dict):
            if not all(isinstance(k, str) for k in v):
                raise WireError("only dicts with string keys are sent")
            pairs = [[k, None] for k in v]
            into[at] = {"t": "dict", "items": pairs}
            todo.extend((item, pairs[i], 1, depth + 1) for i, item in reversed(list(enumerate(v.values()))))
        else:
            raise WireError(f"values of type {type(v).__name__} are not sent")
    return root[0]


def _encode_tensor(value: torch.Tensor, blobs: list[bytes]) -> dict:
    name = dtype_name(value.dtype)
    if name is None:
        raise WireError(f"tensors of dtype {value.dtype} are not sent")
    t = _contiguous(_to(_detach(value), "cpu"))
    data = _numpy(_view(_reshape(t, (-1,)), torch.uint8)).tobytes() if _numel(t) else b""
    blobs.append(data)
    return {"t": "tensor", "dtype": name, "shape": list(t.shape), "blob": len(blobs) - 1}


def decode(data, blobs: list[bytes]):
    """The value :func:`encode` described; raises :class:`WireError` on anything odd.

    Iterative like :func:`encode`: the depth and size caps hold whatever the recursion
    limit."""
    root = [None]
    todo = [(data, root, 0, 0)]
    tuples = []  # (container, index, _Tuple), parents before their children
    count = 0
    while todo:
        d, into, at, depth = todo.pop()
        count += 1
        if depth > MAX_DEPTH or count > MAX_ITEMS:
            raise WireError("value too large or nested too deeply")
        if d is None or isinstance(d, bool):
            into[at] = d
        elif isinstance(d, int):
            if abs(d) > 1 << 63:
                raise WireError("integer out of range")
            into[at] = d
        elif isinstance(d, float):
            into[at] = d
        elif isinstance(d, str):
            if len(d) > MAX_STRING:
                raise WireError("string too long")
            into[at] = d
        elif not isinstance(d, dict):
            raise WireError(f"unexpected {type(d).__name__}")
        else:
            into[at] = node = _decode_node(d, blobs, todo, depth)
            if isinstance(node, _Tuple):
                tuples.append((into, at, node))
    for into, at, node in reversed(tuples):  # children are complete before their parents
        into[at] = tuple(node)
    return root[0]


class _Tuple(list):
    """A tuple being decoded: filled in place, made a tuple once complete."""


def _decode_node(d: dict, blobs: list[bytes], todo: list, depth: int):
    """One container, float or tensor of :func:`decode`; a container's items go on
    ``todo`` and are filled into it later."""
    kind = d.get("t")
    if kind == "float":
        text = d.get("v")
        if text not in ("inf", "-inf", "nan"):
            raise WireError("bad float")
        return float(text)
    if kind == "tensor":
        return _decode_tensor(d, blobs)
    if kind == "ref":
        name = d.get("v")
        if not isinstance(name, str) or len(name) > 200:
            raise WireError("bad function name")
        return Ref(name)
    items = d.get("items")
    if not isinstance(items, list) or len(items) > MAX_ITEMS:
        raise WireError("bad container")
    if kind in ("list", "tuple"):
        out = (_Tuple if kind == "tuple" else list)([None] * len(items))
        todo.extend((item, out, i, depth + 1) for i, item in reversed(list(enumerate(items))))
        return out
    if kind == "dict":
        out = {}
        for pair in items:
            if not (isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str)
                    and len(pair[0]) <= 200):
                raise WireError("bad dict item")
            out[pair[0]] = None
        if len(out) != len(items):
            raise WireError("a key twice in one dict")
        todo.extend((pair[1], out, pair[0], depth + 1) for pair in reversed(items))
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
    try:
        if values is not None:
            header = {**header, "values": encode(values, blobs)}
        header = {**header, "blobs": [len(b) for b in blobs]}
        head = json.dumps(header, separators=(",", ":")).encode()
    except RecursionError:  # the interpreter's limit, lowered below what the caps allow
        raise WireError("cannot be sent: the recursion limit is too low for this value") from None
    except (ValueError, TypeError) as exc:  # circular, not plain data
        raise WireError(f"header cannot be sent: {type(exc).__name__}") from None
    if json_depth(head) > MAX_JSON_DEPTH:
        raise WireError("header nested too deeply")
    payload = b"".join(blobs)
    if len(head) > MAX_HEADER or len(payload) > MAX_PAYLOAD:
        raise WireError("message too large to send")
    return _HEAD.pack(len(head), len(payload)) + head + payload


_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKETS = bytes(sorted(set(range(256)) - set(b"[]{}")))


def json_depth(text: bytes) -> int:
    """How deeply the arrays and objects of the JSON ``text`` nest (brackets inside
    strings do not count), found without recursion; stops counting past the cap."""
    depth = deepest = 0
    for char in _JSON_STRING.sub(b"", text).translate(None, _NOT_BRACKETS):
        depth += 1 if char in b"[{" else -1
        if depth > deepest:
            deepest = depth
            if deepest > MAX_JSON_DEPTH:
                break
    return deepest


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
    raw = _recv_exact(sock, hlen, deadline)
    if json_depth(raw) > MAX_JSON_DEPTH:  # before the (recursive) JSON parser sees it
        raise WireError("header nested too deeply")
    try:
        header = json.loads(raw)
    except (ValueError, RecursionError):
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
    try:
        return header, (decode(values, blobs) if values is not None else None)
    except RecursionError:  # the interpreter's limit, lowered below what the caps allow
        raise WireError("cannot be read: the recursion limit is too low for this value") from None
