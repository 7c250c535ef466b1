// device_module.cpp — device binaries as bytes: format detection by magic, the images a
// cubin / fatbin / PTX holds, PTX `.entry` signatures, and TVM's `__tvm_dev_mblob`.
//
// Layouts (little-endian), as read from the samples and public tools:
//  * cubin: an ELF file with e_machine EM_CUDA (190). The SM version sits in e_flags:
//    bits 0-7 in the original CUDA ABI (EI_OSABI 0x33, ABI version 7; e_flags like
//    0x00500550 for sm_80), bits 8-15 in the CUDA 12.8+ ABI (EI_OSABI 0x41, ABI
//    version 8; the samples' sm_90 cubins carry e_flags 0x06005a04).
//  * fatbin (nvcc --fatbin): one or more containers {u32 magic 0xBA55ED50, u16 version,
//    u16 header size, u64 size of the entries}, each followed by entries: u16 kind (1 PTX,
//    2 ELF), u16 flags, u32 header size, u64 payload size, u32 compressed size, u32 ?,
//    u16 minor, u16 major, u32 arch (90 = sm_90), u32 name offset, u32 name length,
//    u64 flags (0x2000 compressed), ... — the header size (64 for ELF, 80 for PTX
//    entries) says where the payload starts.
//  * PTX: text whose first directive is `.version`; `.target sm_NN` names the arch.
//  * __tvm_dev_mblob: a dmlc stream (src/runtime/library_module.cc ProcessModuleBlob).
// Every count and length read from input is checked against the bytes left before it is
// used to size anything.
#include "kdflow/formats/device_module.h"

#include <fmt/format.h>

#include <cstring>
#include <set>

#include "byte_reader.h"
#include "json_read.h"  // detail::quote_input
#include "kdflow/support/dtype.h"

namespace kdflow {
namespace {

using detail::quote_input;

constexpr uint32_t kFatbinMagic = 0xBA55ED50u;
constexpr uint16_t kEmCuda = 190;
/// Bytes of an NDArray record before its shape: two u64, three i32, the dtype.
constexpr uint64_t kArrayHeaderBytes = 8 + 8 + 4 + 4 + 4 + 4;
/// Smallest NDArray record: header, no dimensions, i64 nbytes, no data.
constexpr uint64_t kMinArrayBytes = kArrayHeaderBytes + 8;
/// Smallest FunctionInfo map item: key, name, arg count and tag count (u64 each).
constexpr uint64_t kMinFunctionInfoBytes = 4 * 8;
/// Fatbin entry headers are 64 bytes (ELF) or 80 (PTX); the fields read end at 48.
constexpr uint64_t kMinFatbinEntryHeader = 64;
constexpr uint64_t kFatbinFlagCompressed = 0x2000;

/// Little-endian unsigned integer of `n` (≤ 8) bytes at `off`; the caller checks bounds.
uint64_t le_at(std::string_view b, uint64_t off, int n) {
  uint64_t v = 0;
  for (int k = 0; k < n; ++k) v |= static_cast<uint64_t>(static_cast<unsigned char>(b[off + k])) << (8 * k);
  return v;
}

using detail::byte_error;

std::string hex_prefix(std::string_view b) {
  std::string out;
  for (size_t i = 0; i < b.size() && i < 4; ++i) out += fmt::format("{}{:02x}", i ? " " : "", static_cast<unsigned char>(b[i]));
  return out.empty() ? "nothing" : out;
}

// --- PTX tokens -----------------------------------------------------------------

struct Token {
  std::string_view text;
  unsigned line = 1, col = 1;
  bool string = false;
};

bool is_word_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '$' ||
         c == '%' || c == '.';
}

/// Splits PTX text into words (identifiers, directives, numbers, instruction names with
/// their dotted suffixes), strings and single punctuation characters. Comments (`//`,
/// `/* */`) are skipped. `max_tokens` stops early (0: all).
class PtxLexer {
 public:
  PtxLexer(std::string_view text, const std::string& file) : text_(text), file_(file) {}

  /// The next token, or an empty one at the end of the text; errors for unterminated
  /// comments and strings.
  Expected<Token> next() {
    for (;;) {
      if (pos_ >= text_.size()) return Token{std::string_view(), line_, col_, false};
      char c = text_[pos_];
      if (c == '\n') {
        advance(1);
        continue;
      }
      if (c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v') {
        advance(1);
        continue;
      }
      if (c == '/' && pos_ + 1 < text_.size() && text_[pos_ + 1] == '/') {
        while (pos_ < text_.size() && text_[pos_] != '\n') advance(1);
        continue;
      }
      if (c == '/' && pos_ + 1 < text_.size() && text_[pos_ + 1] == '*') {
        unsigned l = line_, cl = col_;
        size_t end = text_.find("*/", pos_ + 2);
        if (end == std::string_view::npos) return source_error(file_, l, cl, "unterminated /* comment");
        advance(end + 2 - pos_);
        continue;
      }
      break;
    }
    Token t{std::string_view(), line_, col_, false};
    size_t start = pos_;
    char c = text_[pos_];
    if (c == '"') {
      size_t i = pos_ + 1;
      while (i < text_.size() && text_[i] != '"' && text_[i] != '\n') i += text_[i] == '\\' ? 2 : 1;
      if (i >= text_.size() || text_[i] != '"') return source_error(file_, t.line, t.col, "unterminated string");
      advance(i + 1 - pos_);
      t.string = true;
    } else if (is_word_char(c)) {
      size_t i = pos_;
      while (i < text_.size() && is_word_char(text_[i])) ++i;
      advance(i - pos_);
    } else {
      advance(1);
    }
    t.text = text_.substr(start, pos_ - start);
    return t;
  }

 private:
  void advance(size_t n) {
    for (size_t k = 0; k < n && pos_ < text_.size(); ++k, ++pos_) {
      if (text_[pos_] == '\n') {
        ++line_;
        col_ = 1;
      } else {
        ++col_;
      }
    }
  }

  std::string_view text_;
  const std::string& file_;
  size_t pos_ = 0;
  unsigned line_ = 1, col_ = 1;
};

/// The PTX fundamental types a kernel parameter may have.
bool is_ptx_type(std::string_view t) {
  static const std::set<std::string_view> kTypes = {
      ".b8",  ".b16", ".b32", ".b64", ".b128", ".u8",   ".u16",   ".u32",       ".u64",       ".s8",
      ".s16", ".s32", ".s64", ".f16", ".f16x2", ".bf16", ".bf16x2", ".f32",     ".f64",       ".pred",
      ".texref", ".samplerref", ".surfref"};
  return kTypes.count(t) != 0;
}

/// `[a-zA-Z][a-zA-Z0-9_$]*` or `[_$%][a-zA-Z0-9_$]+` (PTX ISA, identifiers).
bool is_ptx_identifier(std::string_view t) {
  if (t.empty() || t[0] == '.' || (t[0] >= '0' && t[0] <= '9') || !is_word_char(t[0])) return false;
  for (char c : t)
    if (c == '.' || !is_word_char(c)) return false;
  return true;
}

/// "sm_90", "sm_90a", "sm_100f": what `.target` may name as the architecture.
bool is_sm_name(std::string_view t) {
  if (t.size() < 4 || t.substr(0, 3) != "sm_") return false;
  size_t i = 3;
  while (i < t.size() && t[i] >= '0' && t[i] <= '9') ++i;
  if (i == 3 || i - 3 > 4) return false;
  if (i == t.size()) return true;
  return i + 1 == t.size() && t[i] >= 'a' && t[i] <= 'z';
}

/// True when the first token of `text`, comments skipped, is the `.version` directive
/// (PTX requires it first). Only a prefix is looked at; a NUL byte before it means binary.
bool looks_like_ptx(std::string_view bytes) {
  std::string_view head = bytes.substr(0, 1 << 16);
  size_t nul = head.find('\0');
  static const std::string kFile = "<ptx>";
  PtxLexer lex(head.substr(0, nul == std::string_view::npos ? head.size() : nul), kFile);
  auto t = lex.next();
  return t && t->text == ".version";
}

// --- cubin ----------------------------------------------------------------------

/// The SM version of the cubin at bytes[base...] (an ELF file with EM_CUDA). `file`
/// and `base` place diagnostics.
Expected<unsigned> cubin_sm(std::string_view elf, const std::string& file, uint64_t base) {
  if (elf.size() < 52) return byte_error(file, base, fmt::format("ELF header truncated ({} bytes, at least 52 needed)", elf.size()));
  if (std::memcmp(elf.data(), "\x7f" "ELF", 4) != 0) return byte_error(file, base, "not an ELF file (no \\x7fELF magic)");
  unsigned char cls = static_cast<unsigned char>(elf[4]), data = static_cast<unsigned char>(elf[5]);
  if (data != 1) return byte_error(file, base + 5, fmt::format("ELF data encoding {} is not little-endian (1)", data));
  uint64_t flags_at = 0;
  if (cls == 2) {
    if (elf.size() < 64)
      return byte_error(file, base, fmt::format("ELF64 header truncated ({} bytes, 64 needed)", elf.size()));
    flags_at = 0x30;
  } else if (cls == 1) {
    flags_at = 0x24;
  } else {
    return byte_error(file, base + 4, fmt::format("ELF class {} is neither 32-bit (1) nor 64-bit (2)", cls));
  }
  uint64_t machine = le_at(elf, 18, 2);
  if (machine != kEmCuda)
    return byte_error(file, base + 18, fmt::format("ELF machine {} is not EM_CUDA ({}): not a cubin", machine, kEmCuda));
  uint64_t flags = le_at(elf, flags_at, 4);
  unsigned char osabi = static_cast<unsigned char>(elf[7]), abi_version = static_cast<unsigned char>(elf[8]);
  // CUDA 12.8+ writes EI_OSABI 0x41 / ABI version 8 and moves the SM to bits 8-15.
  bool v2 = osabi == 0x41 || abi_version >= 8;
  unsigned sm = static_cast<unsigned>(v2 ? (flags >> 8) & 0xff : flags & 0xff);
  if (sm < 10)
    return byte_error(file, base + flags_at,
                      fmt::format("ELF e_flags {:#010x} name no SM version (ABI {:#04x} version {})", flags, osabi,
                                  abi_version));
  return sm;
}

// --- fatbin ---------------------------------------------------------------------

Expected<std::vector<DeviceImage>> fatbin_images(std::string_view b, const std::string& file) {
  std::vector<DeviceImage> out;
  uint64_t pos = 0;
  size_t index = 0;
  while (pos < b.size()) {
    uint64_t left = b.size() - pos;
    if (left < 4 || le_at(b, pos, 4) != kFatbinMagic) {
      // Sections holding fatbins are padded with zeros; anything else is unexplained.
      if (pos > 0 && b.find_first_not_of('\0', pos) == std::string_view::npos) break;
      return byte_error(file, pos, fmt::format("expected a fatbin header (magic 50 ed 55 ba), found {}", hex_prefix(b.substr(pos))));
    }
    if (left < 16) return byte_error(file, pos, fmt::format("fatbin header truncated (16 bytes needed, {} left)", left));
    uint64_t version = le_at(b, pos + 4, 2), header_size = le_at(b, pos + 6, 2), fat_size = le_at(b, pos + 8, 8);
    if (version != 1) return byte_error(file, pos + 4, fmt::format("fatbin version {} is not 1", version));
    if (header_size < 16 || header_size > left)
      return byte_error(file, pos + 6, fmt::format("fatbin header size {} is outside 16..{}", header_size, left));
    if (fat_size > left - header_size)
      return byte_error(file, pos + 8,
                        fmt::format("fatbin says {} bytes of entries, but only {} bytes are left", fat_size, left - header_size));
    uint64_t p = pos + header_size, end = p + fat_size;
    while (p < end) {
      uint64_t room = end - p;
      if (room < kMinFatbinEntryHeader)
        return byte_error(file, p, fmt::format("fatbin entry {} header truncated ({} bytes needed, {} left)", index,
                                               kMinFatbinEntryHeader, room));
      uint64_t kind = le_at(b, p, 2), hs = le_at(b, p + 4, 4), size = le_at(b, p + 8, 8);
      uint64_t compressed_size = le_at(b, p + 16, 4), arch = le_at(b, p + 28, 4), flags = le_at(b, p + 40, 8);
      if (hs < kMinFatbinEntryHeader || hs > room)
        return byte_error(file, p + 4, fmt::format("fatbin entry {} header size {} is outside {}..{}", index, hs,
                                                   kMinFatbinEntryHeader, room));
      if (size > room - hs)
        return byte_error(file, p + 8, fmt::format("fatbin entry {} payload is {} bytes, but only {} bytes are left",
                                                   index, size, room - hs));
      if (arch < 10 || arch > 9999)
        return byte_error(file, p + 28, fmt::format("fatbin entry {} names no SM version (arch {})", index, arch));
      bool compressed = compressed_size != 0 || (flags & kFatbinFlagCompressed) != 0;
      DeviceImage img;
      img.arch = fmt::format("sm_{}", arch);
      if (kind == 2) {
        img.kind = "cubin";
        std::string_view payload = b.substr(p + hs, size);
        if (!compressed) {
          auto sm = cubin_sm(payload, file, p + hs);
          if (!sm) return sm.error();
          if (*sm != arch)
            return byte_error(file, p + 28, fmt::format("fatbin entry {} is labelled sm_{}, but its cubin is for sm_{}",
                                                        index, arch, *sm));
        }
      } else if (kind == 1) {
        img.kind = "ptx";
      } else {
        img.kind = fmt::format("kind {}", kind);
      }
      out.push_back(std::move(img));
      p += hs + size;
      ++index;
    }
    pos = end;
  }
  if (out.empty()) return byte_error(file, 0, "the fatbin holds no images");
  return out;
}

// --- PTX ------------------------------------------------------------------------

Expected<std::vector<DeviceImage>> ptx_images(std::string_view text, const std::string& file) {
  PtxLexer lex(text, file);
  for (;;) {
    auto t = lex.next();
    if (!t) return t.error();
    if (t->text.empty()) return file_error(file, "no .target directive in the PTX");
    if (t->text != ".target") continue;
    auto arch = lex.next();
    if (!arch) return arch.error();
    if (!is_sm_name(arch->text))
      return source_error(file, arch->line, arch->col,
                          "expected an architecture (sm_NN) after .target, got " +
                              (arch->text.empty() ? std::string("the end of the file") : quote_input(std::string(arch->text))));
    return std::vector<DeviceImage>{DeviceImage{"ptx", std::string(arch->text)}};
  }
}

// --- __tvm_dev_mblob ------------------------------------------------------------

class BlobReader : private detail::ByteReader {
 public:
  BlobReader(std::string_view bytes, const std::string& file) : ByteReader(bytes, file, "blob") {}

  Expected<DeviceBlob> read() {
    uint64_t len = 0;
    if (!read_u64(&len, "the blob length")) return error_;
    if (len > left())
      return err(0, fmt::format("the blob says it is {} bytes long, but only {} bytes follow", len, left()));
    end_ = pos_ + len;
    uint64_t at = pos_, n = 0;
    if (!read_u64(&n, "the entry count")) return error_;
    if (n > left() / 8) return err(at, fmt::format("entry count {} is more than the {} bytes left can hold", n, left()));
    size_t modules = 0;
    bool have_tree = false;
    for (uint64_t i = 0; i < n; ++i) {
      at = pos_;
      std::string key;
      if (!read_string(&key, fmt::format("the type key of entry {}", i))) return error_;
      out_.entries.push_back(key);
      if (key == "_lib") {
        ++modules;
      } else if (key == "_import_tree") {
        if (have_tree) return err(at, "a second \"_import_tree\" entry");
        have_tree = true;
        tree_at_ = at;
        if (!read_u64_vector(&out_.import_tree_row_ptr, "the import tree's row pointers") ||
            !read_u64_vector(&out_.import_tree_child_indices, "the import tree's child indices"))
          return error_;
      } else if (key == "cuda") {
        ++modules;
        if (!read_cuda()) return error_;
      } else if (key == "GraphExecutorFactory") {
        ++modules;
        if (!read_factory()) return error_;
      } else if (key == "relax.VMExecutable") {
        // VMExecutable::SaveToBinary: the serialized executable as one string (u64 length,
        // bytes), parsed later by parse_vm_executable.
        ++modules;
        uint64_t len_at = pos_, len = 0;
        if (!read_u64(&len, "the length of the relax.VMExecutable entry")) return error_;
        if (len > left())
          return err(len_at, fmt::format("the relax.VMExecutable entry is {} bytes long, but only {} bytes are left",
                                         len, left()));
        out_.vm_executables.emplace_back(bytes_.data() + len_at, 8 + len);
        pos_ += len;
      } else {
        return err(at, "unknown module type key " + quote_input(key) +
                           " (blob entries carry no length, so an unknown one cannot be skipped)");
      }
    }
    if (pos_ != end_) return err(pos_, fmt::format("{} unexpected bytes after the last entry", end_ - pos_));
    if (have_tree && !check_tree(modules)) return error_;
    return std::move(out_);
  }

 private:
  bool read_u64_vector(std::vector<uint64_t>* out, const std::string& what) {
    uint64_t at = pos_, n = 0;
    if (!read_u64(&n, "the length of " + what)) return false;
    if (n > left() / 8) return fail(at, fmt::format("{} count {} is more than the {} bytes left can hold", what, n, left()));
    out->reserve(n);
    for (uint64_t i = 0; i < n; ++i) {
      uint64_t v = 0;
      read_u64(&v, what);
      out->push_back(v);
    }
    return true;
  }

  /// `cuda`: string fmt; map<string, FunctionInfo>; string data.
  bool read_cuda() {
    DeviceBlob::CudaModule m;
    m.table.file = file_;
    size_t index = out_.cuda.size();
    std::string what = fmt::format("cuda module {}", index);
    if (!read_string(&m.format, "the format of " + what)) return false;
    uint64_t at = pos_, n = 0;
    if (!read_u64(&n, "the function count of " + what)) return false;
    if (n > left() / kMinFunctionInfoBytes)
      return fail(at, fmt::format("{}: function count {} is more than the {} bytes left can hold", what, n, left()));
    for (uint64_t i = 0; i < n; ++i) {
      at = pos_;
      std::string key;
      FunctionInfo fi;
      if (!read_string(&key, fmt::format("the name of function {} of {}", i, what))) return false;
      if (key.empty()) return fail(at, fmt::format("{}: function {} has an empty name", what, i));
      if (m.table.functions.count(key)) return fail(at, fmt::format("{}: function {} appears twice", what, quote_input(key)));
      if (!read_function(key, &fi)) return false;
      m.table.functions.emplace(key, std::move(fi));
    }
    if (!read_string(&m.data, "the binary of " + what)) return false;
    out_.cuda.push_back(std::move(m));
    return true;
  }

  /// FunctionInfo: string name; vector<DLDataType> arg_types; vector<string> launch_param_tags.
  bool read_function(const std::string& key, FunctionInfo* fi) {
    std::string what = "function " + quote_input(key);
    std::string name;
    if (!read_string(&name, "the name field of " + what)) return false;
    fi->name = key;  // the key is the kernel's symbol; TVM leaves the name field empty
    uint64_t at = pos_, n = 0;
    if (!read_u64(&n, "the argument count of " + what)) return false;
    if (n > left() / 4)
      return fail(at, fmt::format("{}: argument count {} is more than the {} bytes left can hold", what, n, left()));
    fi->arg_types.reserve(n);
    for (uint64_t i = 0; i < n; ++i) {
      at = pos_;
      uint64_t v = 0;
      read_le(4, "an argument type", &v);
      DType t{static_cast<uint8_t>(v & 0xff), static_cast<uint8_t>((v >> 8) & 0xff), static_cast<uint16_t>(v >> 16)};
      auto round_trip = parse_dtype(dtype_to_string(t));
      if (!round_trip || *round_trip != t)
        return fail(at, fmt::format("{}: argument {} has an invalid type (code {}, bits {}, lanes {})", what, i, t.code,
                                    t.bits, t.lanes));
      fi->arg_types.push_back(dtype_to_string(t));
    }
    at = pos_;
    if (!read_u64(&n, "the launch tag count of " + what)) return false;
    if (n > left() / 8)
      return fail(at, fmt::format("{}: launch tag count {} is more than the {} bytes left can hold", what, n, left()));
    for (uint64_t i = 0; i < n; ++i) {
      at = pos_;
      std::string tag;
      if (!read_string(&tag, fmt::format("launch tag {} of {}", i, what))) return false;
      if (!is_known_launch_tag(tag))
        return fail(at, fmt::format("{}: unknown launch parameter tag {} (expected blockIdx.x/y/z, threadIdx.x/y/z or "
                                    "tir.use_dyn_shared_memory)",
                                    what, quote_input(tag)));
      // Thread tags repeat for virtual threads (the last value wins); the dynamic
      // shared memory tag must come once, last (TVM's LaunchParamConfig).
      if (tag == "tir.use_dyn_shared_memory" && i + 1 != n)
        return fail(at, fmt::format("{}: \"tir.use_dyn_shared_memory\" must be the last launch parameter tag", what));
      fi->launch_param_tags.push_back(std::move(tag));
    }
    return true;
  }

  /// `GraphExecutorFactory`: string graph_json; u64 n; vector<string> names; n NDArrays;
  /// string module_name.
  bool read_factory() {
    DeviceBlob::GraphFactory f;
    std::string what = fmt::format("graph executor factory {}", out_.factories.size());
    if (!read_string(&f.graph_json, "the graph JSON of " + what)) return false;
    uint64_t n_at = pos_, n = 0, n_names = 0;
    if (!read_u64(&n, "the parameter count of " + what)) return false;
    uint64_t at = pos_;
    if (!read_u64(&n_names, "the parameter name count of " + what)) return false;
    if (n_names != n)
      return fail(at, fmt::format("{}: {} parameter names for {} parameters", what, n_names, n));
    // Each name takes 8 bytes at least and each array kMinArrayBytes.
    if (n > left() / (8 + kMinArrayBytes))
      return fail(n_at, fmt::format("{}: parameter count {} is more than the {} bytes left can hold", what, n, left()));
    f.param_names.reserve(n);
    std::set<std::string> seen;
    for (uint64_t i = 0; i < n; ++i) {
      at = pos_;
      std::string name;
      if (!read_string(&name, fmt::format("parameter name {} of {}", i, what))) return false;
      if (!seen.insert(name).second)
        return fail(at, fmt::format("{}: parameter name {} appears twice", what, quote_input(name)));
      f.param_names.push_back(std::move(name));
    }
    f.param_blobs.reserve(n);
    for (uint64_t i = 0; i < n; ++i) {
      uint64_t start = pos_;
      if (!skip_array("parameter " + quote_input(f.param_names[i]))) return false;
      f.param_blobs.emplace_back(bytes_.data() + start, pos_ - start);
    }
    if (!read_string(&f.module_name, "the module name of " + what)) return false;
    out_.factories.push_back(std::move(f));
    return true;
  }

  /// Validates one NDArray record (byte_reader.h) and moves past it.
  bool skip_array(const std::string& what) {
    detail::NDArrayRecord r;
    return read_ndarray(what, &r);
  }

  /// The import tree is a CSR matrix over the modules (every entry but _import_tree).
  bool check_tree(size_t modules) {
    const auto& row = out_.import_tree_row_ptr;
    const auto& child = out_.import_tree_child_indices;
    if (row.size() != modules + 1)
      return fail(tree_at_, fmt::format("the import tree has {} row pointers for {} modules ({} expected)", row.size(),
                                        modules, modules + 1));
    if (row.front() != 0) return fail(tree_at_, "the import tree's first row pointer is not 0");
    for (size_t i = 1; i < row.size(); ++i)
      if (row[i] < row[i - 1]) return fail(tree_at_, fmt::format("the import tree's row pointer {} decreases", i));
    if (row.back() != child.size())
      return fail(tree_at_, fmt::format("the import tree's last row pointer {} differs from its {} child indices",
                                        row.back(), child.size()));
    for (size_t i = 0; i < child.size(); ++i)
      if (child[i] >= modules)
        return fail(tree_at_, fmt::format("the import tree's child index {} is {}, but there are {} modules", i,
                                          child[i], modules));
    return true;
  }

  uint64_t tree_at_ = 0;
  DeviceBlob out_;
};

}  // namespace

const char* to_string(BinaryFormat f) {
  switch (f) {
    case BinaryFormat::Cubin:
      return "cubin";
    case BinaryFormat::Fatbin:
      return "fatbin";
    case BinaryFormat::Ptx:
      return "ptx";
    case BinaryFormat::Unknown:
      break;
  }
  return "unknown";
}

BinaryFormat detect_binary_format(std::string_view bytes) {
  if (bytes.size() >= 4 && std::memcmp(bytes.data(), "\x7f" "ELF", 4) == 0) return BinaryFormat::Cubin;
  if (bytes.size() >= 4 && le_at(bytes, 0, 4) == kFatbinMagic) return BinaryFormat::Fatbin;
  if (looks_like_ptx(bytes)) return BinaryFormat::Ptx;
  return BinaryFormat::Unknown;
}

Expected<std::vector<DeviceImage>> list_device_images(std::string_view bytes, const std::string& file) {
  try {
    switch (detect_binary_format(bytes)) {
      case BinaryFormat::Cubin: {
        auto sm = cubin_sm(bytes, file, 0);
        if (!sm) return sm.error();
        return std::vector<DeviceImage>{DeviceImage{"cubin", fmt::format("sm_{}", *sm)}};
      }
      case BinaryFormat::Fatbin:
        return fatbin_images(bytes, file);
      case BinaryFormat::Ptx:
        return ptx_images(bytes, file);
      case BinaryFormat::Unknown:
        break;
    }
    return byte_error(file, 0,
                      fmt::format("not a cubin, fatbin or PTX file (starts with {})", hex_prefix(bytes)));
  } catch (const std::bad_alloc&) {
    return file_error(file, "out of memory while reading a device binary", ExitCode::Software);
  }
}

Expected<std::vector<PtxEntry>> parse_ptx_entries(std::string_view text, const std::string& file) {
  try {
    std::vector<PtxEntry> out;
    std::set<std::string> seen;
    PtxLexer lex(text, file);
    auto describe = [](const Token& t) {
      return t.text.empty() ? std::string("the end of the file") : quote_input(std::string(t.text));
    };
    // Braces must balance: a truncated file ends inside a function body.
    std::vector<std::pair<unsigned, unsigned>> open_braces;
    for (;;) {
      auto t = lex.next();
      if (!t) return t.error();
      if (t->text.empty()) {
        if (!open_braces.empty())
          return source_error(file, open_braces.back().first, open_braces.back().second,
                              "this { is never closed (is the file truncated?)");
        break;
      }
      if (!t->string && t->text == "{") {
        if (open_braces.size() >= 1024) return source_error(file, t->line, t->col, "blocks nested too deeply");
        open_braces.emplace_back(t->line, t->col);
        continue;
      }
      if (!t->string && t->text == "}") {
        if (open_braces.empty()) return source_error(file, t->line, t->col, "unbalanced }");
        open_braces.pop_back();
        continue;
      }
      if (t->string || t->text != ".entry") continue;
      auto name = lex.next();
      if (!name) return name.error();
      if (name->string || !is_ptx_identifier(name->text))
        return source_error(file, name->line, name->col, "expected a kernel name after .entry, got " + describe(*name));
      PtxEntry e;
      e.name = std::string(name->text);
      if (!seen.insert(e.name).second)
        return source_error(file, name->line, name->col, ".entry " + quote_input(e.name) + " is defined twice");
      auto open = lex.next();
      if (!open) return open.error();
      if (open->text != "(") {  // no parameter list
        if (!open->string && open->text == "{") open_braces.emplace_back(open->line, open->col);
        if (!open->string && open->text == "}") {
          if (open_braces.empty()) return source_error(file, open->line, open->col, "unbalanced }");
          open_braces.pop_back();
        }
        out.push_back(std::move(e));
        continue;
      }
      // `.param [.attributes] .type [.attributes] NAME[N]?` separated by commas.
      for (;;) {
        auto p = lex.next();
        if (!p) return p.error();
        if (p->text == ")" && e.param_types.empty()) break;
        if (p->text != ".param")
          return source_error(file, p->line, p->col,
                              "expected .param in the parameter list of " + quote_input(e.name) + ", got " + describe(*p));
        std::string type;
        Token last = *p;
        for (;;) {
          auto a = lex.next();
          if (!a) return a.error();
          last = *a;
          if (a->text.empty() || a->string)
            return source_error(file, a->line, a->col,
                                "unterminated parameter list of " + quote_input(e.name) + " (got " + describe(*a) + ")");
          if (a->text[0] == '.') {
            if (type.empty() && is_ptx_type(a->text)) type = std::string(a->text);
            continue;
          }
          if (is_ptx_identifier(a->text)) break;
          if (a->text[0] >= '0' && a->text[0] <= '9') continue;  // `.align 8`
          return source_error(file, a->line, a->col,
                              "unexpected " + describe(*a) + " in the parameter list of " + quote_input(e.name));
        }
        if (type.empty())
          return source_error(file, last.line, last.col,
                              fmt::format("parameter {} of {} has no type", e.param_types.size(), quote_input(e.name)));
        auto sep = lex.next();
        if (!sep) return sep.error();
        if (sep->text == "[") {
          auto n = lex.next();
          if (!n) return n.error();
          auto close = lex.next();
          if (!close) return close.error();
          if (n->text.empty() || n->text[0] < '0' || n->text[0] > '9' || close->text != "]")
            return source_error(file, n->line, n->col, "malformed array size in the parameter list of " + quote_input(e.name));
          type += "[" + std::string(n->text) + "]";
          sep = lex.next();
          if (!sep) return sep.error();
        }
        e.param_types.push_back(std::move(type));
        if (sep->text == ")") break;
        if (sep->text != ",")
          return source_error(file, sep->line, sep->col,
                              "expected , or ) in the parameter list of " + quote_input(e.name) + ", got " + describe(*sep));
      }
      out.push_back(std::move(e));
    }
    return out;
  } catch (const std::bad_alloc&) {
    return file_error(file, "out of memory while reading PTX", ExitCode::Software);
  }
}

Expected<DeviceBlob> parse_device_blob(std::string_view bytes, const std::string& file) {
  try {
    return BlobReader(bytes, file).read();
  } catch (const std::bad_alloc&) {
    return file_error(file, "out of memory while reading the device blob", ExitCode::Software);
  }
}

}  // namespace kdflow
