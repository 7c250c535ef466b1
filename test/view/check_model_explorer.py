#!/usr/bin/env python3
"""check_model_explorer.py KDFLOW SAMPLES — each sample's `kdflow view --format model-explorer`
JSON read by Model Explorer's own code: its built-in JSON reader (utils.convert_builtin_resp,
the shape its web app's JSON adapter takes), every graph and node rebuilt as its dataclasses
(graph_builder: an unknown or missing field raises), added to a ModelExplorerConfig and
serialised as its server sends them to the page. Checks one node per launch, library call, input and output;
edges between existing nodes; namespaces by graph node; the per-node data (grid, FLOPs, bytes)."""
import dataclasses
import json
import os
import subprocess
import sys
import tempfile

import model_explorer
from model_explorer import graph_builder as gb
from model_explorer import utils


def node_of(d):
    d = dict(d)
    d["attrs"] = [gb.KeyValue(**a) for a in d.get("attrs", [])]
    d["incomingEdges"] = [gb.IncomingEdge(**e) for e in d.get("incomingEdges", [])]
    d["outputsMetadata"] = [gb.MetadataItem(id=m["id"], attrs=[gb.KeyValue(**a) for a in m.get("attrs", [])])
                            for m in d.get("outputsMetadata", [])]
    return gb.GraphNode(**d)


def main():
    kdflow, samples = sys.argv[1], sys.argv[2]
    status = 0
    tmp = tempfile.mkdtemp(prefix="kdflow-me-")
    for name in ("mlp", "mlp_cublas", "resnet18_tuned", "relax_mlp", "attention"):
        src = os.path.join(samples, name)
        out = os.path.join(tmp, name + ".json")
        flow = os.path.join(tmp, name + ".flow.json")
        subprocess.run([kdflow, "view", src, "-q", "-o", out], check=True)
        subprocess.run([kdflow, "extract", src, "-q", "-o", flow], check=True)
        f = json.load(open(flow))
        text = open(out).read()
        collections = utils.convert_builtin_resp(text)
        problems = []
        graphs = []
        for c in collections:
            for g in c.graphs:
                nodes = [node_of(n) for n in g["nodes"]]
                graphs.append(gb.Graph(id=g["id"], nodes=nodes))
        cfg = model_explorer.config()
        cfg.graphs_list.append({"graphs": graphs})  # as add_model_from_pytorch adds an adapter's graphs
        back = json.loads(json.loads(cfg.get_transferrable_data()["graphs_list"])[0])
        nodes = back["graphs"][0]["nodes"]
        ids = {n["id"] for n in nodes}
        want = len(f["kernels"]) + len(f.get("library_calls", [])) + len(f["inputs"]) + len(f["outputs"])
        if len(nodes) != want:
            problems.append(f"{len(nodes)} nodes, expected {want}")
        for n in nodes:
            for e in n["incomingEdges"]:
                if e["sourceNodeId"] not in ids:
                    problems.append(f"{n['id']}: edge from unknown {e['sourceNodeId']}")
        for k in f["kernels"]:
            n = next((x for x in nodes if x["id"] == "k%d" % k["id"]), None)
            if n is None:
                problems.append(f"k{k['id']} missing")
                continue
            node = f["nodes"][k["graph_node"]]
            if not n["namespace"].endswith(node["name"]):
                problems.append(f"k{k['id']}: namespace {n['namespace']!r} does not fold by node {node['name']}")
            attrs = {a["key"]: a["value"] for a in n["attrs"]}
            grid = "x".join(str(x) for x in k["grid"])
            if attrs.get("grid") != grid or "bytes" not in attrs:
                problems.append(f"k{k['id']}: attrs {attrs}")
        if sum(len(n["incomingEdges"]) for n in nodes) == 0:
            problems.append("no edges")
        if problems:
            status = 1
            for p in problems[:20]:
                print(f"check_model_explorer: {name}: FAIL: {p}")
        else:
            print(f"check_model_explorer: {name}: ok ({len(nodes)} nodes, "
                  f"{sum(len(n['incomingEdges']) for n in nodes)} edges)")
    return status


if __name__ == "__main__":
    sys.exit(main())
