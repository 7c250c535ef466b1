// fuzz_elf.cpp — libFuzzer target: ELF lookup of __tvm_dev_mblob in a model.so (read_elf_symbol), then the blob parser.
// Any input must give a value or an Error: no crash, no sanitizer report, bounded work.
// Built with -fsanitize=fuzzer under KDFLOW_FUZZ, and with replay_corpus.cpp in the normal
// build, where every file of test/fuzz/corpus/elf/ is fed to it as a test.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "kdflow/formats/elf_symbols.h"
#include "kdflow/formats/device_module.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto blob = kdflow::read_elf_symbol(bytes, "model.so", "__tvm_dev_mblob");
  if (blob) {
    auto b = kdflow::parse_device_blob(*blob, "model.so");
    (void)b;
  }
  return 0;
}
