// bounds.h — the bounds verdict over the IR (issue 12): every kernel argument's static
// footprint (Arg::footprint), shifted by the argument's offset, must lie inside its buffer.
// Pure functions of the Dataflow; extract, show, explain and replay all use these.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kdflow/ir/dataflow.h"
#include "kdflow/support/diag.h"

namespace kdflow {

enum class BoundsVerdict {
  None,        ///< not a kernel's pointer argument, or no footprint computed (no device.cu)
  Proven,      ///< every byte it may touch lies in its buffer
  Unknown,     ///< footprint unknown, or a superset that leaves the buffer
  OutOfBounds  ///< an exact footprint leaves the buffer
};
const char* to_string(BoundsVerdict v);  ///< "none" | "proven" | "unknown" | "out-of-bounds"

/// The verdict for argument `arg` of kernel `k`; `why` (optional) gets the reason of an
/// unknown or the one-line description of an out-of-bounds argument.
BoundsVerdict bounds_verdict(const Dataflow& df, const Kernel& k, size_t arg, std::string* why = nullptr);

struct BoundsSummary {
  int proven = 0, unknown = 0, out_of_bounds = 0;
  std::map<std::string, int> unknown_reasons;  ///< reason → arguments
  std::vector<std::string> violations;         ///< one line per out-of-bounds argument, in launch order
};
BoundsSummary summarize_bounds(const Dataflow& df);

/// "N proven in bounds, M unknown, K out of bounds" (+ the unknown reasons grouped).
std::string bounds_summary_line(const BoundsSummary& s);

/// Error (ExitCode::DataError) naming the first argument of kernel `k` proven out of bounds
/// ("out of bounds: kernel ... argument ... reads bytes [a, b) of buffer ..."; callers add
/// where: the file, a JSON pointer).
Status check_launch_bounds(const Dataflow& df, const Kernel& k);
/// The same for every launch.
Status check_launch_bounds(const Dataflow& df);

/// Where the footprint is exact: the bytes read / written through an argument — the
/// distinct bytes where they were counted (`*counted` true), else the footprint's span
/// (hi − lo); 0 when it never reads / writes. nullopt when not exact (the caller falls
/// back to the buffer size). docs/schema.md says which measure is used where.
std::optional<int64_t> touched_bytes(const Arg& a, bool write, bool* counted = nullptr);
/// touched_bytes of the one argument of `args` on `buffer`; nullopt when several share it.
std::optional<int64_t> launch_touched_bytes(const std::vector<Arg>& args, int buffer, bool write,
                                            bool* counted = nullptr);

/// One line about argument `arg` of kernel `k` for `explain`: its footprint relative to
/// the buffer ("reads bytes [0, 1600) of 1600, 400 elements; proven in bounds"), or why
/// it is unknown. Empty when the argument has no footprint.
std::string footprint_text(const Dataflow& df, const Kernel& k, size_t arg);

/// One line for `show`'s summary (bounds_summary_line), or "not computed (no device.cu)".
std::string footprints_summary_text(const Dataflow& df);

}  // namespace kdflow
