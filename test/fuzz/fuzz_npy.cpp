// fuzz_npy.cpp — libFuzzer target: .npy (parse_npy, and encode_npy on what it read).
// Any input must give a value or an Error: no crash, no sanitizer report, bounded work.
// Built with -fsanitize=fuzzer under KDFLOW_FUZZ, and with replay_corpus.cpp in the normal
// build, where every file of test/fuzz/corpus/npy/ is fed to it as a test.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "kdflow/formats/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto a = kdflow::parse_npy(bytes, "x.npy");
  if (a) {
    if (a->data.size() != kdflow::dtype_element_bytes(a->dtype) * a->count()) __builtin_trap();
    auto again = kdflow::encode_npy(*a);
    if (again) {
      auto b = kdflow::parse_npy(*again, "again.npy");
      if (!b || !(*b == *a)) __builtin_trap();
    }
  }
  return 0;
}
