// codegen.h — `kdflow codegen`: the flow as a standalone C++17 program a person can read, change
// and run without TVM or kdflow (docs/codegen.md). The input is what replay runs — the checked
// replay plan of every rank, the device modules, the references — and the output is a set of
// files (run.cpp, kdflow_support.h, CMakeLists.txt, README.md, data/): plain data, written by
// the caller. Deterministic: the same flow gives the same bytes.
#pragma once

#include <string>
#include <vector>

#include "kdflow/ir/dataflow.h"
#include "kdflow/replay/replay.h"
#include "kdflow/support/diag.h"

namespace kdflow::codegen {

struct ProgramInput {
  const Dataflow* flow = nullptr;
  /// One checked plan per rank (one for a flow of one rank), as make_plan made them.
  std::vector<ReplayPlan> plans;
  /// Each device module's alternative files (device.cubin before device.ptx), read as they are.
  std::vector<std::vector<std::string>> modules;
  /// Per graph output, TVM's reference (.npy) or "" (not compared).
  std::vector<std::string> expect;
  double rtol = 1e-3;
  double atol = 1e-5;
  /// What the program is of ("mlp", "llm (session prefill:7,decode:2)"), for its comments.
  std::string title;
  /// The kdflow command that made it, without directories and without -o (run.cpp's first lines).
  std::string command;
  /// The output folder's name (the README's command line adds -o NAME).
  std::string out_name;
};

struct GeneratedFile {
  std::string path;   ///< relative to the output folder ("run.cpp", "data/data.bin")
  std::string bytes;
};

/// The program's files. Errors (one line): a step the program cannot make (a collective replay
/// does not model, a library call without a CUDA implementation), a reference whose shape is not
/// the output's, an unreadable module.
Expected<std::vector<GeneratedFile>> generate_program(const ProgramInput& in);

/// The text of kdflow_support.h (lib/codegen/kdflow_support.h, embedded at build time).
const char* support_header();

}  // namespace kdflow::codegen
