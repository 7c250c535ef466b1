// fuzz_dataflow_json.cpp — libFuzzer target: the dataflow JSON reader (parse_dataflow_json), and the emitters on what it read.
// Any input must give a value or an Error: no crash, no sanitizer report, bounded work.
// Built with -fsanitize=fuzzer under KDFLOW_FUZZ, and with replay_corpus.cpp in the normal
// build, where every file of test/fuzz/corpus/dataflow_json/ is fed to it as a test.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "kdflow/emit/emit.h"
#include "kdflow/ir/dataflow_json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto df = kdflow::parse_dataflow_json(std::string(bytes), "dataflow.json");
  if (df) {
    (void)kdflow::emit_json(*df);
    (void)kdflow::emit_dot(*df);
    (void)kdflow::emit_text(*df);
  }
  return 0;
}
