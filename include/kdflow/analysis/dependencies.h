// dependencies.h — the device side joined to the launch sequence: sets each kernel buffer
// argument's access from the kernels' CUDA source, checks the source against the function
// table and the host's launches, and derives kernel-to-kernel dependencies. IR in, IR out.
#pragma once

#include <string>
#include <vector>

#include "kdflow/ir/dataflow.h"
#include "kdflow/support/diag.h"
#include "kdflow/formats/function_table.h"

namespace kdflow {

/// Records `functions` (from device.cu) in df.device_functions and binds every kernel to
/// its function: each buffer argument takes the access of its parameter. Errors (one line,
/// naming device.cu's position): a launched kernel missing from the source; a parameter
/// count or pointer/scalar kind that disagrees with the table's arg_types; a
/// __launch_bounds__(N) other than the block size host.c launches it with.
Status apply_device_functions(Dataflow& df, const std::vector<DeviceFunction>& functions, const FunctionTable& table,
                              const std::string& device_file);

/// Library calls' code is opaque: a buffer that is only an input of the calling node is
/// Read (a graph node never writes its inputs); its outputs and workspaces, and anything
/// else, are ReadWrite. Kernels with no device source keep Unknown, which dependency
/// analysis treats as ReadWrite.
void assume_library_access(Dataflow& df);

/// Fills df.dependencies in launch order. Memory identity is the storage id for graph
/// buffers (entries sharing it alias) and the buffer for workspaces. For every buffer
/// argument of every kernel: a read depends on the last writer (RAW); a write depends on
/// every reader since the last write (WAR) and on the last writer (WAW). ReadWrite and
/// Unknown count as both. A kernel never depends on itself. Library calls are not part
/// of this analysis yet (none of TVM's CUDA builds we have seen make any; docs say so).
void compute_dependencies(Dataflow& df);

/// Launches (kernel ids, in order) whose kernel has no access set: no device source was
/// read, or its device function was not analyzed (DeviceFunction::access_error).
std::vector<int> kernels_without_access(const Dataflow& df);

/// One warning line per device function that was not analyzed, in source order:
/// `device.cu:12:1: warning: kernel 'K' not analyzed, its arguments' access is unknown: <the error>`;
/// then one per Dataflow::device_errors entry.
std::vector<std::string> access_warnings(const Dataflow& df);

}  // namespace kdflow
