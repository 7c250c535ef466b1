// dump_headers.cpp — developer tool: writes kdflow's in-memory stand-in headers (the ones the
// host-C and CUDA analyzers parse with, lib/frontend/clang/host_headers.cpp and device_headers.cpp) to
// OUT/host and OUT/device, so that a clang command line (bench/bench.py) sees exactly the
// headers kdflow uses. Usage: kdflow_dump_headers OUT
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "device_headers.h"
#include "host_headers.h"

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
    return 64;
  }
  auto dump = [&](const char* sub, const std::vector<std::pair<std::string, std::string>>& headers) {
    for (const auto& [rel, text] : headers) {
      fs::path p = fs::path(argv[1]) / sub / rel;
      fs::create_directories(p.parent_path());
      std::ofstream f(p, std::ios::binary | std::ios::trunc);
      f << text;
      if (!f) {
        std::fprintf(stderr, "%s: error: cannot write\n", p.c_str());
        return false;
      }
    }
    return true;
  };
  if (!dump("host", kdflow::detail::host_stub_headers()) || !dump("device", kdflow::detail::device_stub_headers()))
    return 73;
  return 0;
}
