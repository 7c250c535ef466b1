// inspect.h — `kdflow inspect FILE`: what a model.so (its __tvm_dev_mblob), cubin, fatbin or
// PTX file holds, as plain text (model.so is read by formats/model_library.h).
// Reads only; never loads or runs device code or the library.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "kdflow/formats/model_library.h"
#include "kdflow/support/diag.h"
#include "kdflow/formats/function_table.h"

namespace kdflow {

/// `kdflow inspect FILE`: prints a deterministic description on `out`; errors as one line
/// on `err`. Returns the exit code (0; 65 bad input; 66 missing file; 69 when FILE is a
/// model.so and kdflow was built without LLVM).
int run_inspect_command(const std::string& path, std::ostream& out, std::ostream& err);

}  // namespace kdflow
