// costs_command.h — `kdflow costs`: the work, roofline bound and measured time of every fused
// function (or kernel) of one or more models, as a table for people or a dataset (CSV, JSON
// Lines) for latency models. Computes with costs.h, renders with emit_costs.h; never exits.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace kdflow {

struct CostsCommand {
  std::vector<std::string> inputs;    ///< build folders, model.so files or kdflow JSON files
  std::string device = "h100";        ///< a DeviceSpec id (costs.h), or "none"
  std::string device_profile;         ///< a kdflow calibrate profile: the predictions' constants (time_model.h)
  std::vector<std::string> timings;   ///< replay --timing-json files, one per input in order
  std::vector<std::string> profiles;  ///< Nsight Compute / Systems CSVs, one per input in order
  bool per_kernel = false;            ///< one row per kernel instead of per function
  std::string output = "-";           ///< "-" (stdout) or a file
  std::string format;                 ///< table | csv | jsonl; empty: from the output's extension (stdout: table)
  bool quiet = false;
  std::string function;               ///< Relax builds: the VM function to run (--function; default main)
  std::string session;                ///< Relax LLM builds: --session prefill:N,decode:M
  int shards = 0;                     ///< Relax builds: --shards N (ranks of a tensor-parallel build)
};

/// Exit codes as docs/errors.md: 0, 64 usage, 65 bad input, 66 missing input, 73/74 output.
int run_costs_command(const CostsCommand& cmd, std::ostream& out, std::ostream& err);

}  // namespace kdflow
