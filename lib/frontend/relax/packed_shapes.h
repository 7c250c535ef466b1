// packed_shapes.h — the shapes and dtypes of an nn.Module build's packed params, read from the
// build itself: vm.builtin.check_tuple_info's error context carries the tuple's annotation
// (`annotation=T.Tuple(R.Tensor((vocab_size, T.int64(64)), dtype="float32"), ...)`; TVM 0.25
// prints `R.Tuple(R.Tensor((256, 64), dtype="float32"), ...)`), the
// struct info TVM printed for that parameter. A session then extracts without the weights
// (a real-size LLM whose params are gigabytes); symbolic dimensions (vocab_size) take their
// values from the user (--param-dim NAME=N).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "kdflow/formats/params.h"
#include "kdflow/formats/vm_exec.h"
#include "kdflow/support/diag.h"

namespace kdflow {

/// The tuple's items from one annotation text (what follows "annotation=" up to the tuple's
/// closing parenthesis): names "packed_params[k]", shapes with `dims` substituted. No data
/// (nbytes is the array's size, data_offset 0). `where` names the text in errors.
Expected<ParamsFile> parse_packed_annotation(std::string_view text, const std::map<std::string, int64_t>& dims,
                                             const std::string& where);

/// The packed params of `ex`: the annotation of the first check_tuple_info in its bytecode
/// functions (every function checks the same tuple; one that differs is an error). `file`
/// names the executable in errors; the result's `file` says where the shapes came from.
Expected<ParamsFile> packed_params_from_build(const VmExecutable& ex, const std::map<std::string, int64_t>& dims,
                                              const std::string& file);

/// "NAME=N" (--param-dim) into `dims`; a malformed one is a usage error.
Status parse_param_dim(const std::string& spec, std::map<std::string, int64_t>* dims);

}  // namespace kdflow
