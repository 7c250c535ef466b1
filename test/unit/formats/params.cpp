// Unit tests: TVM params files (save_param_dict), real and hostile.
#include <algorithm>
#include <filesystem>

#include <catch2/catch.hpp>
#include <cstring>
#include <map>
#include <optional>

#include "kdflow/formats/graph_json.h"
#include "kdflow/formats/params.h"
#include "test_util.h"

using namespace kdflow;

namespace {

constexpr uint64_t kListMagic = 0xF7E58D4F05049CB7ull;
constexpr uint64_t kArrayMagic = 0xDD5E40F096B4A13Full;

/// Builds params bytes field by field (little-endian).
struct Bytes {
  std::string s;
  Bytes& le(uint64_t v, int n) {
    for (int k = 0; k < n; ++k) s += static_cast<char>((v >> (8 * k)) & 0xff);
    return *this;
  }
  Bytes& u64(uint64_t v) { return le(v, 8); }
  Bytes& i32(int32_t v) { return le(static_cast<uint32_t>(v), 4); }
  Bytes& str(const std::string& x) {
    u64(x.size());
    s += x;
    return *this;
  }
  /// A CPU array of float32 (or the given dtype) with zeroed data.
  /// `nbytes` and the count of `data` bytes default to what the shape needs.
  Bytes& array(std::vector<int64_t> shape, uint8_t code = 2, uint8_t bits = 32, uint16_t lanes = 1,
               std::optional<int64_t> nbytes = std::nullopt, std::optional<uint64_t> data = std::nullopt) {
    u64(kArrayMagic).u64(0).i32(1).i32(0).i32(static_cast<int32_t>(shape.size()));
    le(code, 1).le(bits, 1).le(lanes, 2);
    uint64_t n = (bits * lanes + 7) / 8;
    for (auto d : shape) {
      u64(static_cast<uint64_t>(d));
      n *= static_cast<uint64_t>(d);
    }
    u64(nbytes ? static_cast<uint64_t>(*nbytes) : n);
    s.append(data ? *data : n, '\0');
    return *this;
  }
};

/// Two arrays: "a" float32[2,3] and "b" int8[5].
std::string small_params() {
  Bytes b;
  b.u64(kListMagic).u64(0).u64(2).str("a").str("b").u64(2);
  b.array({2, 3});
  b.array({5}, 0, 8);
  return b.s;
}

/// True for `<file>: byte <N>: error: <one line>`.
bool is_byte_diag(const std::string& m, const std::string& file) {
  std::string head = file + ": byte ";
  if (m.rfind(head, 0) != 0 || m.find('\n') != std::string::npos) return false;
  size_t pos = head.size(), start = pos;
  while (pos < m.size() && m[pos] >= '0' && m[pos] <= '9') ++pos;
  return pos > start && m.compare(pos, 9, ": error: ") == 0 && m.size() > pos + 9;
}

std::string error_of(const std::string& bytes) {
  auto p = parse_params(bytes, "p.bin");
  REQUIRE_FALSE(p);
  CHECK(is_byte_diag(p.error().message, "p.bin"));
  CHECK(p.error().code == ExitCode::DataError);
  return p.error().message;
}

}  // namespace

TEST_CASE("a hand-made params file parses", "[params]") {
  std::string bytes = small_params();
  auto p = parse_params(bytes, "p.bin");
  REQUIRE(p);
  CHECK(p->file == "p.bin");
  REQUIRE(p->arrays.size() == 2);
  CHECK(p->arrays[0].name == "a");
  CHECK(p->arrays[0].dtype == DType{kDLFloat, 32, 1});
  CHECK(p->arrays[0].shape == std::vector<int64_t>{2, 3});
  CHECK(p->arrays[0].nbytes == 24);
  CHECK(p->arrays[0].device_type == 1);
  CHECK(p->arrays[0].device_id == 0);
  CHECK(p->arrays[1].name == "b");
  CHECK(p->arrays[1].dtype == DType{kDLInt, 8, 1});
  CHECK(p->arrays[1].nbytes == 5);
  CHECK(p->arrays[1].data_offset + p->arrays[1].nbytes == bytes.size());
  // Header 24 + names 18 + count 8 + array header 32 + shape 16 + nbytes 8.
  CHECK(p->arrays[0].data_offset == 24 + 18 + 8 + 32 + 16 + 8);
}

TEST_CASE("sort_scan's params file holds no arrays", "[params]") {
  for (const char* name : {"sort_scan", "sort_scan_v08"}) {
    std::string bytes = test::slurp(test::sample_dir(name) + "/params.bin");
    CHECK(bytes.size() == 32);
    auto p = parse_params(bytes, "params.bin");
    REQUIRE(p);
    CHECK(p->arrays.empty());
  }
}

namespace {

/// Params p0, p1, ... must match the shapes and dtypes of the graph's null nodes of those names.
void check_params_against_graph(const std::string& params_path, const std::string& model, size_t expect_count) {
  std::string bytes = test::slurp(params_path);
  auto p = parse_params(bytes, "params.bin");
  INFO(model << ": " << (p ? std::string() : p.error().message));
  REQUIRE(p);
  auto g = parse_graph_json(test::slurp(test::sample_dir(model) + "/graph.json"), "graph.json");
  REQUIRE(g);
  std::map<std::string, const GraphEntry*> by_name;
  for (size_t nid = 0; nid < g->nodes.size(); ++nid)
    if (g->nodes[nid].op == "null")
      by_name[g->nodes[nid].name] = &g->entries[static_cast<size_t>(g->entry_id(static_cast<int>(nid), 0))];
  CHECK(p->arrays.size() == expect_count);
  uint64_t end = 0;
  for (size_t i = 0; i < p->arrays.size(); ++i) {
    const ParamArray& a = p->arrays[i];
    INFO(a.name);
    auto it = by_name.find(a.name);
    REQUIRE(it != by_name.end());
    CHECK(a.shape == it->second->shape);
    CHECK(a.dtype == it->second->type);
    CHECK(a.nbytes == it->second->bytes);
    CHECK(a.device_type == 1);
    CHECK(a.data_offset + a.nbytes <= bytes.size());
    end = std::max(end, a.data_offset + a.nbytes);
  }
  if (!p->arrays.empty()) CHECK(end == bytes.size());
}

}  // namespace

TEST_CASE("mlp params (shared samples) match the graph", "[params]") {
  std::string dir = test::shared_sample_dir("mlp");
  if (dir.empty()) {
    WARN("../shared/samples/mlp is absent: skipping the real mlp params.bin test");
    SUCCEED("skipped: no shared samples");
    return;
  }
  std::string bytes = test::slurp(dir + "/params.bin");
  auto p = parse_params(bytes, "params.bin");
  REQUIRE(p);
  std::vector<std::string> names;
  for (const auto& a : p->arrays) names.push_back(a.name);
  std::sort(names.begin(), names.end());
  CHECK(names == std::vector<std::string>{"p0", "p1", "p2", "p3", "p4", "p5", "p6", "p7"});
  for (const auto& a : p->arrays) {
    if (a.name == "p0") CHECK(a.shape == std::vector<int64_t>{400, 100});
    if (a.name == "p1") CHECK(a.shape == std::vector<int64_t>{1, 400});
    CHECK(a.dtype == DType{kDLFloat, 32, 1});
  }
  check_params_against_graph(dir + "/params.bin", "mlp", 8);
}

TEST_CASE("every shared params file parses and matches its graph", "[params]") {
  bool any = false;
  for (const auto& name : test::sample_names()) {
    std::string dir = test::shared_sample_dir(name);
    if (dir.empty()) continue;
    if (!std::filesystem::exists(dir + "/params.bin")) {  // resnet18_tuned: built without bound params
      WARN(name << " has no params.bin: skipped");
      continue;
    }
    any = true;
    std::string bytes = test::slurp(dir + "/params.bin");
    auto p = parse_params(bytes, "params.bin");
    INFO(name << ": " << (p ? std::string() : p.error().message));
    REQUIRE(p);
    check_params_against_graph(dir + "/params.bin", name, p->arrays.size());
  }
  if (!any) WARN("../shared/samples is absent: skipping the shared params.bin files");
  // attention's params.bin is also in the repository.
  check_params_against_graph(
      test::sample_dir("attention") + "/params.bin", "attention",
      parse_params(test::slurp(test::sample_dir("attention") + "/params.bin"), "p")->arrays.size());
}

TEST_CASE("params errors: magic, counts, lengths", "[params][errors]") {
  std::string good = small_params();
  std::string bad = good;
  bad[0] = 'X';
  CHECK(error_of(bad).rfind("p.bin: byte 0: error: not a TVM params file (magic ", 0) == 0);
  CHECK(error_of("") == "p.bin: byte 0: error: file ends inside the file magic (8 bytes needed, 0 left)");
  CHECK(error_of(good.substr(0, 12)) ==
        "p.bin: byte 8: error: file ends inside the reserved field (8 bytes needed, 4 left)");

  Bytes huge_names;
  huge_names.u64(kListMagic).u64(0).u64(1ull << 62);
  CHECK(error_of(huge_names.s) ==
        "p.bin: byte 16: error: name count 4611686018427387904 is more than the 0 bytes left can hold");

  Bytes long_name;
  long_name.u64(kListMagic).u64(0).u64(1).u64(~0ull).s += "abc";
  CHECK(error_of(long_name.s) ==
        "p.bin: byte 24: error: name 0 is 18446744073709551615 bytes long, but only 3 bytes are left");

  Bytes huge_arrays;
  huge_arrays.u64(kListMagic).u64(0).u64(1).str("a").u64(1);
  CHECK(error_of(huge_arrays.s) == "p.bin: byte 33: error: array count 1 is more than the 0 bytes left can hold");

  Bytes mismatch;
  mismatch.u64(kListMagic).u64(0).u64(1).str("a").u64(2);
  CHECK(error_of(mismatch.s) == "p.bin: byte 33: error: array count 2 differs from the name count 1");

  Bytes dup;
  dup.u64(kListMagic).u64(0).u64(2).str("a").str("a");
  CHECK(error_of(dup.s) == "p.bin: byte 33: error: parameter name \"a\" appears twice");
}

TEST_CASE("params errors: arrays", "[params][errors]") {
  auto one = [](auto&& build) {
    Bytes b;
    b.u64(kListMagic).u64(0).u64(1).str("w").u64(1);
    build(b);
    return b.s;
  };
  // The array starts at byte 41.
  std::string bad_magic = one([](Bytes& b) { b.u64(123).u64(0).i32(1).i32(0).i32(0).le(0x00012002, 4).u64(4).u64(0); });
  CHECK(error_of(bad_magic).rfind("p.bin: byte 41: error: array \"w\": bad NDArray magic 0x000000000000007b", 0) == 0);

  CHECK(error_of(one([](Bytes& b) {
          b.u64(kArrayMagic).u64(0).i32(1).i32(0).i32(1 << 30).le(0x00012002, 4).u64(0);
        })) == "p.bin: byte 65: error: array \"w\": ndim 1073741824 is outside 0..32");
  CHECK(error_of(one([](Bytes& b) { b.u64(kArrayMagic).u64(0).i32(1).i32(0).i32(-1).le(0x00012002, 4).u64(0); })) ==
        "p.bin: byte 65: error: array \"w\": ndim -1 is outside 0..32");
  CHECK(error_of(one([](Bytes& b) { b.u64(kArrayMagic).u64(0).i32(1).i32(0).i32(4).le(0x00012002, 4).u64(0); })) ==
        "p.bin: byte 73: error: file ends inside the shape of array \"w\" (32 bytes needed, 8 left)");
  CHECK(error_of(one([](Bytes& b) {
          b.array({2, 3}, 2, 0);
        })) == "p.bin: byte 69: error: array \"w\": invalid dtype (code 2, bits 0, lanes 1)");
  CHECK(error_of(one([](Bytes& b) {
          b.array({2, 3}, 9, 32);
        })) == "p.bin: byte 69: error: array \"w\": invalid dtype (code 9, bits 32, lanes 1)");
  CHECK(error_of(one([](Bytes& b) {
          b.array({2, -3}, 2, 32, 1, 0, 0);
        })) == "p.bin: byte 81: error: array \"w\": dimension 1 is negative (-3)");
  CHECK(error_of(one([](Bytes& b) {
          b.array({2, 3}, 2, 32, 1, 25, 25);
        })) == "p.bin: byte 89: error: array \"w\": byte size 25 does not match its dtype and shape (24 bytes)");
  CHECK(error_of(one([](Bytes& b) {
          b.array({2, 3}, 2, 32, 1, -24, 0);
        })) == "p.bin: byte 89: error: array \"w\": byte size -24 does not match its dtype and shape (24 bytes)");
  CHECK(error_of(one([](Bytes& b) {
          b.array({1ll << 40, 1ll << 40}, 2, 32, 1, 0, 0);
        })) == "p.bin: byte 89: error: array \"w\": size of shape overflows 64 bits");
  CHECK(error_of(one([](Bytes& b) {
          b.array({1 << 20, 1 << 20}, 2, 32, 1, 4ll << 40, 10);
        })) == "p.bin: byte 89: error: array \"w\": 4398046511104 data bytes needed, but only 10 bytes are left");
  // A zero dimension means no data, whatever the other dimensions.
  auto z = parse_params(one([](Bytes& b) { b.array({0, 1ll << 40, 1ll << 40}, 2, 32, 1, 0, 0); }), "p.bin");
  REQUIRE(z);
  CHECK(z->arrays[0].nbytes == 0);

  std::string trailing = small_params() + "xyz";
  CHECK(error_of(trailing) ==
        "p.bin: byte " + std::to_string(small_params().size()) + ": error: 3 unexpected bytes after the last array");
}

TEST_CASE("every truncation of a params file fails cleanly", "[params][errors]") {
  std::string good = small_params();
  REQUIRE(parse_params(good, "p.bin"));
  for (size_t n = 0; n < good.size(); ++n) {
    auto p = parse_params(std::string_view(good.data(), n), "p.bin");
    INFO("length " << n);
    REQUIRE_FALSE(p);
    CHECK(is_byte_diag(p.error().message, "p.bin"));
  }
  // Flipping any single byte never crashes (it may still parse, e.g. in data bytes).
  for (size_t i = 0; i < good.size(); ++i) {
    std::string bad = good;
    bad[i] = static_cast<char>(bad[i] ^ 0xff);
    auto p = parse_params(bad, "p.bin");
    if (!p) CHECK(is_byte_diag(p.error().message, "p.bin"));
  }
}
