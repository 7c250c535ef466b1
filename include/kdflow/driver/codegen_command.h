// codegen_command.h — `kdflow codegen` (lib/driver/codegen_command.cpp), and the replay set-up it
// shares with `kdflow replay` (lib/driver/replay_command.cpp).
#pragma once

#include <iosfwd>
#include <memory>
#include <optional>
#include <string>

#include "kdflow/formats/node_reference.h"
#include "kdflow/ir/dataflow.h"
#include "kdflow/replay/replay.h"
#include "kdflow/support/diag.h"

namespace kdflow {

/// What a replay runs, made from the command as replay makes it: the flow (extracted from DIR or
/// read from --flow), the options with every default file of DIR filled in (params, inputs,
/// session tokens, modules, references, each rank's params), and TVM's per-node results.
/// kdflow codegen generates its program from the same. Errors are one line, as replay's.
/// A folder of files made for one run (an exported model.so's modules and params), removed with it.
struct ScratchFolder {
  std::string path;
  ~ScratchFolder();
};

struct ReplaySetup {
  Dataflow flow;
  ReplayOptions options;
  std::optional<NodeReferences> node_refs;
  std::string label;
  /// DIR was an exported model.so: its pieces, as files the options name.
  std::shared_ptr<ScratchFolder> scratch;
};
Expected<ReplaySetup> setup_replay(const ReplayCommand& cmd, std::ostream& err);

/// `kdflow codegen`: the flow as a standalone C++17 program in `out` (docs/codegen.md).
struct CodegenCommand {
  ReplayCommand build;  ///< DIR, --flow, --params, --input, --expect, --module, the build's options, tolerances
  std::string out;      ///< -o OUT: a folder that does not exist, is empty, or was written by kdflow codegen
};
/// Exit codes: 0 written; 64 usage; 65 bad data; 66 missing input; 69 a step the program cannot
/// make; 73 cannot write OUT (or OUT holds files kdflow codegen did not write).
int run_codegen_command(const CodegenCommand& cmd, std::ostream& out, std::ostream& err);

}  // namespace kdflow
