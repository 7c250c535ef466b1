// show.cpp — `kdflow show`, `kdflow explain` and `show --profile` on the samples,
// through the binary: the real text, exit codes, plain output when piped, and the DOT
// options of `kdflow extract`.
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "test_util.h"

using namespace kdflow::test;

namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> v;
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);) v.push_back(l);
  return v;
}

/// The line starting with `prefix`, or "".
std::string line_starting(const std::string& s, const std::string& prefix) {
  for (const std::string& l : lines_of(s))
    if (l.compare(0, prefix.size(), prefix) == 0) return l;
  return "";
}

std::string fixture(const std::string& name) { return source_dir() + "/test/fixtures/" + name; }

}  // namespace

TEST_CASE("show mlp: 5 function nodes, 6 kernels, node 13 with two kernels and a workspace", "[show][cli]") {
  auto r = run_kdflow({"show", sample_dir("mlp")});
  REQUIRE(r.exit_code == 0);
  CHECK(r.err.empty());  // no progress when stderr is not a terminal
  CHECK(r.out.find('\x1b') == std::string::npos);  // piped: plain
  const std::string& o = r.out;
  CHECK(line_starting(o, "graph.json: ") ==
        "graph.json: 14 nodes, 5 function nodes, 6 kernels  (with host.c, device.tvm_meta.json, device.cu, relay.txt)");
  // The table: node 13's row carries its totals, then one row per kernel.
  const std::string n13 = line_starting(o, "n13 ");
  CHECK(contains(n13, "tvmgen_default_fused_nn_log_softmax"));
  CHECK(contains(n13, "nn.log_softmax"));
  CHECK(contains(n13, "1 (4 B)"));
  CHECK(contains(n13, "84 B     44 B"));
  const auto ls = lines_of(o);
  size_t at = 0;
  while (at < ls.size() && ls[at].compare(0, 4, "n13 ") != 0) ++at;
  REQUIRE(at + 2 < ls.size());
  CHECK(contains(ls[at + 1], "k4      ..._kernel    (1,1,1)     (32,1,1)     0"));
  CHECK(contains(ls[at + 2], "k5      ..._kernel_1  (1,1,1)     (32,1,1)     0"));
  CHECK(contains(line_starting(o, "n3 "), "nn.dense, add, nn.relu  k0      ..._kernel    (400,1,1)   (64,1,1)     0"));
  // The summary.
  CHECK(contains(o, "\n  function nodes              5\n"));
  CHECK(contains(o, "\n  kernels                     6\n"));
  CHECK(contains(o, "\n  nodes with several kernels  1: n13 (2 kernels)\n"));
  CHECK(contains(o, "\n  kernels in host loops       0\n"));
  CHECK(contains(o, "\n  buffers                     15: 14 graph entries in 13 storage ids, 1 workspace\n"));
  CHECK(contains(o, "\n  workspaces                  1: 4 B in all\n"));
  CHECK(contains(o, "\n  peak live memory            9.4 MiB (9,862,040 B) at k0 (n3): 10 storage ids live, 0 "
                    "workspaces live\n"));
  CHECK(contains(o, "\n    without params            11.7 KiB (12,000 B) at k1 (n6)\n"));
}

TEST_CASE("show: colour only when asked or on a terminal, NO_COLOR wins over auto", "[show][cli]") {
  auto always = run_kdflow({"show", sample_dir("mlp"), "--color", "always"});
  REQUIRE(always.exit_code == 0);
  CHECK(contains(always.out, "\x1b[35mn13\x1b[0m"));
  auto never = run_kdflow({"show", sample_dir("mlp"), "--color", "never"});
  CHECK(never.out.find('\x1b') == std::string::npos);
  auto plain = run_kdflow({"show", sample_dir("mlp")});
  CHECK(plain.out == never.out);
  // Under a pseudo-terminal (util-linux `script`), auto colours unless NO_COLOR is set.
  if (std::system("command -v script >/dev/null 2>&1") != 0) {
    WARN("script(1) not installed: terminal colour not checked");
    return;
  }
  const std::string dir = temp_dir();
  const std::string cmd = std::string("script -qec \"") + KDFLOW_BINARY + " show " + sample_dir("mlp") + " -q\" /dev/null";
  CHECK(std::system((cmd + " >'" + dir + "/tty.txt' 2>&1").c_str()) == 0);
  CHECK(contains(slurp(dir + "/tty.txt"), "\x1b[35mn13"));
  CHECK(std::system(("NO_COLOR= " + cmd + " >'" + dir + "/nocolor.txt' 2>&1").c_str()) == 0);
  CHECK(slurp(dir + "/nocolor.txt").find('\x1b') == std::string::npos);
}

TEST_CASE("show: the same from a directory and from its extracted JSON, every sample", "[show][cli]") {
  const std::string dir = temp_dir();
  for (const std::string& m : sample_names()) {
    INFO(m);
    auto a = run_kdflow({"show", sample_dir(m)});
    REQUIRE(a.exit_code == 0);
    auto b = run_kdflow({"show", source_dir() + "/test/golden/" + m + ".json"});
    REQUIRE(b.exit_code == 0);
    CHECK(a.out == b.out);
    CHECK(a.out == run_kdflow({"show", sample_dir(m)}).out);  // deterministic
  }
  auto sort = run_kdflow({"show", sample_dir("sort_scan")});
  CHECK(contains(sort.out, "\n  kernels in host loops       26\n"));
  CHECK(contains(sort.out, "\n  nodes with several kernels  3: n1 (8 kernels), n3 (6 kernels), n4 (23 kernels)\n"));
}

TEST_CASE("show and explain: missing input and bad options", "[show][cli]") {
  auto missing = run_kdflow({"show", source_dir() + "/no/such/dir"});
  CHECK(missing.exit_code == 66);
  CHECK(lines_of(missing.err).size() == 1);
  auto bad = run_kdflow({"show", sample_dir("mlp"), "--color", "sometimes"});
  CHECK(bad.exit_code == 64);
  auto no_what = run_kdflow({"explain", sample_dir("mlp")});
  CHECK(no_what.exit_code == 64);
}

TEST_CASE("explain k5: ws0 is read, produced by k4", "[explain][cli]") {
  auto r = run_kdflow({"explain", sample_dir("mlp"), "k5"});
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find('\x1b') == std::string::npos);
  const std::string& o = r.out;
  CHECK(contains(o, "kernel k5  tvmgen_default_fused_nn_log_softmax_kernel_1\n"));
  CHECK(contains(o, "  graph node    n13 tvmgen_default_fused_nn_log_softmax  (kernel 2 of 2: k4, k5)\n"));
  CHECK(contains(o, "  relay ops     nn.log_softmax  Tensor[(1, 10), float32]\n                (exact: from relay.txt)\n"));
  CHECK(contains(o, "  launched at   host.c:402:7\n"));
  CHECK(contains(o, "  launch        grid (1,1,1)  block (32,1,1)  dynamic shared memory 0 B\n"));
  CHECK(contains(o,
                 "    #0 T_softmax_maxelem (float *__restrict)  handle  read\n"
                 "         buffer 14 tvmgen_default_fused_nn_log_softmax.ws0  workspace  ws0 of n13  float32 [1]  4 B  "
                 "offset 0\n"
                 "         footprint  reads bytes [0, 4) of the buffer (4 distinct), 1 element; proven in bounds\n"
                 "         producers  k4 tvmgen_default_fused_nn_log_softmax_kernel (n13)\n"));
  CHECK(contains(o,
                 "    #1 compute (float *__restrict)  handle  write\n"
                 "         buffer 13 tvmgen_default_fused_nn_log_softmax  output  sid 12  float32 [1, 10]  40 B  offset 0\n"
                 "         footprint  writes bytes [0, 40) of the buffer (40 distinct), 10 elements; proven in bounds\n"
                 "         consumers  a model output\n"));
  CHECK(contains(o, "producers  k3 tvmgen_default_fused_nn_dense_add_kernel (n12)\n"));
  // The same kernel by name.
  auto byname = run_kdflow({"explain", sample_dir("mlp"), "tvmgen_default_fused_nn_log_softmax_kernel_1"});
  CHECK(byname.out == r.out);
}

TEST_CASE("explain n13: log_softmax's two kernels and the workspace between them", "[explain][cli]") {
  auto r = run_kdflow({"explain", sample_dir("mlp"), "n13"});
  REQUIRE(r.exit_code == 0);
  const std::string& o = r.out;
  CHECK(o.compare(0, 46, "node n13  tvmgen_default_fused_nn_log_softmax\n") == 0);
  CHECK(contains(o, "  workspaces    ws0  buffer 14 tvmgen_default_fused_nn_log_softmax.ws0  workspace  ws0 of n13  "
                    "float32 [1]  4 B  allocated at host.c:363:29\n"
                    "                written by k4; read by k5\n"));
  CHECK(contains(o, "  kernels       k4 tvmgen_default_fused_nn_log_softmax_kernel (n13), k5 "
                    "tvmgen_default_fused_nn_log_softmax_kernel_1 (n13)\n"));
  CHECK(contains(o, "  reads         buffer 12 tvmgen_default_fused_nn_dense_add  intermediate  sid 11  float32 [1, 10]  "
                    "40 B  from n12 tvmgen_default_fused_nn_dense_add\n"));
  CHECK(contains(o, "\n  kernel k4  tvmgen_default_fused_nn_log_softmax_kernel\n"));
  CHECK(contains(o, "\n  kernel k5  tvmgen_default_fused_nn_log_softmax_kernel_1\n"));
  // By function name, too.
  CHECK(run_kdflow({"explain", sample_dir("mlp"), "tvmgen_default_fused_nn_log_softmax"}).out == o);
}

TEST_CASE("explain: a kernel launched several times lists each launch, params and inputs", "[explain][cli]") {
  auto r = run_kdflow({"explain", sample_dir("sort_scan"), "tvmgen_default_fused_topk_kernel_2"});
  REQUIRE(r.exit_code == 0);
  CHECK(contains(r.out, "tvmgen_default_fused_topk_kernel_2 is launched 3 times\n"));
  CHECK(contains(r.out, "kernel k2  "));
  CHECK(contains(r.out, "kernel k3  "));
  CHECK(contains(r.out, "kernel k4  "));
  CHECK(contains(r.out, "  host loops    [2] (iteration index of each enclosing loop, outermost first)\n"));

  auto p = run_kdflow({"explain", sample_dir("mlp"), "n1"});
  REQUIRE(p.exit_code == 0);
  CHECK(contains(p.out, "  op            null (a param: a bound weight)\n"));
  CHECK(contains(p.out, "  read by       k0 tvmgen_default_fused_nn_dense_add_nn_relu_kernel (n3)\n"));
  auto k1 = run_kdflow({"explain", sample_dir("mlp"), "k1"});
  CHECK(contains(k1.out, "producers  none: a param (bound weight)\n"));
  CHECK(contains(k1.out, "  runs before   k2 (war, sid 3)\n"));
}

TEST_CASE("explain: an unknown selector is one line naming the ways to select, exit 64", "[explain][cli]") {
  for (const char* bad : {"k6", "n14", "bogus", "k", "5"}) {
    INFO(bad);
    auto r = run_kdflow({"explain", sample_dir("mlp"), bad});
    CHECK(r.exit_code == 64);
    CHECK(r.out.empty());
    CHECK(r.err == std::string("kdflow explain: error: no kernel or node '") + bad +
                       "': name a kernel as k<ID> (k0..k5) or by its name, a node as n<ID> (n0..n13), by its graph "
                       "name or by its function\n");
  }
}

TEST_CASE("show --profile: the forum's ncu export joined to mlp_v08", "[show][profile][cli]") {
  auto r = run_kdflow({"show", sample_dir("mlp_v08"), "--profile", fixture("ncu_forum_export.csv")});
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find('\x1b') == std::string::npos);
  const std::string& o = r.out;
  CHECK(contains(o, "ncu_forum_export.csv: Nsight Compute export, 6 rows, 6 kernel launches\n"));
  CHECK(contains(o, "joined to graph.json: 6 of 6 launches are graph kernels; 6 of 6 graph kernels profiled\n"));
  CHECK(contains(o, "4 of 6 profiled launches differ from the graph's launch configuration\n"));
  // Every CSV row (lines 2..7) labelled with its graph kernel and node.
  const char* expect[] = {
      "   2   0  tvmgen_default_fused_nn_dense_add_nn_relu_kernel0    k0     n3    tvmgen_default_fused_nn_dense_add_nn_relu    nn.dense, add, nn.relu  (400,1,1)   (20,1,1)   block (20,1,1) here, (64,1,1) in the graph",
      "   3   1  tvmgen_default_fused_nn_dense_add_nn_relu_1_kernel0  k1     n6    tvmgen_default_fused_nn_dense_add_nn_relu_1  nn.dense, add, nn.relu  (1000,1,1)  (20,1,1)   block (20,1,1) here, (64,1,1) in the graph",
      "   4   2  tvmgen_default_fused_nn_dense_add_nn_relu_2_kernel0  k2     n9    tvmgen_default_fused_nn_dense_add_nn_relu_2  nn.dense, add, nn.relu  (2000,1,1)  (50,1,1)   block (50,1,1) here, (64,1,1) in the graph",
      "   5   3  tvmgen_default_fused_nn_dense_add_kernel0            k3     n12   tvmgen_default_fused_nn_dense_add            nn.dense, add           (10,1,1)    (250,1,1)  block (250,1,1) here, (64,1,1) in the graph",
      "   6   4  tvmgen_default_fused_nn_log_softmax_kernel0          k4     n13   tvmgen_default_fused_nn_log_softmax          nn.log_softmax          (1,1,1)     (32,1,1)   ok",
      "   7   5  tvmgen_default_fused_nn_log_softmax_kernel1          k5     n13   tvmgen_default_fused_nn_log_softmax          nn.log_softmax          (1,1,1)     (32,1,1)   ok",
  };
  for (const char* e : expect) CHECK(contains(o, std::string("\n") + e + "\n"));
  CHECK(contains(o, "graph kernels missing from the CSV: none\n"));
  CHECK(contains(o, "CSV kernels the graph does not know: none\n"));
}

// Real output: `ncu --csv --metrics gpu__time_duration.sum kdflow replay samples/ffi_mlp_compiled
// --warmup 0 --repeat 1 > out.csv` on an H200 (driver 580.159.04, 2026-11-25, scripts/gpu-check.sh):
// ncu's ==PROF== lines and replay's own report come before the CSV in the same stream.
TEST_CASE("show --profile: an ncu export mixed with the program's output, from an H200", "[show][profile][cli]") {
  auto r = run_kdflow({"show", source_dir() + "/test/golden/ffi_mlp_compiled.json", "--profile",
                       fixture("ncu_h200_ffi_mlp_compiled.csv"), "--color", "never"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const std::string& o = r.out;
  CHECK(contains(o, "ncu_h200_ffi_mlp_compiled.csv: Nsight Compute export, 10 rows, 10 kernel launches\n"));
  CHECK(contains(o, "10 of 10 launches are graph kernels; 5 of 5 graph kernels profiled (2 runs)\n"));
  CHECK(contains(o, "\n  18   0  fused_matmul_add_relu_kernel       0  k0     n9    fused_matmul_add_relu"));
  CHECK(contains(o, "graph kernels missing from the CSV: none\n"));
  CHECK(contains(o, "CSV kernels the graph does not know: none\n"));
  // The durations are ncu's raw metric (gpu__time_duration.sum, as gpu-check.sh asks): the
  // median of the two launches of each kernel, in µs.
  auto c = run_kdflow({"costs", source_dir() + "/test/golden/ffi_mlp_compiled.json", "--profile",
                       fixture("ncu_h200_ffi_mlp_compiled.csv")});
  INFO(c.err);
  REQUIRE(c.exit_code == 0);
  CHECK(contains(c.out, "sum measured 38.1 us (5 of 5 functions timed)"));
}

TEST_CASE("show --profile: another TVM's names, missing kernels, bad CSVs", "[show][profile][cli]") {
  auto r = run_kdflow({"show", sample_dir("mlp"), "--profile", fixture("ncu_forum_export.csv")});
  REQUIRE(r.exit_code == 0);
  // The forum's export came from TVM 0.8 (`_kernel0`): every row still joins this TVM 0.14
  // build's kernels, each labelled with its graph node, the other name reported.
  CHECK(contains(r.out, "joined to graph.json: 6 of 6 launches are graph kernels; 6 of 6 graph kernels profiled\n"));
  CHECK(contains(r.out, "graph kernels missing from the CSV: none\n"));
  CHECK(contains(r.out, "name tvmgen_default_fused_nn_log_softmax_kernel1 here, tvmgen_default_fused_nn_log_softmax_kernel_1 "
                        "in the graph"));
  for (const char* node : {" n3 ", " n6 ", " n9 ", " n12 ", " n13 "}) CHECK(contains(r.out, node));

  const std::string dir = temp_dir();
  std::ofstream(dir + "/bad.csv") << "ID,Kernel Name,Block Size\r\n0,k,\"(1, 2)\"\r\n";
  auto bad = run_kdflow({"show", sample_dir("mlp"), "--profile", dir + "/bad.csv"});
  CHECK(bad.exit_code == 65);
  CHECK(bad.err == dir + "/bad.csv:2:5: error: 'Block Size' is not \"(x, y, z)\": \"(1, 2)\"\n");
  std::ofstream(dir + "/open.csv") << "ID,Kernel Name\n0,\"k\n";
  auto open = run_kdflow({"show", sample_dir("mlp"), "--profile", dir + "/open.csv"});
  CHECK(open.exit_code == 65);
  CHECK(open.err == dir + "/open.csv:2:3: error: unterminated quoted field (the quote opened here never closes)\n");
  auto none = run_kdflow({"show", sample_dir("mlp"), "--profile", dir + "/none.csv"});
  CHECK(none.exit_code == 66);
}

TEST_CASE("extract's DOT options: defaults unchanged, variants render, DOT only", "[dot][cli]") {
  const std::string dir = temp_dir();
  auto plain = run_kdflow({"extract", sample_dir("mlp"), "--format", "dot"});
  REQUIRE(plain.exit_code == 0);
  CHECK(plain.out == slurp(source_dir() + "/test/golden/mlp.dot"));
  auto same = run_kdflow({"extract", sample_dir("mlp"), "--format", "dot", "--cluster", "node"});
  CHECK(same.out == plain.out);
  const bool have_dot = std::system("command -v dot >/dev/null 2>&1") == 0;
  if (!have_dot) WARN("Graphviz dot not installed: rendering skipped");
  for (const std::vector<std::string>& flags :
       std::vector<std::vector<std::string>>{{"--collapse"}, {"--collapse", "--op-colors"}, {"--no-buffers"},
                                             {"--cluster", "none", "--op-colors"}, {"--collapse", "--no-buffers"}}) {
    std::vector<std::string> args{"extract", sample_dir("resnet18"), "-q", "-o", dir + "/r.dot"};
    args.insert(args.end(), flags.begin(), flags.end());
    auto r = run_kdflow(args);
    REQUIRE(r.exit_code == 0);
    const std::string text = slurp(dir + "/r.dot");
    CHECK(text != slurp(source_dir() + "/test/golden/resnet18.dot"));
    if (!have_dot) continue;
    CHECK(std::system(("dot -Tsvg '" + dir + "/r.dot' -o '" + dir + "/r.svg' 2>'" + dir + "/err'").c_str()) == 0);
    CHECK(slurp(dir + "/err").empty());
  }
  auto json = run_kdflow({"extract", sample_dir("mlp"), "--collapse"});
  CHECK(json.exit_code == 64);
  CHECK(json.err ==
        "kdflow extract: error: --cluster, --collapse, --op-colors and --no-buffers apply to DOT output only "
        "(--format dot, or -o FILE.dot)\n");
  auto badc = run_kdflow({"extract", sample_dir("mlp"), "--format", "dot", "--cluster", "graph"});
  CHECK(badc.exit_code == 64);
}

// docs/tutorial.md is generated by scripts/render-docs.sh from docs/tutorial.md.in; this
// fails when a command's output changed and the docs were not regenerated.
TEST_CASE("docs/tutorial.md holds the current output of every command of its template", "[show][docs]") {
  const std::string tmpl = slurp(source_dir() + "/docs/tutorial.md.in");
  const std::string doc = slurp(source_dir() + "/docs/tutorial.md");
  const std::string open = "<!-- run: kdflow ", close = " -->";
  size_t commands = 0;
  for (const std::string& l : lines_of(tmpl)) {
    if (l.compare(0, open.size(), open) != 0 || l.size() < open.size() + close.size()) continue;
    const std::string cmdline = l.substr(open.size(), l.size() - open.size() - close.size());
    std::vector<std::string> args;
    std::istringstream in(cmdline);
    for (std::string a; in >> a;)  // paths in the template are relative to the repository root
      args.push_back(a.compare(0, 8, "samples/") == 0 || a.compare(0, 5, "test/") == 0 ? source_dir() + "/" + a : a);
    INFO(cmdline);
    auto r = run_kdflow(args);
    REQUIRE(r.exit_code == 0);
    CHECK(contains(doc, "```text\n$ kdflow " + cmdline + "\n" + r.out + "```\n"));
    ++commands;
  }
  CHECK(commands == 8);
}
