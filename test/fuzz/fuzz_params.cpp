// fuzz_params.cpp — libFuzzer target: params.bin (parse_params).
// Any input must give a value or an Error: no crash, no sanitizer report, bounded work.
// Built with -fsanitize=fuzzer under KDFLOW_FUZZ, and with replay_corpus.cpp in the normal
// build, where every file of test/fuzz/corpus/params/ is fed to it as a test.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "kdflow/formats/params.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto p = kdflow::parse_params(bytes, "params.bin");
  if (p) {
    // Every array must lie inside the input.
    for (const auto& a : p->arrays)
      if (a.data_offset > size || a.nbytes > size - a.data_offset) __builtin_trap();
  }
  return 0;
}
