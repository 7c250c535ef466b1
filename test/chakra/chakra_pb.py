"""chakra_pb.py — reads and writes Chakra execution traces (the subset of MLCommons Chakra's
et_def.proto that kdflow and ASTRA-sim use) without the protobuf package: a trace is a varint
length, then a GlobalMetadata, then a varint length and a Node, repeatedly. Attribute values
come back as Python values (int, float, bool, str, lists); `Node.attr` keeps their order."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any, Iterator

# AttributeProto's oneof (Chakra's field numbers): the scalar kinds this module reads.
_VARINT_FIELDS = {7: "int32_val", 9: "int64_val", 11: "uint32_val", 13: "uint64_val", 27: "bool_val"}
_LIST_FIELDS = {8: "int32_list", 10: "int64_list", 12: "uint32_list", 14: "uint64_list", 28: "bool_list"}

NODE_TYPES = {0: "INVALID_NODE", 1: "METADATA_NODE", 2: "MEM_LOAD_NODE", 3: "MEM_STORE_NODE", 4: "COMP_NODE",
              5: "COMM_SEND_NODE", 6: "COMM_RECV_NODE", 7: "COMM_COLL_NODE"}
NODE_TYPE_IDS = {v: k for k, v in NODE_TYPES.items()}
COMM_TYPES = {0: "ALL_REDUCE", 1: "REDUCE", 2: "ALL_GATHER", 3: "GATHER", 4: "SCATTER", 5: "BROADCAST",
              6: "ALL_TO_ALL", 7: "REDUCE_SCATTER", 8: "REDUCE_SCATTER_BLOCK", 9: "BARRIER"}


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        if pos >= len(buf):
            raise ValueError("truncated varint")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7


def _fields(buf: bytes) -> Iterator[tuple[int, int, Any]]:
    """(field number, wire type, value): ints for varints and fixed, bytes for length-delimited."""
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, pos = _varint(buf, pos)
        elif wt == 1:
            v = buf[pos:pos + 8]
            pos += 8
        elif wt == 2:
            n, pos = _varint(buf, pos)
            v = buf[pos:pos + n]
            pos += n
        elif wt == 5:
            v = buf[pos:pos + 4]
            pos += 4
        else:
            raise ValueError(f"wire type {wt}")
        yield num, wt, v


def _signed64(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


def _packed(v: bytes) -> list[int]:
    out, pos = [], 0
    while pos < len(v):
        x, pos = _varint(v, pos)
        out.append(x)
    return out


def _attr(buf: bytes) -> tuple[str, Any]:
    name, value = "", None
    for num, wt, v in _fields(buf):
        if num == 1:
            name = v.decode()
        elif num == 3:
            value = struct.unpack("<d", v)[0]
        elif num in _VARINT_FIELDS:
            value = bool(v) if num == 27 else _signed64(v) if num in (7, 9) else v
        elif num in _LIST_FIELDS:
            vals: list[Any] = []
            for n2, wt2, v2 in _fields(v):
                vals.extend(_packed(v2) if wt2 == 2 else [v2])
            value = [bool(x) for x in vals] if num == 28 else [_signed64(x) for x in vals] if num == 10 else vals
        elif num == 29:
            value = v.decode()
        elif num == 30:
            value = [v2.decode() for _, _, v2 in _fields(v)]
    return name, value


@dataclass
class Node:
    id: int = 0
    name: str = ""
    type: str = "COMP_NODE"
    ctrl_deps: list[int] = field(default_factory=list)
    data_deps: list[int] = field(default_factory=list)
    duration_micros: int = 0
    attr: dict[str, Any] = field(default_factory=dict)

    @property
    def deps(self) -> list[int]:
        return self.data_deps + self.ctrl_deps


@dataclass
class Trace:
    version: str = ""
    meta: dict[str, Any] = field(default_factory=dict)
    nodes: list[Node] = field(default_factory=list)


def _messages(data: bytes) -> Iterator[bytes]:
    pos = 0
    while pos < len(data):
        n, pos = _varint(data, pos)
        if pos + n > len(data):
            raise ValueError("truncated message")
        yield data[pos:pos + n]
        pos += n


def parse(data: bytes) -> Trace:
    msgs = _messages(data)
    t = Trace()
    for num, _, v in _fields(next(msgs)):
        if num == 1:
            t.version = v.decode()
        elif num == 2:
            k, val = _attr(v)
            t.meta[k] = val
    for m in msgs:
        n = Node()
        for num, wt, v in _fields(m):
            if num == 1:
                n.id = v
            elif num == 2:
                n.name = v.decode()
            elif num == 3:
                n.type = NODE_TYPES.get(v, str(v))
            elif num in (4, 5):
                vals = _packed(v) if wt == 2 else [v]
                (n.ctrl_deps if num == 4 else n.data_deps).extend(vals)
            elif num == 7:
                n.duration_micros = v
            elif num == 10:
                k, val = _attr(v)
                n.attr[k] = val
        t.nodes.append(n)
    return t


def read(path: str) -> Trace:
    with open(path, "rb") as f:
        return parse(f.read())


# ---- writing (for the test's own traces: a lone collective, a trace without its collectives)

def _enc_varint(v: int) -> bytes:
    v &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _key(num: int, wt: int) -> bytes:
    return _enc_varint(num << 3 | wt)


def _ld(num: int, payload: bytes) -> bytes:
    return _key(num, 2) + _enc_varint(len(payload)) + payload


def _enc_attr(name: str, value: Any) -> bytes:
    out = _ld(1, name.encode())
    if isinstance(value, bool):
        out += _key(27, 0) + _enc_varint(int(value))
    elif isinstance(value, int):
        out += _key(13, 0) + _enc_varint(value) if value >= 0 else _key(9, 0) + _enc_varint(value)
    elif isinstance(value, float):
        out += _key(3, 1) + struct.pack("<d", value)
    elif isinstance(value, str):
        out += _ld(29, value.encode())
    elif isinstance(value, list) and all(isinstance(x, bool) for x in value):
        out += _ld(28, _ld(1, b"".join(_enc_varint(int(x)) for x in value)))
    elif isinstance(value, list) and all(isinstance(x, str) for x in value):
        out += _ld(30, b"".join(_ld(1, x.encode()) for x in value))
    elif isinstance(value, list):
        out += _ld(10, _ld(1, b"".join(_enc_varint(x) for x in value)))
    else:
        raise TypeError(f"attribute {name}: {value!r}")
    return out


def _enc_node(n: Node) -> bytes:
    out = _key(1, 0) + _enc_varint(n.id) + _ld(2, n.name.encode()) + _key(3, 0) + _enc_varint(NODE_TYPE_IDS[n.type])
    if n.ctrl_deps:
        out += _ld(4, b"".join(_enc_varint(x) for x in n.ctrl_deps))
    if n.data_deps:
        out += _ld(5, b"".join(_enc_varint(x) for x in n.data_deps))
    if n.duration_micros:
        out += _key(7, 0) + _enc_varint(n.duration_micros)
    for k, v in n.attr.items():
        out += _ld(10, _enc_attr(k, v))
    return out


def serialize(t: Trace) -> bytes:
    meta = _ld(1, t.version.encode()) + b"".join(_ld(2, _enc_attr(k, v)) for k, v in t.meta.items())
    out = _enc_varint(len(meta)) + meta
    for n in t.nodes:
        b = _enc_node(n)
        out += _enc_varint(len(b)) + b
    return out


def write(path: str, t: Trace) -> None:
    with open(path, "wb") as f:
        f.write(serialize(t))
