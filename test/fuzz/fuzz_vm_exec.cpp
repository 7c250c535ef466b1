// fuzz_vm_exec.cpp — libFuzzer target: the Relax VM executable (parse_vm_executable), then the
// symbolic run of its `main` (run_relax_vm) when it parses.
// Any input must give a value or an Error: no crash, no sanitizer report, bounded work.
// Built with -fsanitize=fuzzer under KDFLOW_FUZZ, and with replay_corpus.cpp in the normal
// build, where every file of test/fuzz/corpus/vm_exec/ is fed to it as a test.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "kdflow/frontend/relax_vm.h"
#include "kdflow/formats/vm_exec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  kdflow::VmExecLimits limits;
  limits.max_instructions = 1 << 16;
  limits.max_registers = 1 << 16;
  auto ex = kdflow::parse_vm_executable(bytes, "vm_exec.bin", limits);
  if (!ex) return 0;
  for (const auto& c : ex->constants)  // every tensor constant lies inside the input
    if (c.kind == kdflow::VmConstant::Kind::Tensor && (c.data_offset > size || c.nbytes > size - c.data_offset))
      __builtin_trap();
  // The fused functions of the seeds' host.c, so calls of them are modelled too.
  const std::vector<std::string> host = {"fused_matmul_add_relu", "fused_matmul1_add1_relu1", "fused_matmul2_add2_relu2",
                                         "fused_matmul3_add3", "log_softmax"};
  kdflow::RelaxVmLimits vm_limits;
  vm_limits.max_steps = 100000;
  auto p = kdflow::run_relax_vm(*ex, host, "main", vm_limits);
  if (p) {
    const auto& g = p->graph;
    if (g.node_row_ptr.size() != g.nodes.size() + 1 || p->input_index.size() != g.nodes.size() ||
        static_cast<size_t>(g.node_row_ptr.back()) != g.entries.size())
      __builtin_trap();
  }
  return 0;
}
