// cpu_unavailable.cpp — make_cpu_backend() while the CPU back end (lib/replay/cpu/) is not
// part of this build: `replay --backend cpu` answers one line, exit 69. The CPU back end's
// branch replaces this file with its own definition of make_cpu_backend().
#include "backend.h"

namespace kdflow::replay_backend {

Expected<std::unique_ptr<Backend>> make_cpu_backend(const BackendOptions& opt, std::ostream&) {
  return file_error(opt.label.empty() ? std::string("replay") : opt.label,
                    "the CPU back end is not built into this kdflow (--backend cpu); use --backend cuda",
                    ExitCode::Unavailable);
}

}  // namespace kdflow::replay_backend
