// relax_ops.h — the Relax operators behind a Relax build's fused functions, from the
// function names, matched against the op names the Relax module's text calls
// (relax_input.txt, the module before lowering) and a list of Relax's own op names. Never
// reads files, never invents an op: a piece of a name no op matches stays one unknown piece.
#pragma once

#include <string>
#include <vector>

#include "kdflow/ir/dataflow.h"

namespace kdflow {

/// The operators a Relax module's printed text calls (`R.matmul(`, `R.nn.relu(`), each once,
/// in order of first call, without `R.` ("matmul", "nn.relu"); the VM and memory built-ins,
/// struct-info and control forms (R.call_tir, R.vm.*, R.Tensor, R.output, ...) are not ops.
std::vector<std::string> relax_ops_in_text(const std::string& text);

/// The operators of a Relax function name: "fused_matmul1_add1_relu1" → matmul, add, nn.relu;
/// "log_softmax" → nn.log_softmax. Relax makes names unique with a number after each op;
/// the numbers are dropped and the pieces matched longest first against the last component
/// of `known` (preferred) and of Relax's registered op names, each op named in full.
std::vector<RelayOp> decode_relax_name(const std::string& function, const std::vector<std::string>& known);

}  // namespace kdflow
