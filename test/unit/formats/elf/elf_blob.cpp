// model.so: __tvm_dev_mblob found with LLVM's object library, parsed, and compared with the
// sample's own graph.json, function table, device binary and params; corrupt copies.
#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "kdflow/formats/device_module.h"
#include "kdflow/formats/elf_symbols.h"
#include "kdflow/formats/function_table.h"
#include "kdflow/formats/graph_json.h"
#include "kdflow/driver/inspect.h"
#include "kdflow/formats/model_library.h"
#include "kdflow/formats/params.h"
#include "test_util.h"

using namespace kdflow;
namespace fs = std::filesystem;

namespace {

struct ModelSo {
  std::string name;
  std::string dir;  ///< the folder holding model.so (and the sample's other files)
};

/// Every sample's model.so: from samples/ when it is there, else from ../shared/samples.
std::vector<ModelSo> model_sos() {
  std::vector<ModelSo> out;
  std::vector<std::string> skipped;
  for (const auto& name : test::sample_names()) {
    std::string dir = test::sample_dir(name);
    if (fs::exists(dir + "/model.so")) {
      out.push_back({name, dir});
      continue;
    }
    std::string shared = test::shared_sample_dir(name);
    if (!shared.empty() && fs::exists(shared + "/model.so"))
      out.push_back({name, shared});
    else if (shared.empty())
      skipped.push_back(name);
  }
  if (!skipped.empty()) {
    std::string list;
    for (const auto& s : skipped) list += " " + s;
    WARN("../shared/samples is absent: model.so of" << list << " skipped (if they have one)");
  }
  return out;
}

void write(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f << bytes;
}

bool one_line_naming(const std::string& m, const std::string& file) {
  return m.rfind(file, 0) == 0 && m.find('\n') == std::string::npos && m.find("error: ") != std::string::npos;
}

uint64_t le(const std::string& b, size_t off, int n) {
  uint64_t v = 0;
  for (int k = 0; k < n; ++k) v |= static_cast<uint64_t>(static_cast<unsigned char>(b[off + k])) << (8 * k);
  return v;
}

void put_le(std::string* b, size_t off, uint64_t v, int n) {
  for (int k = 0; k < n; ++k) (*b)[off + k] = static_cast<char>((v >> (8 * k)) & 0xff);
}

/// File offset of the section header named `name` in an ELF64 file.
size_t section_header(const std::string& elf, const std::string& name) {
  uint64_t shoff = le(elf, 0x28, 8), shentsize = le(elf, 0x3a, 2), shnum = le(elf, 0x3c, 2), shstrndx = le(elf, 0x3e, 2);
  REQUIRE(shoff + shnum * shentsize <= elf.size());
  uint64_t strtab = le(elf, shoff + shstrndx * shentsize + 0x18, 8);
  for (uint64_t i = 0; i < shnum; ++i) {
    size_t hdr = shoff + i * shentsize;
    uint64_t name_off = strtab + le(elf, hdr, 4);
    if (elf.compare(name_off, name.size() + 1, name.c_str(), name.size() + 1) == 0) return hdr;
  }
  FAIL("no section " << name);
  return 0;
}

std::string inspect(const std::string& path, int* code) {
  std::ostringstream out, err;
  *code = run_inspect_command(path, out, err);
  INFO(err.str());
  return out.str() + err.str();
}

}  // namespace

TEST_CASE("every model.so's blob matches the sample's graph.json, function table, binary and params", "[model_so]") {
  auto sos = model_sos();
  REQUIRE(sos.size() >= 3);  // attention, sort_scan, sort_scan_v08 are in the repository
  for (const auto& so : sos) {
    INFO(so.name << " in " << so.dir);
    std::string bytes = test::slurp(so.dir + "/model.so");
    auto blob = read_elf_symbol(bytes, "model.so", "__tvm_dev_mblob");
    INFO((blob ? std::string() : blob.error().message));
    REQUIRE(blob);
    REQUIRE(blob->size() >= 8);
    CHECK(le(*blob, 0, 8) + 8 == blob->size());

    auto b = parse_device_blob(*blob, "model.so");
    INFO((b ? std::string() : b.error().message));
    REQUIRE(b);
    CHECK(b->entries == std::vector<std::string>{"GraphExecutorFactory", "_lib", "cuda", "_import_tree"});
    CHECK(b->import_tree_row_ptr == std::vector<uint64_t>{0, 1, 2, 2});
    CHECK(b->import_tree_child_indices == std::vector<uint64_t>{1, 2});

    // The graph: the same JSON as graph.json, and kdflow's reader accepts it.
    REQUIRE(b->factories.size() == 1);
    const auto& f = b->factories[0];
    CHECK(f.module_name == "default");
    CHECK(nlohmann::json::parse(f.graph_json) == nlohmann::json::parse(test::slurp(so.dir + "/graph.json")));
    CHECK(parse_graph_json(f.graph_json, "graph.json"));

    // The function table: the same kernels, arg types and tags as device.tvm_meta.json.
    REQUIRE(b->cuda.size() == 1);
    const auto& m = b->cuda[0];
    auto meta = parse_function_table(test::slurp(so.dir + "/device.tvm_meta.json"), "meta");
    REQUIRE(meta);
    REQUIRE(m.table.functions.size() == meta->functions.size());
    for (const auto& [name, fi] : meta->functions) {
      INFO(name);
      const FunctionInfo* got = m.table.find(name);
      REQUIRE(got);
      CHECK(got->name == fi.name);
      CHECK(got->arg_types == fi.arg_types);
      CHECK(got->launch_param_tags == fi.launch_param_tags);
    }

    // The binary: TVM 0.14's fatbin (labelled "cubin") is device.cubin; TVM 0.8's PTX is device.ptx.
    if (fs::exists(so.dir + "/device.cubin")) {
      CHECK(m.format == "cubin");
      CHECK(detect_binary_format(m.data) == BinaryFormat::Fatbin);
      CHECK(m.data == test::slurp(so.dir + "/device.cubin"));
      auto images = list_device_images(m.data, "blob");
      REQUIRE(images);
      REQUIRE(images->size() == 1);
      CHECK((*images)[0].arch == "sm_90");
    } else {
      CHECK(m.format == "ptx");
      CHECK(detect_binary_format(m.data) == BinaryFormat::Ptx);
      CHECK(m.data == test::slurp(so.dir + "/device.ptx"));
    }

    // The params: the names of params.bin, and each array byte for byte.
    std::string assembled = assemble_params_file(f.param_names, f.param_blobs);
    auto from_blob = parse_params(assembled, "blob params");
    INFO((from_blob ? std::string() : from_blob.error().message));
    REQUIRE(from_blob);
    CHECK(from_blob->arrays.size() == f.param_names.size());
    if (fs::exists(so.dir + "/params.bin")) {
      std::string pbytes = test::slurp(so.dir + "/params.bin");
      auto p = parse_params(pbytes, "params.bin");
      REQUIRE(p);
      std::set<std::string> want, got(f.param_names.begin(), f.param_names.end());
      for (const auto& a : p->arrays) want.insert(a.name);
      CHECK(got == want);
      std::map<std::string, const ParamArray*> by_name;
      for (const auto& a : from_blob->arrays) by_name[a.name] = &a;
      for (const auto& a : p->arrays) {
        INFO(a.name);
        auto it = by_name.find(a.name);
        REQUIRE(it != by_name.end());
        CHECK(it->second->shape == a.shape);
        CHECK(it->second->dtype == a.dtype);
        CHECK(assembled.compare(it->second->data_offset, it->second->nbytes, pbytes, a.data_offset, a.nbytes) == 0);
      }
    } else {
      WARN(so.name << ": no params.bin beside model.so: names not compared");
    }

    auto lib = load_model_library(so.dir + "/model.so");
    INFO((lib ? std::string() : lib.error().message));
    REQUIRE(lib);
    CHECK(lib->graph_json == f.graph_json);
    CHECK(lib->device_binary == m.data);
    CHECK(lib->device_label == m.format);
    CHECK(lib->device_format == detect_binary_format(m.data));
    CHECK(lib->param_names == f.param_names);
    CHECK(lib->param_blobs == f.param_blobs);
    CHECK(lib->module_name == "default");
    CHECK(lib->table.functions.size() == meta->functions.size());
  }
}

TEST_CASE("kdflow inspect describes model.so, fatbin and PTX files", "[model_so]") {
  int code = -1;
  std::string att = inspect(test::sample_dir("attention") + "/model.so", &code);
  CHECK(code == 0);
  CHECK(att.find("model.so: TVM exported library, __tvm_dev_mblob (TVM up to 0.20) of 892590 bytes\n") == 0);
  CHECK(att.find("entries: 4 (GraphExecutorFactory, _lib, cuda, _import_tree)\n") != std::string::npos);
  CHECK(att.find("imports: 0 -> 1, 1 -> 2\n") != std::string::npos);
  CHECK(att.find("module 0: GraphExecutorFactory \"default\"\n") != std::string::npos);
  CHECK(att.find("  params: 7 (") != std::string::npos);
  CHECK(att.find("    p0: float32 [") != std::string::npos);
  CHECK(att.find("module 2: cuda\n  format: labelled \"cubin\", detected fatbin, 87776 bytes\n  images: cubin sm_90\n"
                 "  kernels: 27\n") != std::string::npos);
  int again = -1;
  CHECK(inspect(test::sample_dir("attention") + "/model.so", &again) == att);

  std::string v08 = inspect(test::sample_dir("sort_scan_v08") + "/model.so", &code);
  CHECK(code == 0);
  CHECK(v08.find("  format: labelled \"ptx\", detected ptx, 111262 bytes\n  images: ptx sm_90\n  kernels: 18\n") !=
        std::string::npos);
  CHECK(v08.find("  ptx entries: 18, matching the function table\n") != std::string::npos);
  CHECK(v08.find("  params: 0 (0 bytes)\n") != std::string::npos);

  std::string fb = inspect(test::sample_dir("mlp") + "/device.cubin", &code);
  CHECK(code == 0);
  CHECK(fb == "device.cubin: fatbin, 25200 bytes\nimages: 1\n  cubin sm_90\n");
  std::string ptx = inspect(test::sample_dir("mlp") + "/device.ptx", &code);
  CHECK(code == 0);
  CHECK(ptx.find("device.ptx: ptx, 33015 bytes\nimages: 1\n  ptx sm_90\nentries: 6\n"
                 "  tvmgen_default_fused_nn_dense_add_nn_relu_2_kernel(.u64, .u64, .u64, .u64)\n") == 0);

  // The cubin inside the fatbin.
  std::string fatbin = test::slurp(test::sample_dir("mlp") + "/device.cubin");
  std::string dir = test::temp_dir();
  write(dir + "/inner.cubin", fatbin.substr(16 + 64, le(fatbin, 16 + 8, 8)));
  CHECK(inspect(dir + "/inner.cubin", &code) == "inner.cubin: cubin, 25120 bytes\nimages: 1\n  cubin sm_90\n");
  CHECK(code == 0);
}

TEST_CASE("corrupt and foreign files give one-line errors", "[model_so][errors]") {
  std::string bytes = test::slurp(test::sample_dir("sort_scan") + "/model.so");
  std::string dir = test::temp_dir();
  int code = -1;

  auto not_elf = read_elf_symbol("garbage, not an ELF file", "x.so", "__tvm_dev_mblob");
  REQUIRE_FALSE(not_elf);
  CHECK(not_elf.error().message == "x.so: error: not an ELF file (no \\x7fELF magic)");

  // Cut short: the section headers (at the end) are gone.
  for (size_t n : {size_t(4), size_t(64), size_t(1000), bytes.size() / 2, bytes.size() - 1}) {
    INFO(n);
    auto r = read_elf_symbol(bytes.substr(0, n), "x.so", "__tvm_dev_mblob");
    REQUIRE_FALSE(r);
    INFO(r.error().message);
    CHECK(one_line_naming(r.error().message, "x.so: error: "));
  }

  // No such symbol: a renamed one, and a cubin.
  std::string renamed = bytes;
  for (size_t p = renamed.find("__tvm_dev_mblob"); p != std::string::npos; p = renamed.find("__tvm_dev_mblob", p))
    renamed[p + 10] = 'x';
  auto none = read_elf_symbol(renamed, "x.so", "__tvm_dev_mblob");
  REQUIRE_FALSE(none);
  CHECK(none.error().message ==
        "x.so: error: no symbol \"__tvm_dev_mblob\" (not a library written by TVM's export_library?)");
  std::string fatbin = test::slurp(test::sample_dir("mlp") + "/device.cubin");
  std::string cubin = fatbin.substr(16 + 64, le(fatbin, 16 + 8, 8));
  auto in_cubin = read_elf_symbol(cubin, "c.cubin", "__tvm_dev_mblob");
  REQUIRE_FALSE(in_cubin);
  CHECK(in_cubin.error().message.rfind("c.cubin: error: no symbol \"__tvm_dev_mblob\"", 0) == 0);
  auto other = read_elf_symbol(bytes, "x.so", "no_such_symbol");
  REQUIRE_FALSE(other);
  CHECK(other.error().message == "x.so: error: no symbol \"no_such_symbol\"");

  // The blob's length points past its section.
  auto blob = read_elf_symbol(bytes, "x.so", "__tvm_dev_mblob");
  REQUIRE(blob);
  size_t at = bytes.find(blob->substr(0, 64));
  REQUIRE(at != std::string::npos);
  std::string long_blob = bytes;
  put_le(&long_blob, at, 1ull << 40, 8);
  auto too_long = read_elf_symbol(long_blob, "x.so", "__tvm_dev_mblob");
  REQUIRE_FALSE(too_long);
  CHECK(too_long.error().message.rfind(
            "x.so: error: symbol \"__tvm_dev_mblob\" says its blob is 1099511627776 bytes long, but its section holds "
            "only ",
            0) == 0);

  // The symbol lies outside its (shrunk) section.
  std::string shrunk = bytes;
  put_le(&shrunk, section_header(shrunk, ".rodata") + 0x20, 16, 8);
  auto outside = read_elf_symbol(shrunk, "x.so", "__tvm_dev_mblob");
  REQUIRE_FALSE(outside);
  CHECK(outside.error().message.rfind("x.so: error: symbol \"__tvm_dev_mblob\" (address 0x42e0) lies outside its section", 0) ==
        0);

  // A symbol table whose size says billions of entries is refused, not iterated.
  std::string big_symtab = bytes;
  put_le(&big_symtab, section_header(big_symtab, ".symtab") + 0x20, 1ull << 40, 8);
  auto symtab = read_elf_symbol(big_symtab, "x.so", "__tvm_dev_mblob");
  REQUIRE_FALSE(symtab);
  CHECK(symtab.error().message.rfind("x.so: error: not a valid ELF file: its symbol table: ", 0) == 0);
  CHECK(one_line_naming(symtab.error().message, "x.so: error: "));

  // A blob whose entry count is absurd: load_model_library and inspect say so on one line.
  std::string huge = bytes;
  put_le(&huge, at + 8, 1ull << 60, 8);
  write(dir + "/huge.so", huge);
  auto lib = load_model_library(dir + "/huge.so");
  REQUIRE_FALSE(lib);
  CHECK(lib.error().code == ExitCode::DataError);
  CHECK(lib.error().message == dir + "/huge.so(__tvm_dev_mblob): byte 8: error: entry count 1152921504606846976 is more "
                                     "than the " + std::to_string(blob->size() - 16) + " bytes left can hold");
  std::string msg = inspect(dir + "/huge.so", &code);
  CHECK(code == 65);
  CHECK(msg == lib.error().message + "\n");

  // Every single-byte corruption of the blob is handled: parsed or refused on one line.
  for (size_t i = 8; i < blob->size(); i += 97) {
    std::string c = *blob;
    c[i] = static_cast<char>(c[i] ^ 0x5a);
    auto r = parse_device_blob(c, "b");
    if (!r) CHECK(one_line_naming(r.error().message, "b: byte "));
  }

  // A cubin is not a model.so; missing and unknown files.
  write(dir + "/c.cubin", cubin);
  auto cub = load_model_library(dir + "/c.cubin");
  REQUIRE_FALSE(cub);
  CHECK(cub.error().message == dir + "/c.cubin: error: this is a cubin, not a model.so written by TVM's export_library");
  msg = inspect(dir + "/missing.so", &code);
  CHECK(code == 66);
  CHECK(msg.find('\n') == msg.size() - 1);
  write(dir + "/junk.bin", "junk junk junk");
  msg = inspect(dir + "/junk.bin", &code);
  CHECK(code == 65);
  CHECK(msg == dir + "/junk.bin: error: not a TVM model.so, cubin, fatbin or PTX file (recognised by content, not by "
                     "name)\n");
  write(dir + "/renamed.so", renamed);
  msg = inspect(dir + "/renamed.so", &code);
  CHECK(code == 65);
  CHECK(msg.find("renamed.so: error: no symbol \"__tvm_ffi__library_bin\" (TVM 0.22+), \"__tvm_ffi_library_bin\" (0.21) "
                 "or \"__tvm_dev_mblob\"") != std::string::npos);
}
