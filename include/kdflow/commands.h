// commands.h — the CLI's commands as library calls: each takes parsed options, writes
// results to files or stdout and diagnostics to `err`, and returns the process exit code.
// main() only parses the command line (tools/kdflow/main.cpp).
#pragma once

#include <iosfwd>
#include <string>

#include "kdflow/extract.h"

namespace kdflow {

struct ExtractCommand {
  ExtractInputs inputs;
  std::string output = "-";  ///< file, or "-" for stdout
  std::string format;        ///< "json" | "dot" | "text"; empty: from the output's extension (stdout: json)
  bool quiet = false;        ///< no progress on stderr
};

int run_extract_command(const ExtractCommand& cmd, std::ostream& err);

/// Prints `e.message` as one line on `err` and returns its exit code.
int report(const Error& e, std::ostream& err);

}  // namespace kdflow
