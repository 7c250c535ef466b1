// fuzz_ptx.cpp — libFuzzer target: PTX kernel signatures (parse_ptx_entries), and the fatbin/cubin lister on the same bytes.
// Any input must give a value or an Error: no crash, no sanitizer report, bounded work.
// Built with -fsanitize=fuzzer under KDFLOW_FUZZ, and with replay_corpus.cpp in the normal
// build, where every file of test/fuzz/corpus/ptx/ is fed to it as a test.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "kdflow/formats/device_module.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto e = kdflow::parse_ptx_entries(bytes, "device.ptx");
  (void)e;
  (void)kdflow::detect_binary_format(bytes);
  auto images = kdflow::list_device_images(bytes, "device.fatbin");
  (void)images;
  return 0;
}
