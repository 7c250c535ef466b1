// calibrate_command.cpp — `kdflow calibrate` (calibrate_command.h).
#include "kdflow/driver/calibrate_command.h"

#include <ostream>

#include "kdflow/driver/commands.h"
#include "kdflow/support/io.h"

namespace kdflow {

int run_calibrate_command(const CalibrateCommand& cmd, std::ostream& out, std::ostream& err) {
  Expected<Calibration> c = calibrate_gpu(cmd.options, cmd.quiet ? nullptr : &err);
  if (!c) return report(c.error(), err);
  const std::string json = gpu_profile_json(c->arch, c->measurements);
  if (cmd.output == "-") {
    out << json;
    return 0;
  }
  if (Status s = write_file_atomic(cmd.output, json); !s) return report(s.error(), err);
  if (!cmd.quiet) err << "calibrate: wrote " << cmd.output << " (kdflow costs DIR --device-profile " << cmd.output << ")\n";
  return 0;
}

}  // namespace kdflow
