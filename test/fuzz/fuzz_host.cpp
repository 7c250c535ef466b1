// fuzz_host.cpp — libFuzzer target: the host-C analyzer (HostProgram::parse, then run) on
// mutated TVM host code. The input's first line names the function to run and the tensors
// to pass it, as taken from a real graph.json:
//   // kdflow-fuzz: tvmgen_default_fused_nn_dense_add float32[1,784] float32[128,784] ...
// and the rest is host.c (the seeds are real host.c files cut to one fused function).
// Without that line, the first function with a body is run with two float32[1,16] tensors.
// Work per input is bounded by small InterpreterLimits.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kdflow/support/dtype.h"
#include "kdflow/frontend/host_analyzer.h"

namespace {

// Parses "float32[1,784]"; false on anything else. Dimensions are kept small so that the
// interpreter's limits, not the tensors, bound the work.
bool parse_tensor(const std::string& word, kdflow::TensorArg* t) {
  size_t open = word.find('[');
  if (open == std::string::npos || word.back() != ']') return false;
  auto dt = kdflow::parse_dtype(word.substr(0, open));
  if (!dt) return false;
  t->dtype_code = dt->code;
  t->dtype_bits = dt->bits;
  t->dtype_lanes = dt->lanes;
  std::string dims = word.substr(open + 1, word.size() - open - 2);
  size_t pos = 0;
  while (pos < dims.size()) {
    size_t comma = dims.find(',', pos);
    if (comma == std::string::npos) comma = dims.size();
    std::string d = dims.substr(pos, comma - pos);
    if (d.empty() || d.size() > 9 || d.find_first_not_of("0123456789") != std::string::npos) return false;
    t->shape.push_back(std::stoll(d));
    if (t->shape.size() > 8) return false;
    pos = comma + 1;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 256 * 1024) return 0;  // clang's own parse time grows with the input
  std::string source(reinterpret_cast<const char*>(data), size);

  std::string function;
  std::vector<kdflow::TensorArg> tensors;
  static const std::string kTag = "// kdflow-fuzz:";
  if (source.compare(0, kTag.size(), kTag) == 0) {
    size_t eol = source.find('\n');
    std::string line = source.substr(kTag.size(), eol == std::string::npos ? std::string::npos : eol - kTag.size());
    size_t pos = 0;
    bool first = true;
    while (pos < line.size() && tensors.size() < 16) {
      size_t start = line.find_first_not_of(' ', pos);
      if (start == std::string::npos) break;
      size_t end = line.find(' ', start);
      if (end == std::string::npos) end = line.size();
      std::string word = line.substr(start, end - start);
      pos = end;
      if (first) {
        function = word;
        first = false;
        continue;
      }
      kdflow::TensorArg t;
      if (!parse_tensor(word, &t)) break;
      t.entry_id = static_cast<int>(tensors.size());
      tensors.push_back(std::move(t));
    }
  }
  if (tensors.empty()) {
    for (int i = 0; i < 2; ++i) {
      kdflow::TensorArg t;
      t.entry_id = i;
      t.shape = {1, 16};
      tensors.push_back(t);
    }
  }

  kdflow::InterpreterLimits limits;
  limits.max_steps = 200'000;
  limits.max_loop_trips = 50'000;
  limits.max_calls = 1'000;
  limits.max_call_depth = 16;
  limits.max_memory_cells = 100'000;
  limits.max_array_elements = 50'000;

  auto program = kdflow::HostProgram::parse(source, "host.c", limits);
  if (!program) return 0;
  const kdflow::HostProgram& p = **program;
  if (function.empty() || !p.has_function(function)) {
    auto names = p.functions();
    if (names.empty()) return 0;
    function = names.front();
  }
  auto trace = p.run(function, tensors);
  (void)trace;
  return 0;
}
