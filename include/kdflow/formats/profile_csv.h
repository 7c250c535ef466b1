// profile_csv.h — reads Nsight Compute / Nsight Systems CSV exports (a CSV parser, then the
// kernel launches they list) and joins those launches to the IR's kernels by name, in order.
// Reads text only: never runs a profiler, never prints; errors are `file:line:col` Errors.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kdflow/ir/dataflow.h"
#include "kdflow/support/diag.h"

namespace kdflow {

// --- CSV ----------------------------------------------------------------------------

/// One field and where it starts in the file (1-based line and byte column).
struct CsvField {
  std::string text;
  unsigned line = 0;
  unsigned col = 0;
};
struct CsvRow {
  std::vector<CsvField> fields;
  unsigned line = 0;  ///< line the row starts on
};
struct CsvTable {
  std::vector<CsvField> header;
  std::vector<CsvRow> rows;  ///< data rows, in file order (blank lines skipped)
  /// Index of the header field named `name` (exact match after trimming spaces), or -1.
  int column(const std::string& name) const;
};

/// Limits, so a hostile file cannot exhaust memory.
inline constexpr size_t kMaxCsvColumns = 4096;
inline constexpr uint64_t kMaxCsvBytes = 512ull << 20;
inline constexpr size_t kMaxProfiledLaunches = 1000000;

/// RFC 4180: fields separated by commas; a field in double quotes may hold commas, line
/// breaks and doubled quotes (`""`); lines end in LF or CRLF (a lone CR too). A UTF-8
/// byte-order mark is ignored; blank lines are skipped; lines that start with `==` (ncu's
/// `==PROF==` / `==WARNING==` messages on stdout) are skipped before and between rows. Every row
/// must have as many fields as the header. Errors: `file:line:col: error: ...` (DataError).
Expected<CsvTable> parse_csv(const std::string& text, const std::string& file);

// --- profiler exports ----------------------------------------------------------------

enum class ProfileTool { NsightCompute, NsightSystems };
const char* to_string(ProfileTool t);  ///< "Nsight Compute" | "Nsight Systems"

/// One kernel launch the export lists.
struct ProfiledLaunch {
  std::string name;    ///< kernel name as the export writes it
  std::string id;      ///< ncu: the `ID` column; "" when the export has none (nsys)
  unsigned line = 0;   ///< line of the launch's first row
  unsigned name_col = 0;
  size_t rows = 0;     ///< CSV rows grouped into this launch (ncu: one per metric)
  std::optional<std::array<int64_t, 3>> grid;   ///< `Grid Size` "(x, y, z)" (nsys: GrdX/GrdY/GrdZ)
  std::optional<std::array<int64_t, 3>> block;  ///< `Block Size` (nsys: BlkX/BlkY/BlkZ)
  std::optional<int64_t> dynamic_shared_memory; ///< ncu metric "Dynamic Shared Memory Per Block" in bytes
  std::optional<double> duration_ns;            ///< ncu metric "Duration"; nsys "Duration (ns)"
};

struct Profile {
  ProfileTool tool = ProfileTool::NsightCompute;
  std::string file;       ///< as given (labels diagnostics)
  size_t rows = 0;        ///< data rows read
  size_t skipped_rows = 0;  ///< rows that are not kernels (nsys memcpy/memset rows, ncu's units row)
  std::vector<ProfiledLaunch> launches;  ///< in file order
};

/// Reads an export. Nsight Compute (`ncu --csv`, `--page details` or `raw`): a `Kernel Name`
/// column; rows with the same `ID` are one launch (one row per metric). Nsight Systems
/// (`nsys stats --format csv`, `cuda_gpu_trace` or `cuda_gpu_kern_sum`): a `Name` column,
/// one row per launch (`Instances` > 1 repeats the row's kernel); rows named `[CUDA ...]`
/// (memcpy, memset) are not kernels. `Grid Size` / `Block Size` must read "(x, y, z)"; ncu's
/// `Duration` is also read as the raw `gpu__time_duration.sum` (`ncu --metrics`). The
/// header is the first line with a `Kernel Name` or `Name` field: what precedes it (the profiled
/// program's own output, as `ncu --csv ./app > out.csv` mixes it in) is skipped.
Expected<Profile> read_profile_csv(const std::string& text, const std::string& file);

// --- the join ------------------------------------------------------------------------

/// A launch configuration the export and the graph disagree on.
struct ProfileMismatch {
  std::string what;      ///< "name" (another TVM's name of the kernel) | "grid" | "block" | "dynamic shared memory"
  std::string profiled;  ///< "(20,1,1)"
  std::string graph;     ///< "(64,1,1)"
};

/// One profiled launch and the graph kernel it is.
struct ProfileMatch {
  int launch = 0;    ///< index in Profile::launches
  int kernel = -1;   ///< graph kernel id; -1 when the graph has no kernel of that name
  int run = 0;       ///< which repetition of the graph's launches of this name (0: the first)
  std::vector<ProfileMismatch> mismatches;
};

/// Profiled kernel names the graph does not know.
struct UnknownProfiledKernel {
  std::string name;
  size_t launches = 0;
  unsigned first_line = 0;
  /// A graph kernel whose name is this one in the other TVM naming scheme (0.8
  /// `..._kernel0`, `..._kernel1` vs 0.13+ `..._kernel`, `..._kernel_1`), or -1.
  int other_scheme_kernel = -1;
};

struct ProfileJoin {
  std::vector<ProfileMatch> matches;            ///< one per profiled launch, in file order
  std::vector<int> missing;                     ///< graph kernel ids no profiled launch matched
  std::vector<UnknownProfiledKernel> unknown;   ///< in order of first appearance
  int runs = 0;                                 ///< most repetitions of any matched name
};

/// Matches launches to kernels by name, in order: the i-th profiled launch of name N is
/// the (i mod c)-th graph launch named N (c: how many the graph has), in run i / c. Names
/// match exactly, else after dropping a leading "void " and an argument list "(...)".
/// Grid, block and dynamic shared memory, where the export has them, are compared.
ProfileJoin join_profile(const Dataflow& df, const Profile& profile);

/// `..._kernel0` ↔ `..._kernel`, `..._kernelN` ↔ `..._kernel_N` (N ≥ 1); "" when `name`
/// ends in neither form.
std::string other_tvm_kernel_name(const std::string& name);

}  // namespace kdflow
