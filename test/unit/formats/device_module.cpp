// Unit tests: device binaries (cubin, fatbin, PTX) and TVM's __tvm_dev_mblob, real and hostile.
#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>

#include "kdflow/formats/device_module.h"
#include "kdflow/formats/function_table.h"
#include "test_util.h"

using namespace kdflow;

namespace {

constexpr uint64_t kArrayMagic = 0xDD5E40F096B4A13Full;

/// Builds bytes field by field (little-endian).
struct Bytes {
  std::string s;
  Bytes& le(uint64_t v, int n) {
    for (int k = 0; k < n; ++k) s += static_cast<char>((v >> (8 * k)) & 0xff);
    return *this;
  }
  Bytes& u64(uint64_t v) { return le(v, 8); }
  Bytes& u32(uint32_t v) { return le(v, 4); }
  Bytes& u16(uint16_t v) { return le(v, 2); }
  Bytes& i32(int32_t v) { return le(static_cast<uint32_t>(v), 4); }
  Bytes& str(const std::string& x) {
    u64(x.size());
    s += x;
    return *this;
  }
  Bytes& raw(const std::string& x) {
    s += x;
    return *this;
  }
  /// A float32 CPU NDArray of the given shape, zero data.
  Bytes& array(std::vector<int64_t> shape) {
    u64(kArrayMagic).u64(0).i32(1).i32(0).i32(static_cast<int32_t>(shape.size()));
    le(2, 1).le(32, 1).le(1, 2);
    uint64_t n = 4;
    for (auto d : shape) {
      u64(static_cast<uint64_t>(d));
      n *= static_cast<uint64_t>(d);
    }
    u64(n);
    s.append(n, '\0');
    return *this;
  }
};

/// A blob body (without the leading u64 length) in TVM 0.14's layout: factory, _lib,
/// cuda (two kernels), import tree.
std::string blob_body() {
  Bytes b;
  b.u64(4);
  b.str("GraphExecutorFactory").str("{\"nodes\": []}").u64(2).u64(2).str("p0").str("p1");
  b.array({2, 3}).array({4});
  b.str("default");
  b.str("_lib");
  b.str("cuda").str("cubin").u64(2);
  b.str("k_kernel").str("").u64(3).u32(0x00014003).u32(0x00014003).u32(0x00012000);  // handle, handle, int32
  b.u64(2).str("blockIdx.x").str("threadIdx.x");
  b.str("k_kernel_1").str("").u64(1).u32(0x00014003).u64(3).str("blockIdx.x").str("threadIdx.x").str(
      "tir.use_dyn_shared_memory");
  b.str("DEVICE-BYTES");
  b.str("_import_tree").u64(4).u64(0).u64(1).u64(2).u64(2).u64(2).u64(1).u64(2);
  return b.s;
}

std::string with_length(const std::string& body) {
  Bytes b;
  b.u64(body.size()).raw(body);
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

std::string blob_error(const std::string& bytes) {
  auto b = parse_device_blob(bytes, "m.so");
  REQUIRE_FALSE(b);
  INFO(b.error().message);
  CHECK(is_byte_diag(b.error().message, "m.so"));
  CHECK(b.error().code == ExitCode::DataError);
  return b.error().message;
}

std::string images_error(const std::string& bytes) {
  auto i = list_device_images(bytes, "d.bin");
  REQUIRE_FALSE(i);
  INFO(i.error().message);
  CHECK(is_byte_diag(i.error().message, "d.bin"));
  return i.error().message;
}

/// Samples that have a file `name` in the repository.
std::vector<std::string> samples_with(const std::string& name) {
  std::vector<std::string> out;
  for (const auto& s : test::sample_names())
    if (std::filesystem::exists(test::sample_dir(s) + "/" + name)) out.push_back(s);
  return out;
}

/// The first entry's payload of a one-entry fatbin (16-byte container header, entry
/// header of the size it says).
std::string first_fatbin_payload(const std::string& fatbin) {
  REQUIRE(fatbin.size() > 16 + 64);
  uint32_t hs = 0;
  uint64_t size = 0;
  std::memcpy(&hs, fatbin.data() + 16 + 4, 4);
  std::memcpy(&size, fatbin.data() + 16 + 8, 8);
  REQUIRE(16 + hs + size <= fatbin.size());
  return fatbin.substr(16 + hs, size);
}

/// A 64-byte ELF64 header for a CUDA cubin with the given ABI bytes and e_flags.
std::string cubin_header(uint8_t osabi, uint8_t abi_version, uint32_t flags, uint16_t machine = 190) {
  Bytes b;
  b.raw(std::string("\x7f" "ELF", 4)).le(2, 1).le(1, 1).le(1, 1).le(osabi, 1).le(abi_version, 1);
  b.s.append(7, '\0');
  b.u16(2).u16(machine).u32(1).u64(0).u64(0).u64(0).u32(flags).u16(64).u16(56).u16(0).u16(64).u16(0).u16(0);
  REQUIRE(b.s.size() == 64);
  return b.s;
}

/// A fatbin entry header (64 bytes) + payload.
std::string fatbin_entry(uint16_t kind, uint32_t arch, const std::string& payload, bool compressed = false) {
  Bytes b;
  b.u16(kind).u16(0x0101).u32(64).u64(payload.size()).u32(compressed ? static_cast<uint32_t>(payload.size()) : 0).u32(0);
  b.u16(8).u16(1).u32(arch).u32(0).u32(0).u64(compressed ? 0x2011 : 0x11).u64(0).u64(0);
  REQUIRE(b.s.size() == 64);
  return b.s + payload;
}

std::string fatbin(const std::string& entries) {
  Bytes b;
  b.u32(0xBA55ED50).u16(1).u16(16).u64(entries.size()).raw(entries);
  return b.s;
}

}  // namespace

TEST_CASE("formats are detected by content", "[device_module]") {
  auto fatbins = samples_with("device.cubin");
  REQUIRE(fatbins.size() >= 5);
  for (const auto& s : fatbins) {
    INFO(s);
    CHECK(detect_binary_format(test::slurp(test::sample_dir(s) + "/device.cubin")) == BinaryFormat::Fatbin);
  }
  auto ptx = samples_with("device.ptx");
  REQUIRE(ptx.size() >= 7);
  for (const auto& s : ptx) {
    INFO(s);
    CHECK(detect_binary_format(test::slurp(test::sample_dir(s) + "/device.ptx")) == BinaryFormat::Ptx);
  }
  std::string cubin = first_fatbin_payload(test::slurp(test::sample_dir("mlp") + "/device.cubin"));
  CHECK(detect_binary_format(cubin) == BinaryFormat::Cubin);

  CHECK(detect_binary_format("") == BinaryFormat::Unknown);
  CHECK(detect_binary_format("garbage, not a binary") == BinaryFormat::Unknown);
  CHECK(detect_binary_format(std::string("\x7f" "EL", 3)) == BinaryFormat::Unknown);
  CHECK(detect_binary_format(test::slurp(test::sample_dir("mlp") + "/graph.json")) == BinaryFormat::Unknown);
  CHECK(detect_binary_format(test::slurp(test::sample_dir("mlp") + "/device.cu")) == BinaryFormat::Unknown);
  // `.version` must be the first directive, comments aside; a NUL before it means binary.
  CHECK(detect_binary_format("// a comment\n/* another */\n\n  .version 8.0\n.target sm_80\n") == BinaryFormat::Ptx);
  CHECK(detect_binary_format(".target sm_80\n.version 8.0\n") == BinaryFormat::Unknown);
  CHECK(detect_binary_format(std::string("\0.version 8.0\n", 14)) == BinaryFormat::Unknown);
  CHECK(detect_binary_format("// .version 8.0\n") == BinaryFormat::Unknown);

  CHECK(std::string(to_string(BinaryFormat::Unknown)) == "unknown");
  CHECK(std::string(to_string(BinaryFormat::Cubin)) == "cubin");
  CHECK(std::string(to_string(BinaryFormat::Fatbin)) == "fatbin");
  CHECK(std::string(to_string(BinaryFormat::Ptx)) == "ptx");
}

TEST_CASE("the samples' fatbins hold one sm_90 cubin, PTX targets sm_90", "[device_module]") {
  for (const auto& s : samples_with("device.cubin")) {
    INFO(s);
    std::string bytes = test::slurp(test::sample_dir(s) + "/device.cubin");
    auto images = list_device_images(bytes, "device.cubin");
    INFO((images ? std::string() : images.error().message));
    REQUIRE(images);
    REQUIRE(images->size() == 1);
    CHECK((*images)[0].kind == "cubin");
    CHECK((*images)[0].arch == "sm_90");
    // The embedded ELF is a CUDA 13 cubin (new ABI: SM in e_flags bits 8-15).
    auto inner = list_device_images(first_fatbin_payload(bytes), "inner.cubin");
    REQUIRE(inner);
    REQUIRE(inner->size() == 1);
    CHECK((*inner)[0].kind == "cubin");
    CHECK((*inner)[0].arch == "sm_90");
  }
  for (const auto& s : samples_with("device.ptx")) {
    INFO(s);
    auto images = list_device_images(test::slurp(test::sample_dir(s) + "/device.ptx"), "device.ptx");
    REQUIRE(images);
    REQUIRE(images->size() == 1);
    CHECK((*images)[0].kind == "ptx");
    CHECK((*images)[0].arch == "sm_90");
  }
}

TEST_CASE("cubin e_flags: old and new CUDA ABI, wrong machine", "[device_module]") {
  auto arch = [](const std::string& bytes) {
    auto i = list_device_images(bytes, "c.cubin");
    INFO((i ? std::string() : i.error().message));
    REQUIRE(i);
    REQUIRE(i->size() == 1);
    CHECK((*i)[0].kind == "cubin");
    return (*i)[0].arch;
  };
  // CUDA 13 (ptxas): EI_OSABI 0x41, ABI version 8, SM in bits 8-15.
  CHECK(arch(cubin_header(0x41, 8, 0x06005a04)) == "sm_90");
  CHECK(arch(cubin_header(0x41, 8, 0x06007802)) == "sm_120");
  CHECK(arch(cubin_header(0x41, 8, 0x06004b04)) == "sm_75");
  // Older CUDA: EI_OSABI 0x33, ABI version 7, SM in bits 0-7 (virtual arch in 16-23).
  CHECK(arch(cubin_header(0x33, 7, 0x00500550)) == "sm_80");
  CHECK(arch(cubin_header(0x33, 7, 0x004b054b)) == "sm_75");

  std::string x86 = cubin_header(0x00, 0, 0, 62);
  CHECK(detect_binary_format(x86) == BinaryFormat::Cubin);
  CHECK(images_error(x86) == "d.bin: byte 18: error: ELF machine 62 is not EM_CUDA (190): not a cubin");
  CHECK(images_error(cubin_header(0x41, 8, 0x06000004)).find("name no SM version") != std::string::npos);
  CHECK(images_error(std::string("\x7f" "ELF\x02\x01", 6)) ==
        "d.bin: byte 0: error: ELF header truncated (6 bytes, at least 52 needed)");
  CHECK(images_error("garbage") == "d.bin: byte 0: error: not a cubin, fatbin or PTX file (starts with 67 61 72 62)");
}

TEST_CASE("fatbin entries: several images, bounds checked", "[device_module]") {
  std::string cubin75 = cubin_header(0x33, 7, 0x004b054b);
  std::string fb = fatbin(fatbin_entry(2, 75, cubin75) + fatbin_entry(2, 90, cubin_header(0x41, 8, 0x06005a04)) +
                          fatbin_entry(1, 90, ".version 8.0\n.target sm_90\n", /*compressed=*/false) +
                          fatbin_entry(1, 80, "(compressed bytes)", /*compressed=*/true));
  CHECK(detect_binary_format(fb) == BinaryFormat::Fatbin);
  auto images = list_device_images(fb, "multi.fatbin");
  REQUIRE(images);
  REQUIRE(images->size() == 4);
  CHECK((*images)[0].kind == "cubin");
  CHECK((*images)[0].arch == "sm_75");
  CHECK((*images)[1].arch == "sm_90");
  CHECK((*images)[2].kind == "ptx");
  CHECK((*images)[2].arch == "sm_90");
  CHECK((*images)[3].kind == "ptx");
  CHECK((*images)[3].arch == "sm_80");
  // Zero padding after the container (as in .nv_fatbin sections) is accepted.
  CHECK(list_device_images(fb + std::string(8, '\0'), "f"));
  // Two containers back to back.
  auto two = list_device_images(fb + fb, "f");
  REQUIRE(two);
  CHECK(two->size() == 8);

  // Every truncation is an error, never a crash.
  for (size_t n = 4; n < fb.size(); ++n) {
    auto r = list_device_images(fb.substr(0, n), "d.bin");
    INFO(n);
    REQUIRE_FALSE(r);
    CHECK(is_byte_diag(r.error().message, "d.bin"));
  }
  // Sizes that point past the end.
  std::string huge = fb;
  uint64_t big = ~0ull;
  std::memcpy(&huge[8], &big, 8);
  CHECK(images_error(huge) == "d.bin: byte 8: error: fatbin says 18446744073709551615 bytes of entries, but only " +
                                  std::to_string(fb.size() - 16) + " bytes are left");
  huge = fb;
  std::memcpy(&huge[16 + 8], &big, 8);
  CHECK(images_error(huge).rfind("d.bin: byte 24: error: fatbin entry 0 payload is 18446744073709551615 bytes", 0) == 0);
  huge = fb;
  uint32_t big32 = 0xffffffffu;
  std::memcpy(&huge[16 + 4], &big32, 4);
  CHECK(images_error(huge).rfind("d.bin: byte 20: error: fatbin entry 0 header size 4294967295 is outside", 0) == 0);
  // The entry's label and its cubin disagree.
  std::string liar = fatbin(fatbin_entry(2, 80, cubin75));
  CHECK(images_error(liar) == "d.bin: byte 44: error: fatbin entry 0 is labelled sm_80, but its cubin is for sm_75");
  // A container with nothing in it, and junk after a container.
  CHECK(images_error(fatbin("")) == "d.bin: byte 0: error: the fatbin holds no images");
  CHECK(images_error(fb + "junk") ==
        "d.bin: byte " + std::to_string(fb.size()) + ": error: expected a fatbin header (magic 50 ed 55 ba), found 6a 75 6e 6b");
}

TEST_CASE("PTX entries equal the function table's kernels and parameter counts", "[device_module]") {
  for (const auto& s : samples_with("device.ptx")) {
    INFO(s);
    auto entries = parse_ptx_entries(test::slurp(test::sample_dir(s) + "/device.ptx"), "device.ptx");
    INFO((entries ? std::string() : entries.error().message));
    REQUIRE(entries);
    auto table = parse_function_table(test::slurp(test::sample_dir(s) + "/device.tvm_meta.json"), "meta");
    REQUIRE(table);
    std::map<std::string, size_t> params;
    for (const auto& e : *entries) {
      params[e.name] = e.param_types.size();
      const FunctionInfo* fi = table->find(e.name);
      INFO(e.name);
      REQUIRE(fi);
      REQUIRE(e.param_types.size() == fi->arg_types.size());
      for (size_t i = 0; i < fi->arg_types.size(); ++i) {
        // TVM's handles are .u64 pointers; int32 scalars .u32, float32 .f32.
        if (fi->arg_types[i] == "handle") CHECK(e.param_types[i] == ".u64");
        if (fi->arg_types[i] == "int32") CHECK((e.param_types[i] == ".u32" || e.param_types[i] == ".s32"));
        if (fi->arg_types[i] == "float32") CHECK(e.param_types[i] == ".f32");
      }
    }
    CHECK(params.size() == entries->size());
    CHECK(params.size() == table->functions.size());
  }
  auto mlp = parse_ptx_entries(test::slurp(test::sample_dir("mlp") + "/device.ptx"), "device.ptx");
  REQUIRE(mlp);
  REQUIRE(mlp->size() == 6);
  CHECK((*mlp)[0].name == "tvmgen_default_fused_nn_dense_add_nn_relu_2_kernel");
  CHECK((*mlp)[0].param_types == std::vector<std::string>{".u64", ".u64", ".u64", ".u64"});
}

TEST_CASE("PTX entry syntax: attributes, arrays, no list, comments", "[device_module]") {
  std::string text =
      ".version 8.0\n.target sm_80\n.address_size 64\n"
      "// .visible .entry commented_out(\n"
      "/* .entry also_commented( */\n"
      ".func helper(.param .u32 x) { ret; }\n"
      ".visible .entry a(\n  .param .u64 .ptr .global .align 8 a_param_0,\n  .param .align 8 .b8 a_param_1[16],\n"
      "  .param .f32 a_param_2\n)\n.maxntid 256, 1, 1\n{\n  ld.param.u64 %rd1, [a_param_0];\n  ret;\n}\n"
      ".entry b()\n{ ret; }\n"
      ".weak .entry c\n{ ret; }\n";
  auto e = parse_ptx_entries(text, "t.ptx");
  INFO((e ? std::string() : e.error().message));
  REQUIRE(e);
  REQUIRE(e->size() == 3);
  CHECK((*e)[0].name == "a");
  CHECK((*e)[0].param_types == std::vector<std::string>{".u64", ".b8[16]", ".f32"});
  CHECK((*e)[1].name == "b");
  CHECK((*e)[1].param_types.empty());
  CHECK((*e)[2].name == "c");
  CHECK((*e)[2].param_types.empty());
  auto images = list_device_images(text, "t.ptx");
  REQUIRE(images);
  CHECK((*images)[0].arch == "sm_80");
}

TEST_CASE("PTX errors name file:line:col", "[device_module][errors]") {
  auto error_of = [](const std::string& text) {
    auto e = parse_ptx_entries(text, "t.ptx");
    REQUIRE_FALSE(e);
    CHECK(e.error().message.find('\n') == std::string::npos);
    return e.error().message;
  };
  CHECK(error_of(".version 8.0\n/* open\n.entry x()") == "t.ptx:2:1: error: unterminated /* comment");
  CHECK(error_of(".version 8.0\n.entry (") == "t.ptx:2:8: error: expected a kernel name after .entry, got \"(\"");
  CHECK(error_of(".version 8.0\n.entry") ==
        "t.ptx:2:7: error: expected a kernel name after .entry, got the end of the file");
  CHECK(error_of(".version 8.0\n.entry k(\n  .param .u64 p0,\n") ==
        "t.ptx:4:1: error: expected .param in the parameter list of \"k\", got the end of the file");
  CHECK(error_of(".version 8.0\n.entry k(.param .u64") ==
        "t.ptx:2:21: error: unterminated parameter list of \"k\" (got the end of the file)");
  CHECK(error_of(".version 8.0\n.entry k(.param p0)") == "t.ptx:2:17: error: parameter 0 of \"k\" has no type");
  CHECK(error_of(".version 8.0\n.entry k(.param .u32 p0 .param .u32 p1)") ==
        "t.ptx:2:25: error: expected , or ) in the parameter list of \"k\", got \".param\"");
  CHECK(error_of(".version 8.0\n.entry k()\n{}\n.entry k()\n{}\n") == "t.ptx:4:8: error: .entry \"k\" is defined twice");
  CHECK(error_of(".version 8.0\n.file 1 \"unterminated\n") == "t.ptx:2:9: error: unterminated string");
  // A truncated file ends inside a kernel body (found by the bad-input tests).
  CHECK(error_of(".version 8.0\n.entry k()\n{\n  ret;\n") ==
        "t.ptx:3:1: error: this { is never closed (is the file truncated?)");
  CHECK(error_of(".version 8.0\n.entry k()\n{ ret; }\n}\n") == "t.ptx:4:1: error: unbalanced }");

  auto no_target = list_device_images(".version 8.0\n", "t.ptx");
  REQUIRE_FALSE(no_target);
  CHECK(no_target.error().message == "t.ptx: error: no .target directive in the PTX");
  auto bad_target = list_device_images(".version 8.0\n.target foo\n", "t.ptx");
  REQUIRE_FALSE(bad_target);
  CHECK(bad_target.error().message == "t.ptx:2:9: error: expected an architecture (sm_NN) after .target, got \"foo\"");
}

TEST_CASE("a hand-made device blob parses", "[device_module]") {
  auto b = parse_device_blob(with_length(blob_body()), "m.so");
  INFO((b ? std::string() : b.error().message));
  REQUIRE(b);
  CHECK(b->entries == std::vector<std::string>{"GraphExecutorFactory", "_lib", "cuda", "_import_tree"});
  REQUIRE(b->factories.size() == 1);
  CHECK(b->factories[0].graph_json == "{\"nodes\": []}");
  CHECK(b->factories[0].param_names == std::vector<std::string>{"p0", "p1"});
  REQUIRE(b->factories[0].param_blobs.size() == 2);
  CHECK(b->factories[0].param_blobs[0].size() == 32 + 16 + 8 + 24);
  CHECK(b->factories[0].param_blobs[1].size() == 32 + 8 + 8 + 16);
  CHECK(b->factories[0].module_name == "default");
  REQUIRE(b->cuda.size() == 1);
  CHECK(b->cuda[0].format == "cubin");
  CHECK(b->cuda[0].data == "DEVICE-BYTES");
  CHECK(b->cuda[0].table.file == "m.so");
  REQUIRE(b->cuda[0].table.functions.size() == 2);
  const FunctionInfo* k = b->cuda[0].table.find("k_kernel");
  REQUIRE(k);
  CHECK(k->name == "k_kernel");
  CHECK(k->arg_types == std::vector<std::string>{"handle", "handle", "int32"});
  CHECK(k->launch_param_tags == std::vector<std::string>{"blockIdx.x", "threadIdx.x"});
  const FunctionInfo* k1 = b->cuda[0].table.find("k_kernel_1");
  REQUIRE(k1);
  CHECK(k1->launch_param_tags.back() == "tir.use_dyn_shared_memory");
  CHECK(b->import_tree_row_ptr == std::vector<uint64_t>{0, 1, 2, 2});
  CHECK(b->import_tree_child_indices == std::vector<uint64_t>{1, 2});
  // Bytes after the declared length are not part of the blob.
  CHECK(parse_device_blob(with_length(blob_body()) + "tail", "m.so"));
}

TEST_CASE("device blob errors: truncation, garbage, huge counts, unknown keys", "[device_module][errors]") {
  std::string good = with_length(blob_body());
  // Every truncation (with its length fixed up, so the body itself is cut) is one line.
  for (size_t n = 0; n < blob_body().size(); ++n) {
    INFO(n);
    blob_error(with_length(blob_body().substr(0, n)));
  }
  // The length itself says more than there is.
  CHECK(blob_error(good.substr(0, good.size() - 1)) ==
        "m.so: byte 0: error: the blob says it is " + std::to_string(good.size() - 8) + " bytes long, but only " +
            std::to_string(good.size() - 9) + " bytes follow");
  CHECK(blob_error("") == "m.so: byte 0: error: blob ends inside the blob length (8 bytes needed, 0 left)");
  CHECK(blob_error(std::string(64, '\xff')).rfind("m.so: byte 0: error: the blob says it is 18446744073709551615", 0) == 0);

  Bytes huge;
  huge.u64(1ull << 60);
  CHECK(blob_error(with_length(huge.s)) ==
        "m.so: byte 8: error: entry count 1152921504606846976 is more than the 0 bytes left can hold");

  Bytes unknown;
  unknown.u64(1).str("metadata").u64(0);
  CHECK(blob_error(with_length(unknown.s)) ==
        "m.so: byte 16: error: unknown module type key \"metadata\" (blob entries carry no length, so an unknown one "
        "cannot be skipped)");

  Bytes long_key;
  long_key.u64(1).u64(~0ull);
  CHECK(blob_error(with_length(long_key.s)) ==
        "m.so: byte 16: error: the type key of entry 0 is 18446744073709551615 bytes long, but only 0 bytes are left");

  Bytes funcs;
  funcs.u64(1).str("cuda").str("cubin").u64(1ull << 58);
  CHECK(blob_error(with_length(funcs.s)) ==
        "m.so: byte 41: error: cuda module 0: function count 288230376151711744 is more than the 0 bytes left can hold");

  Bytes args;
  args.u64(1).str("cuda").str("cubin").u64(1).str("k").str("").u64(1ull << 62).u64(0).u64(0).u64(0);
  CHECK(blob_error(with_length(args.s)) ==
        "m.so: byte 66: error: function \"k\": argument count 4611686018427387904 is more than the 24 bytes left can "
        "hold");

  Bytes bad_type;
  bad_type.u64(1).str("cuda").str("cubin").u64(1).str("k").str("").u64(1).u32(0x00010009).u64(0).str("");
  CHECK(blob_error(with_length(bad_type.s)) ==
        "m.so: byte 74: error: function \"k\": argument 0 has an invalid type (code 9, bits 0, lanes 1)");

  Bytes bad_tag;
  bad_tag.u64(1).str("cuda").str("cubin").u64(1).str("k").str("").u64(0).u64(1).str("warp.x").str("");
  CHECK(blob_error(with_length(bad_tag.s)).find("unknown launch parameter tag \"warp.x\"") != std::string::npos);

  Bytes dyn_first;
  dyn_first.u64(1).str("cuda").str("cubin").u64(1).str("k").str("").u64(0).u64(2).str("tir.use_dyn_shared_memory").str(
      "blockIdx.x").str("");
  CHECK(blob_error(with_length(dyn_first.s)).find("must be the last launch parameter tag") != std::string::npos);

  Bytes twice;
  twice.u64(1).str("cuda").str("cubin").u64(2).str("k").str("").u64(0).u64(0).str("k").str("").u64(0).u64(0).str("");
  CHECK(blob_error(with_length(twice.s)).find("function \"k\" appears twice") != std::string::npos);

  Bytes params;
  params.u64(1).str("GraphExecutorFactory").str("{}").u64(1ull << 61).u64(1ull << 61);
  CHECK(blob_error(with_length(params.s)).find("parameter count 2305843009213693952 is more than") != std::string::npos);

  Bytes mismatch;
  mismatch.u64(1).str("GraphExecutorFactory").str("{}").u64(1).u64(2).str("a").str("b");
  CHECK(blob_error(with_length(mismatch.s)).find("2 parameter names for 1 parameters") != std::string::npos);

  Bytes bad_array;
  bad_array.u64(1).str("GraphExecutorFactory").str("{}").u64(1).u64(1).str("p0").u64(0x1234).s.append(64, '\0');
  CHECK(blob_error(with_length(bad_array.s)).find("parameter \"p0\": bad NDArray magic") != std::string::npos);

  Bytes overflow;
  overflow.u64(1).str("GraphExecutorFactory").str("{}").u64(1).u64(1).str("p0");
  overflow.u64(kArrayMagic).u64(0).i32(1).i32(0).i32(3).le(2, 1).le(32, 1).le(1, 2);
  overflow.u64(1ull << 40).u64(1ull << 40).u64(1ull << 40).u64(0).str("default");
  CHECK(blob_error(with_length(overflow.s)).find("size of shape overflows 64 bits") != std::string::npos);

  Bytes big_data;
  big_data.u64(1).str("GraphExecutorFactory").str("{}").u64(1).u64(1).str("p0");
  big_data.u64(kArrayMagic).u64(0).i32(1).i32(0).i32(1).le(2, 1).le(32, 1).le(1, 2).u64(1ull << 40).u64(4ull << 40);
  CHECK(blob_error(with_length(big_data.s)).find("4398046511104 data bytes needed, but only 0 bytes are left") !=
        std::string::npos);

  Bytes tree;
  tree.u64(2).str("_lib").str("_import_tree").u64(2).u64(0).u64(1).u64(1).u64(5);
  CHECK(blob_error(with_length(tree.s)).find("the import tree's child index 0 is 5, but there are 1 modules") !=
        std::string::npos);
  Bytes tree_rows;
  tree_rows.u64(2).str("_lib").str("_import_tree").u64(1).u64(0).u64(0);
  CHECK(blob_error(with_length(tree_rows.s)).find("1 row pointers for 1 modules (2 expected)") != std::string::npos);

  Bytes trailing;
  trailing.u64(1).str("_lib").raw("xyz");
  CHECK(blob_error(with_length(trailing.s)) == "m.so: byte 28: error: 3 unexpected bytes after the last entry");

  // Flipping any single byte of a good blob never crashes and never allocates absurdly.
  std::string body = blob_body();
  for (size_t i = 0; i < body.size(); ++i) {
    std::string flipped = body;
    flipped[i] = static_cast<char>(flipped[i] ^ 0xa5);
    auto r = parse_device_blob(with_length(flipped), "m.so");
    if (!r) CHECK(is_byte_diag(r.error().message, "m.so"));
  }
}
