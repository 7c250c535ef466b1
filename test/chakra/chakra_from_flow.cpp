// chakra_from_flow.cpp — a test helper: a kdflow/1 JSON flow (with its ranks) written as Chakra
// traces the way `kdflow extract --format chakra` writes a build's, for flows no build gives yet
// (sharded ones). Usage: kdflow_chakra_from_flow FLOW.json OUT.et [TIMING.json] — TIMING is a
// `kdflow replay --timing-json` file; the roofline device is h100, as extract's default.
#include <cstdio>
#include <string>

#include "kdflow/analysis/costs.h"
#include "kdflow/emit/emit_chakra.h"
#include "kdflow/ir/dataflow_json.h"
#include "kdflow/support/io.h"

int main(int argc, char** argv) {
  using namespace kdflow;
  if (argc != 3 && argc != 4) {
    std::fprintf(stderr, "usage: %s FLOW.json OUT.et [TIMING.json]\n", argv[0]);
    return 64;
  }
  auto fail = [](const Error& e) {
    std::fprintf(stderr, "%s\n", e.message.c_str());
    return static_cast<int>(e.code);
  };
  Expected<std::string> text = read_file(argv[1]);
  if (!text) return fail(text.error());
  Expected<Dataflow> df = parse_dataflow_json(*text, argv[1]);
  if (!df) return fail(df.error());
  std::optional<KernelTimes> times;
  if (argc == 4) {
    Expected<std::string> t = read_file(argv[3]);
    if (!t) return fail(t.error());
    Expected<KernelTimes> kt = read_replay_timing(*t, argv[3], *df);
    if (!kt) return fail(kt.error());
    times = kt.take();
  }
  const CostReport costs = compute_costs(*df, find_device_spec("h100"), times ? &*times : nullptr);
  Expected<std::vector<std::string>> traces = emit_chakra(*df, costs, base_name(argv[1]));
  if (!traces) return fail(traces.error());
  const int ranks = static_cast<int>(traces->size());
  for (int r = 0; r < ranks; ++r)
    if (Status s = write_file_atomic(chakra_rank_path(argv[2], r, ranks), (*traces)[static_cast<size_t>(r)]); !s)
      return fail(s.error());
  return 0;
}
