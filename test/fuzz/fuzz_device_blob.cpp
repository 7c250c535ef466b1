// fuzz_device_blob.cpp — libFuzzer target: the __tvm_dev_mblob bytes (parse_device_blob), and list_device_images on each CUDA module.
// Any input must give a value or an Error: no crash, no sanitizer report, bounded work.
// Built with -fsanitize=fuzzer under KDFLOW_FUZZ, and with replay_corpus.cpp in the normal
// build, where every file of test/fuzz/corpus/device_blob/ is fed to it as a test.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "kdflow/formats/device_module.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto b = kdflow::parse_device_blob(bytes, "model.so");
  if (b) {
    for (const auto& m : b->cuda) {
      auto images = kdflow::list_device_images(m.data, "model.so");
      (void)images;
    }
  }
  return 0;
}
