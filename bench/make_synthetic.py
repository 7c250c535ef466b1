#!/usr/bin/env python3
"""make_synthetic.py SAMPLE_DIR OUT_DIR N — a synthetic model made of N renamed copies of a
real sample, for kdflow's scaling benchmark (bench/bench.py, docs/benchmarks.md).

Copy r of the graph is the sample's graph with every node renamed (inputs `<name>_r<r>`,
params `p<j + offset>`), every fused function and kernel renamed
(`tvmgen_default_` → `tvmgen_default_r<r>_`), storage ids shifted past the earlier copies;
the heads are all copies' heads. host.c, device.cu and device.tvm_meta.json carry the same
renamed copies of every function and kernel, so every file grows N-fold. The copies are
independent, so the result is a valid graph with N times the nodes, launches and source.
Writes graph.json, host.c, device.cu and device.tvm_meta.json (no params.bin, no relay.txt:
extract it with --no-params --no-relay).
"""
import json, os, re, sys

PREFIX = "tvmgen_default_"


def rename(text, r):
    return text.replace(PREFIX, "%sr%d_" % (PREFIX, r))


def graph(g, n):
    nodes, arg_nodes, heads, row_ptr = [], [], [], [0]
    shape, dltype, storage, devidx = [], [], [], []
    a = g["attrs"]
    n_nodes = len(g["nodes"])
    n_params = sum(1 for x in g["nodes"] if x["op"] == "null" and re.fullmatch(r"p\d+", x["name"]))
    max_sid = max(a["storage_id"][1]) + 1
    for r in range(n):
        base = r * n_nodes
        for node in g["nodes"]:
            c = json.loads(json.dumps(node))
            if c["op"] == "null":
                m = re.fullmatch(r"p(\d+)", c["name"])
                c["name"] = "p%d" % (int(m.group(1)) + r * n_params) if m else "%s_r%d" % (c["name"], r)
            else:
                c["name"] = rename(c["name"], r)
                c["attrs"]["func_name"] = rename(c["attrs"]["func_name"], r)
            c["inputs"] = [[i[0] + base] + i[1:] for i in c.get("inputs", [])]
            nodes.append(c)
        arg_nodes += [i + base for i in g["arg_nodes"]]
        heads += [[h[0] + base] + h[1:] for h in g["heads"]]
        off = row_ptr[-1]
        row_ptr += [p + off for p in g["node_row_ptr"][1:]]
        shape += a["shape"][1]
        dltype += a["dltype"][1]
        storage += [s + r * max_sid for s in a["storage_id"][1]]
        if "device_index" in a:
            devidx += a["device_index"][1]
    attrs = {"dltype": ["list_str", dltype], "storage_id": ["list_int", storage], "shape": ["list_shape", shape]}
    if "device_index" in a:
        attrs["device_index"] = ["list_int", devidx]
    return {"nodes": nodes, "arg_nodes": arg_nodes, "heads": heads, "attrs": attrs, "node_row_ptr": row_ptr}


def split_at(text, marker):
    i = text.index(marker)
    return text[:i], text[i:]


def host(src, n):
    pre, body = split_at(src, "#ifdef __cplusplus")
    lines = pre.splitlines(keepends=True)
    keep = [l for l in lines if PREFIX not in l]
    statics = [l for l in lines if PREFIX in l]
    out = "".join(keep)
    for r in range(n):
        out += "".join(rename(l, r) for l in statics)
    for r in range(n):
        out += rename(body, r)
    return out


def device(src, n):
    pre, body = split_at(src, 'extern "C" __global__')
    return pre + "".join(rename(body, r) for r in range(n))


def meta(m, n):
    out = dict(m)
    fi = {}
    for r in range(n):
        for k, v in m["func_info"].items():
            v = dict(v)
            v["name"] = rename(v.get("name", k), r)
            fi[rename(k, r)] = v
    out["func_info"] = fi
    return out


def main():
    sample, out_dir, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    os.makedirs(out_dir, exist_ok=True)
    rd = lambda f: open(os.path.join(sample, f)).read()
    with open(os.path.join(out_dir, "graph.json"), "w") as f:
        json.dump(graph(json.loads(rd("graph.json")), n), f, indent=1)
    with open(os.path.join(out_dir, "host.c"), "w") as f:
        f.write(host(rd("host.c"), n))
    with open(os.path.join(out_dir, "device.cu"), "w") as f:
        f.write(device(rd("device.cu"), n))
    with open(os.path.join(out_dir, "device.tvm_meta.json"), "w") as f:
        json.dump(meta(json.loads(rd("device.tvm_meta.json")), n), f, indent=1)


if __name__ == "__main__":
    main()
