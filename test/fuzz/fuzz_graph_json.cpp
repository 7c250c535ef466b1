// fuzz_graph_json.cpp — libFuzzer target: graph.json (parse_graph_json).
// Any input must give a value or an Error: no crash, no sanitizer report, bounded work.
// Built with -fsanitize=fuzzer under KDFLOW_FUZZ, and with replay_corpus.cpp in the normal
// build, where every file of test/fuzz/corpus/graph_json/ is fed to it as a test.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "kdflow/formats/graph_json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto g = kdflow::parse_graph_json(bytes, "graph.json");
  if (g) {
    for (const auto& e : g->entries) (void)g->storage_bytes(e.storage_id);
  }
  return 0;
}
