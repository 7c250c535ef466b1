#!/usr/bin/env python3
"""make_seeds.py — (re)writes the seed corpora test/fuzz/corpus/<target>/seed_* from samples/.

Small files are copied; large ones are cut (one host function with its shapes, the first
arrays of a params file, __tvm_dev_mblob taken out of a model.so). Regression inputs
(corpus/<target>/regress_*) are kept as they are. Run from the repository root.
"""
import json, os, re, struct, subprocess, sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
S = os.path.join(ROOT, "samples")
C = os.path.join(ROOT, "test", "fuzz", "corpus")


def put(target, name, data):
    d = os.path.join(C, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, "seed_" + name), "wb") as f:
        f.write(data)


def read(*p):
    with open(os.path.join(S, *p), "rb") as f:
        return f.read()


def vm_exec_seed(raw):
    """A Relax VM executable (vm_exec.bin) with every tensor constant cut to one element."""
    def u64(o): return struct.unpack_from("<Q", raw, o)[0]
    def i32(o): return struct.unpack_from("<i", raw, o)[0]
    q = 16
    q += 8 + u64(q)  # version
    nf = u64(q); q += 8
    for _ in range(nf):  # kind, name, 4 x i64, param names
        q += 4; q += 8 + u64(q); q += 32
        m = u64(q); q += 8
        for _ in range(m):
            q += 8 + u64(q)
    head = raw[8:q]
    nc = u64(q); q += 8
    consts = bytearray(struct.pack("<Q", nc))
    for _ in range(nc):
        t = i32(q); q += 4
        consts += struct.pack("<i", t)
        if t == 0:  # NDArray: header, shape, nbytes, data
            hdr = raw[q:q + 32]; ndim = i32(q + 24); q += 32 + 8 * ndim
            q += 8 + struct.unpack_from("<q", raw, q)[0]
            consts += hdr + struct.pack("<%dq" % ndim, *([1] * ndim)) + struct.pack("<q", 4) + bytes(4)
        elif t == 1:
            consts += raw[q:q + 4]; q += 4
        elif t == 2:
            n = u64(q); consts += raw[q:q + 8 + 8 * n]; q += 8 + 8 * n
        elif t == 3:
            n = u64(q); consts += raw[q:q + 8 + n]; q += 8 + n
        else:
            consts += raw[q:q + 8]; q += 8
    payload = bytes(head) + bytes(consts) + raw[q:]
    return struct.pack("<Q", len(payload)) + payload


def clean():
    for t in os.listdir(C) if os.path.isdir(C) else []:
        for f in os.listdir(os.path.join(C, t)):
            if f.startswith("seed_"):
                os.remove(os.path.join(C, t, f))


def params_seed(raw, keep):
    """The first `keep` arrays of a params file whose data is small, as a new params file."""
    pos = 0
    def u64():
        nonlocal pos
        v = struct.unpack_from("<Q", raw, pos)[0]; pos += 8; return v
    magic, _, n = u64(), u64(), u64()
    names = []
    for _ in range(n):
        ln = u64(); names.append(raw[pos:pos + ln]); pos += ln
    n2 = u64()
    arrays = []
    for i in range(n2):
        start = pos
        pos += 8 + 8 + 4 + 4
        ndim = struct.unpack_from("<i", raw, pos)[0]; pos += 4 + 4 + 8 * ndim
        nbytes = struct.unpack_from("<q", raw, pos)[0]; pos += 8 + nbytes
        if nbytes <= 2048:
            arrays.append((names[i], raw[start:pos]))
        if len(arrays) == keep:
            break
    out = struct.pack("<QQQ", magic, 0, len(arrays))
    for nm, _ in arrays:
        out += struct.pack("<Q", len(nm)) + nm
    out += struct.pack("<Q", len(arrays))
    for _, a in arrays:
        out += a
    return out


def dev_mblob(so):
    """__tvm_dev_mblob's bytes (u64 length + payload) from a model.so, via readelf."""
    path = os.path.join(S, so)
    syms = subprocess.run(["readelf", "-Ws", path], capture_output=True, text=True).stdout
    for line in syms.splitlines():
        f = line.split()
        if len(f) >= 8 and f[-1] == "__tvm_dev_mblob":
            value, ndx = int(f[1], 16), int(f[6])
            break
    secs = subprocess.run(["readelf", "-WS", path], capture_output=True, text=True).stdout
    for line in secs.splitlines():
        m = re.match(r"\s*\[\s*(\d+)\]\s+(\S+)\s+\S+\s+([0-9a-f]+)\s+([0-9a-f]+)", line)
        if m and int(m.group(1)) == ndx:
            addr, off = int(m.group(3), 16), int(m.group(4), 16)
    raw = read(so)
    start = value - addr + off
    n = struct.unpack_from("<Q", raw, start)[0]
    return raw[start:start + 8 + n]


def host_seeds(model, count):
    """`count` fused functions of host.c, each with the preamble and a first line naming the
    function and its tensors (dtype[shape] from graph.json, inputs then outputs)."""
    g = json.loads(read(model, "graph.json"))
    src = read(model, "host.c").decode()
    shapes, dtypes = g["attrs"]["shape"][1], g["attrs"]["dltype"][1]
    rows = g["node_row_ptr"]
    first = src.find("#ifdef __cplusplus")
    preamble = src[:first]
    funcs = {}
    for m in re.finditer(r"TVM_DLL int32_t (\w+)\(", src):
        start = src.rfind("#ifdef __cplusplus", 0, m.start())
        depth, i = 0, src.index("{", m.end())
        while True:
            if src[i] == "{": depth += 1
            elif src[i] == "}":
                depth -= 1
                if depth == 0: break
            i += 1
        funcs.setdefault(m.group(1), src[start:i + 1] + "\n")
    n = 0
    for nid, node in enumerate(g["nodes"]):
        if node["op"] != "tvm_op":
            continue
        fn = node["attrs"]["func_name"]
        if fn not in funcs:
            continue
        eids = [rows[i[0]] + i[1] for i in node["inputs"]]
        eids += list(range(rows[nid], rows[nid + 1]))
        tensors = " ".join("%s[%s]" % (dtypes[e], ",".join(str(d) for d in shapes[e])) for e in eids)
        put("host", "%s_%s.c" % (model, fn[len("tvmgen_default_"):]),
            "// kdflow-fuzz: %s %s\n%s%s" % (fn, tensors, preamble, funcs.pop(fn)))
        n += 1
        if n == count:
            break


def main():
    clean()
    for m in ["mlp", "sort_scan", "attention"]:
        put("graph_json", m + ".json", read(m, "graph.json"))
        put("function_table", m + ".tvm_meta.json", read(m, "device.tvm_meta.json"))
        put("relay", m + ".txt", read(m, "relay.txt")[:16384])
    put("graph_json", "mlp_v08.json", read("mlp_v08", "graph.json"))
    put("function_table", "mlp_v08.tvm_meta.json", read("mlp_v08", "device.tvm_meta.json"))
    put("params", "sort_scan.bin", read("sort_scan", "params.bin"))
    put("params", "attention_cut.bin", params_seed(read("attention", "params.bin"), 4))
    for f in ["mlp/input_input0.npy", "mlp/output_0.npy", "sort_scan/output_0.npy", "sort_scan/output_1.npy"]:
        put("npy", f.replace("/", "_"), read(*f.split("/")))
    for m in ["sort_scan", "sort_scan_v08"]:
        put("device_blob", m + ".mblob", dev_mblob(m + "/model.so"))
        put("elf", m + ".so", read(m, "model.so"))
    ptx = read("mlp", "device.ptx").decode()
    put("ptx", "mlp.ptx", ptx)
    put("ptx", "mlp_v08.ptx", read("mlp_v08", "device.ptx"))
    cut = ptx.find(".visible .entry", ptx.find(".visible .entry") + 1)
    put("ptx", "mlp_first_entry.ptx", ptx[:cut] if cut > 0 else ptx)
    put("ptx", "mlp.cubin", read("mlp", "device.cubin"))
    # ffi_batch_mlp: the symbolic-shape keys (shape_expr, expr, grid_expr).
    for m in ["mlp", "sort_scan", "ffi_batch_mlp"]:
        with open(os.path.join(ROOT, "test", "golden", m + ".json"), "rb") as f:
            put("dataflow_json", m + ".json", f.read())
    host_seeds("mlp", 3)
    host_seeds("sort_scan", 4)
    host_seeds("attention", 3)
    for m in ["relax_mlp", "relax_mlp_compiled"]:
        put("vm_exec", m + "_cut.bin", vm_exec_seed(read(m, "vm_exec.bin")))


if __name__ == "__main__":
    sys.exit(main())
