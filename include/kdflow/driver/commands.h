// commands.h — the CLI's commands as library calls: each takes parsed options, writes
// results to files or stdout and diagnostics to `err`, and returns the process exit code.
// main() only parses the command line (tools/kdflow/main.cpp).
#pragma once

#include <iosfwd>
#include <string>

#include "kdflow/emit/emit.h"
#include "kdflow/frontend/extract.h"
#include "kdflow/support/progress.h"

namespace kdflow {

struct ExtractCommand {
  ExtractInputs inputs;
  std::string output = "-";  ///< file, or "-" for stdout
  std::string format;        ///< "json" | "dot" | "text" | "chakra"; empty: from the output's extension (stdout: json)
  bool quiet = false;        ///< no progress on stderr
  bool allow_oob = false;    ///< an argument proven out of bounds is a warning, not an error (exit 65)
  DotOptions dot;            ///< how DOT output is drawn (--cluster, --collapse, --op-colors, --no-buffers)
  std::string timing;        ///< chakra: kdflow replay --timing-json file for measured durations
  /// The device of the time predicted from code (analysis/time_model.h): chakra's durations where
  /// not measured (""; h100; "none": none), and JSON's predicted_us per kernel (only when given).
  std::string time_model;
  /// chakra: instead, the device whose roofline bound stands in for them (""; "none": no time)
  std::string roofline;
  bool stage_times = false;  ///< print each stage's wall time on stderr at the end (where the time goes)
};

int run_extract_command(const ExtractCommand& cmd, std::ostream& err);

/// Prints `e.message` as one line on `err` and returns its exit code.
int report(const Error& e, std::ostream& err);

/// Prints access_warnings(df) (dependencies.h), one line each, on `err`: what commands that
/// extract say about kernels of device.cu left unanalyzed.
void report_warnings(const Dataflow& df, std::ostream& err);

/// Says on `err` how many of a profile's launches matched the model's kernels (`always`:
/// also when some did; else only the warning when none did: another model's or TVM version's
/// profile joins nothing and must not pass silently). `command`: "show", "costs".
struct Profile;
struct ProfileJoin;
void report_profile_join(const Profile& p, const ProfileJoin& j, const char* command, bool always, std::ostream& err);


}  // namespace kdflow
