// calibrate_command.h — `kdflow calibrate`: a GPU's constants for the time model, measured
// (replay/calibrate.h), written as a device profile JSON that `kdflow costs --device-profile` reads.
#pragma once

#include <iosfwd>
#include <string>

#include "kdflow/replay/calibrate.h"

namespace kdflow {

struct CalibrateCommand {
  CalibrateOptions options;
  std::string output = "-";  ///< the profile JSON: a file, or "-" for stdout
  bool quiet = false;        ///< no progress on stderr
};

/// Exit codes as docs/errors.md: 0; 64 usage; 69 no driver or GPU; 70 a driver call failed; 73/74 output.
int run_calibrate_command(const CalibrateCommand& cmd, std::ostream& out, std::ostream& err);

}  // namespace kdflow
