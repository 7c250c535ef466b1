// fuzz_relay.cpp — libFuzzer target: relay.txt (parse_relay_text), the fused-name decoder on each function name
// and the tensor-type reader on each operator's type.
// Any input must give a value or an Error: no crash, no sanitizer report, bounded work.
// Built with -fsanitize=fuzzer under KDFLOW_FUZZ, and with replay_corpus.cpp in the normal
// build, where every file of test/fuzz/corpus/relay/ is fed to it as a test.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "kdflow/formats/relay.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto r = kdflow::parse_relay_text(bytes, "relay.txt");
  if (r) {
    for (const auto& kv : *r) {
      (void)kdflow::decode_fused_name(kv.first);
      for (const auto& op : kv.second) (void)kdflow::parse_relay_tensor_type(op.type);
    }
  }
  return 0;
}
