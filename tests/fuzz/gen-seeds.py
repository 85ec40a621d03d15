#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Writes the hand-made seed inputs of tests/fuzz/corpus/ (fuzz.h, the
targets' headers describe the formats). Inputs the fuzzers found are kept
beside them under other names; this script only (re)writes seed-*."""
import base64
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))


def write(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "seed-" + name), "wb") as f:
        f.write(data)


def call(method, params=None, **extra):
    m = {"method": method}
    if params is not None:
        m["parameters"] = params
    m.update(extra)
    return json.dumps(m, separators=(",", ":")).encode()


# frame: [limit][chunk] stream
ping = call("io.rdmamemd.Ping", {"data": "x"})
write("frame", "three-messages", bytes([0, 142]) + ping + b"\0" + ping + b"\0" + ping + b"\0")
write("frame", "byte-at-a-time", bytes([0, 0]) + ping + b"\0" + ping[:10])
write("frame", "over-limit", bytes([16, 7]) + b"0123456789\0" + b"x" * 40 + b"\0short\0")
write("frame", "at-limit", bytes([16, 3]) + b"y" * 16 + b"\0" + b"z" * 17)
write("frame", "empty-messages", bytes([4, 1]) + b"\0\0\0abcd\0\0")
write("frame", "no-terminator", bytes([200, 255]) + b"q" * 700)

# request: one message
reqs = {
    "ping": call("io.rdmamemd.Ping", {"data": "héllo"}),
    "oneway": call("io.rdmamemd.Ping", oneway=True),
    "more-and-oneway": call("io.rdmamemd.Ping", oneway=True, more=True),
    "register": call("io.rdmamemd.Register",
                     {"fd": 0, "offset": "4096", "length": "8192",
                      "access": ["local_write", "remote_read"], "devices": "all"}),
    "register-gpu": call("io.rdmamemd.Register",
                         {"memory": "cuda-ipc", "ipc_handle": "00" * 64, "gpu": 1}),
    "copy": call("io.rdmamemd.Copy",
                 {"from": {"region": "1", "offset": 5, "lease": "2"},
                  "to": {"region": "2"}, "length": "18446744073709551615",
                  "mode": "disjoint", "timeout_ms": -1}),
    "write": call("io.rdmamemd.Write", {"region": "1", "data": "aGVsbG8=", "lease": 3}),
    "cqp": call("io.rdmamemd.ConnectQueuePair",
                {"device": "fake0", "token": "0" * 32, "qpn": 4660, "psn": 1,
                 "gid": "fe80::1", "gid_index": 0, "readonly": False}),
    "share": call("io.rdmamemd.Share", {"region": "1", "uid": 65534, "readonly": True}),
    "duplicate-key": b'{"method":"io.rdmamemd.Ping","parameters":{"data":"a","data":"b"}}',
    "deep": b'{"method":"io.rdmamemd.Ping","parameters":{"data":' + b"[" * 40 + b"]" * 40 + b"}}",
    "bad-utf8": b'{"method":"io.rdmamemd.Ping","parameters":{"data":"\xed\xa0\x80"}}',
    "nul-escape": b'{"method":"io.rdmamemd.Ping","parameters":{"data":"a\\u0000"}}',
    "surrogates": b'{"method":"io.rdmamemd.Ping","parameters":{"data":"\\ud83d\\ude00\\udc00"}}',
    "huge-numbers": b'{"method":"io.rdmamemd.Read","parameters":{"region":1e999,"length":-0,'
                    b'"offset":9007199254740993,"timeout_ms":1.5}}',
    "not-a-call": b'["io.rdmamemd.Ping"]',
}
for name, text in reqs.items():
    write("request", name, text)

# daemon: [flags] records of [what][n_fds] message NUL
A, B = 0x00, 0x10
MEMFD, LARGE, GROWABLE, UNSEALED, PIPE, SOCKET, ZERO, DIRECTORY, WSEALED, RDONLY, EMPTY = range(11)


def rec(msg, who=A, kind=MEMFD, n_fds=0):
    return bytes([who | kind, n_fds]) + msg + b"\0"


def daemon(name, flags, *records):
    write("daemon", name, bytes([flags]) + b"".join(records))


R = call("io.rdmamemd.Register", {"fd": 0})
daemon("regions", 0x00,
       rec(R, n_fds=1),
       rec(call("io.rdmamemd.Write", {"region": "1", "offset": "10", "data": "aGVsbG8="})),
       rec(call("io.rdmamemd.Read", {"region": "1", "offset": "8", "length": "9"})),
       rec(R, n_fds=1),
       rec(call("io.rdmamemd.Copy", {"from": {"region": "1"}, "to": {"region": "2", "offset": "5"},
                                     "length": "1000"})),
       rec(call("io.rdmamemd.Copy", {"from": {"region": "1"}, "to": {"region": "1", "offset": "1"},
                                     "length": "60000"})),
       rec(call("io.rdmamemd.GetRegion", {"region": "1"})),
       rec(call("io.rdmamemd.ListRegions")),
       rec(call("io.rdmamemd.Share", {"region": "2", "uid": 1000})),
       rec(call("io.rdmamemd.Read", {"region": "2", "length": "4"}), who=B),
       rec(call("io.rdmamemd.Unregister", {"region": "1"})),
       rec(call("io.rdmamemd.GetStatus")))
daemon("pool-transfers", 0xb0,
       rec(call("io.rdmamemd.Register", {"fd": 0}), kind=LARGE, n_fds=1),
       rec(call("io.rdmamemd.Register", {"fd": 0}), kind=LARGE, n_fds=1),
       rec(call("io.rdmamemd.Copy", {"from": {"region": "1"}, "to": {"region": "2"},
                                     "length": "1048576"})),
       rec(call("io.rdmamemd.Read", {"region": "2", "offset": "1", "length": "300000"})),
       rec(call("io.rdmamemd.Write", {"region": "1", "data": "QUJD" * 30000})))
daemon("locks", 0x01,
       rec(R, n_fds=1),
       rec(call("io.rdmamemd.Share", {"region": "1", "uid": 0})),
       rec(call("io.rdmamemd.Lock", {"region": "1", "mode": "exclusive"})),
       rec(call("io.rdmamemd.Lock", {"region": "1", "mode": "shared", "timeout_ms": 0}), who=B),
       rec(call("io.rdmamemd.Lock", {"region": "1", "mode": "disjoint", "timeout_ms": 1}), who=B),
       rec(call("io.rdmamemd.Read", {"region": "1", "length": "4", "lease": "1"})),
       rec(call("io.rdmamemd.Write", {"region": "1", "data": "AAAA", "lease": "1"})),
       rec(call("io.rdmamemd.Unlock", {"lease": "1"})),
       rec(call("io.rdmamemd.Unlock", {"lease": "1"})))
daemon("lock-wait-at-shutdown", 0x04,
       rec(call("io.rdmamemd.Register", {"fd": 0}), kind=LARGE, n_fds=1),
       rec(call("io.rdmamemd.Lock", {"region": "1", "mode": "shared"})),
       rec(call("io.rdmamemd.Share", {"region": "1", "uid": 1000})),
       rec(call("io.rdmamemd.Write", {"region": "1", "data": "AAAA"}), who=B),
       rec(call("io.rdmamemd.Ping"), who=B))
daemon("rdma", 0x00,
       rec(call("io.rdmamemd.Register", {"fd": 0, "devices": "all"}), n_fds=1),
       rec(call("io.rdmamemd.RegisterOn", {"region": "1", "devices": ["fake0", "fake0", "nope"]})),
       rec(call("io.rdmamemd.ListDevices")),
       rec(call("io.rdmamemd.CreateAccessToken")),
       rec(call("io.rdmamemd.ListConnections")),
       rec(call("io.rdmamemd.RetryRegistration", {"region": "1", "device": "fake0"})))
daemon("rdma-failing", 0x08,
       rec(call("io.rdmamemd.Register", {"fd": 0, "devices": ["fake0"]}), kind=LARGE, n_fds=1),
       rec(call("io.rdmamemd.RegisterOn", {"region": "1", "devices": "all"})),
       rec(call("io.rdmamemd.RetryRegistration", {"region": "1", "device": "fake0"})),
       rec(call("io.rdmamemd.RegisterOn", {"region": "1", "devices": "all"})))
daemon("gpu", 0x00,
       rec(call("io.rdmamemd.Register", {"memory": "cuda-ipc", "ipc_handle": "00" * 64, "gpu": 0,
                                         "devices": "all"})),
       rec(call("io.rdmamemd.Register", {"memory": "cuda-ipc", "ipc_handle": "0001" * 32,
                                         "offset": "4096", "length": "4096"})),
       rec(call("io.rdmamemd.Register", {"fd": 0, "memory": "cuda-vmm", "size": "2097152"}),
           n_fds=1),
       rec(R, n_fds=1),
       rec(call("io.rdmamemd.Copy", {"from": {"region": "4"}, "to": {"region": "1"},
                                     "length": "4096"})),
       rec(call("io.rdmamemd.Copy", {"from": {"region": "1"}, "to": {"region": "3"},
                                     "length": "100000"})),
       rec(call("io.rdmamemd.Write", {"region": "2", "data": "AAAA"})),
       rec(call("io.rdmamemd.Read", {"region": "3", "length": "8"})),
       rec(call("io.rdmamemd.ListGpus", {"probe": True})),
       rec(call("io.rdmamemd.Register", {"memory": "cuda-ipc", "ipc_handle": "5a" * 64})))
daemon("bad-fds", 0x60,
       *[rec(R, kind=k, n_fds=1) for k in (GROWABLE, UNSEALED, PIPE, SOCKET, ZERO, DIRECTORY,
                                            WSEALED, RDONLY, EMPTY)],
       rec(call("io.rdmamemd.Write", {"region": "1", "data": "AAAA"})),
       rec(call("io.rdmamemd.Write", {"region": "2", "data": "AAAA"})),
       rec(call("io.rdmamemd.Ping"), n_fds=1),
       rec(R, n_fds=17),
       rec(call("io.rdmamemd.Register", {"fd": 2}), n_fds=3),
       rec(b"", n_fds=2))
daemon("fds-without-message", 0x12,
       rec(b"{\"method\":\"io.rdm", n_fds=2),
       rec(b"amemd.Ping\"}", n_fds=1),
       rec(call("io.rdmamemd.Ping"), who=B))
daemon("protocol-errors", 0x21,
       rec(b'{"method":"io.rdmamemd.Ping","parameters":{"data":"\xc3\x28"}}'),
       rec(b'{"method":' + b"[" * 33 + b"]" * 33 + b"}"),
       rec(b'{"method":"io.rdmamemd.Ping","method":"io.rdmamemd.Ping"}'),
       rec(b'{"method":"io.rdmamemd.Nope"}'),
       rec(b'{"method":"com.example.Nope","oneway":true}'),
       rec(b'{"method":"io.rdmamemd.Ping","upgrade":true}'),
       rec(b'{"method":"io.rdmamemd.Read","parameters":{"region":"99","length":"1"}}'),
       rec(b'{"method":"io.rdmamemd.Unlock","parameters":{"lease":"18446744073709551616"}}'),
       rec(b"garbage"))


# descriptor: [mode] then the text (mode 0) or the binary record (else);
# daemon/remote/descriptor.h has the record's layout.
def descriptor_record(endpoints, devices, access=3, export_id=7, length=1 << 20,
                      version=1):
    out = bytes([version, access, len(endpoints), len(devices)])
    out += export_id.to_bytes(8, "little") + length.to_bytes(8, "little")
    out += bytes(range(0xa0, 0xb0))
    for family, port, addr in endpoints:
        out += bytes([family, 0]) + port.to_bytes(2, "little") + addr.ljust(16, b"\0")
    for name, gid, addr, rkey, port in devices:
        out += gid + addr.to_bytes(8, "little") + rkey.to_bytes(4, "little")
        out += bytes([port, len(name)]) + name
    return out


def descriptor_text(record):
    return b"rdmamem1." + base64.urlsafe_b64encode(record).rstrip(b"=")


V4 = (4, 7471, bytes([10, 0, 2, 15]))
V6 = (6, 7471, bytes([0xfe, 0x80] + [0] * 13 + [1]))
RXE = (b"rxe0", bytes(range(16)), 0x7f0000001000, 0x1234, 1)
one = descriptor_record([V4], [RXE])
most = descriptor_record([V4, V6] * 4,
                         [(bytes([0x61 + i]) * 63, bytes(16), 0x1000 * i, i, 1)
                          for i in range(16)])


# Packed ranges (proto/ranges.h): little-endian u64 triples, base64.
def packed(*ranges):
    return base64.b64encode(b"".join(x.to_bytes(8, "little") for r in ranges for x in r)).decode()


ONE = packed((0, 4096, 16))
daemon("packed-ranges", 0x00,
       rec(call("io.rdmamemd.Register", {"fd": 0, "devices": "all"}), kind=LARGE, n_fds=1),
       rec(call("io.rdmamemd.ImportRemote", {"descriptor": descriptor_text(one).decode()})),
       rec(call("io.rdmamemd.PrepareTransfer", {"region": "1", "remote": "1", "packed": ONE})),
       rec(call("io.rdmamemd.PrepareTransfer",
                {"region": "1", "remote": "1",
                 "packed": packed(*[(i * 64, i * 32, 7) for i in range(300)])})),
       rec(call("io.rdmamemd.PrepareTransfer", {"region": "1", "remote": "1", "packed": ONE[:-4]})),
       rec(call("io.rdmamemd.PrepareTransfer", {"region": "1", "remote": "1", "packed": ONE + "AA=="})),
       rec(call("io.rdmamemd.PrepareTransfer",
                {"region": "1", "remote": "1", "packed": packed(((1 << 64) - 1, 0, 2))})),
       rec(call("io.rdmamemd.Transfer",
                {"batch": {"op": "write", "local": {"region": "1"}, "remote": {"id": "1"},
                           "packed": packed((0, 0, 8), (64, 64, 8), (1048575, 0, 1))}})),
       rec(call("io.rdmamemd.Transfer",
                {"batch": {"op": "read", "local": {"region": "1", "lease": "9"},
                           "remote": {"id": "1"}, "packed": ONE}, "notify": "aGk="})),
       rec(call("io.rdmamemd.Transfer",
                {"batch": {"op": "read", "local": {"region": "1"}, "remote": {"id": "1"},
                           "packed": ""}})),
       rec(call("io.rdmamemd.Transfer",
                {"batch": {"op": "write", "local": {"region": "1"}, "remote": {"id": "1"},
                           "packed": ONE}, "ops": []})),
       rec(call("io.rdmamemd.Transfer", {"plan": "2", "op": "write", "indices": ["299", "0"]})),
       rec(call("io.rdmamemd.ReleasePlan", {"plan": "1"})))
reqs_packed = {
    "prepare-packed": call("io.rdmamemd.PrepareTransfer",
                           {"region": "1", "remote": "2", "packed": ONE}),
    "transfer-batch": call("io.rdmamemd.Transfer",
                           {"batch": {"op": "write", "local": {"region": "1", "lease": "3"},
                                      "remote": {"id": "2"}, "packed": ONE},
                            "notify": "ZG9uZSEh"}),
}
for name, text in reqs_packed.items():
    write("request", name, text)

write("descriptor", "one-text", b"\0" + descriptor_text(one))
write("descriptor", "one-record", b"\1" + one)
write("descriptor", "largest-record", b"\1" + most)
write("descriptor", "v4-and-v6", b"\1" + descriptor_record([V4, V6], [RXE, (b"mlx5_0", bytes(16), 0, 1, 2)]))
write("descriptor", "trailing-byte", b"\1" + one + b"\0")
write("descriptor", "wrong-version", b"\1" + descriptor_record([V4], [RXE], version=2))
write("descriptor", "padded-text", b"\0" + descriptor_text(one) + b"==")
