// vm_exec.cpp — reads TVM's serialized Relax VM executable (TVM 0.20 – 0.26, VM_VERSION "0.14").
//
// Layout (little-endian, dmlc stream): 0.20 writes a u64 payload length, then the payload;
// 0.21+ (`ex.mod.save()`, the library blob's entry) the payload alone:
//   u64 magic 0xD225DE2F4214151D (0.23+: ...151E), version (u64 length + bytes),
//   function table: u64 n, n × {i32 kind, name, i64 start_instr, i64 end_instr, i64 num_args,
//                                i64 register_file_size, u64 m, m × param name},
//   0.23+ (magic ...151E): memory scopes, u64 n, n × {i64 index, string scope},
//   constant pool:  u64 n, n × {i32 type, value}; 0.21+ tag with tvm-ffi type indices (see
//                   read_constants); 0.20's ConstantType: 0 NDArray (as in params files), 1 DLDataType
//                   (u8 code, u8 bits, u16 lanes), 2 shape (u64 n, n × i64), 3 string (u64 n, bytes),
//                   4 int (8 bytes), 5 float (8 bytes, a double),
//   code section:   u64 n, n × i64 instruction offsets; u64 m, m × i64 words. An instruction is
//                   its opcode word, then Call: dst, func, num_args, args; Ret: result; Goto: pc
//                   offset; If: cond, false offset. An argument word is 8 bits of kind over a
//                   56-bit signed value.
// Every count is checked against the bytes left before anything is sized from it.
#include "kdflow/formats/vm_exec.h"

#include <fmt/format.h>

#include <cstring>

#include "byte_reader.h"
#include "json_read.h"  // detail::quote_input

namespace kdflow {

const char* to_string(VmFunction::Kind k) {
  switch (k) {
    case VmFunction::Kind::Packed: return "packed";
    case VmFunction::Kind::Bytecode: return "bytecode";
    case VmFunction::Kind::Tir: return "tir";
  }
  return "?";
}

const char* to_string(VmConstant::Kind k) {
  switch (k) {
    case VmConstant::Kind::Tensor: return "tensor";
    case VmConstant::Kind::DType: return "dtype";
    case VmConstant::Kind::Shape: return "shape";
    case VmConstant::Kind::String: return "string";
    case VmConstant::Kind::Int: return "int";
    case VmConstant::Kind::Float: return "float";
  }
  return "?";
}

int VmExecutable::find(const std::string& name) const {
  for (size_t i = 0; i < functions.size(); ++i)
    if (functions[i].name == name) return static_cast<int>(i);
  return -1;
}

namespace {


class VmReader : private detail::ByteReader {
 public:
  VmReader(std::string_view bytes, const std::string& file, const VmExecLimits& limits)
      : ByteReader(bytes, file, "the executable"), limits_(limits) {
    out_.file = file;
  }

  Expected<VmExecutable> read() {
    // 0.20 writes the payload as one string (u64 length first); 0.21+ writes the payload alone.
    uint64_t first = 0;
    if (!read_u64(&first, "the magic")) return error_;
    uint64_t magic = first, magic_at = 0;
    if (first != kVmExecMagic && first != kVmExecMagicV2) {
      if (first != left())
        return err(0, fmt::format("neither a Relax VM executable's magic ({:#018x} or {:#018x}) nor a payload length "
                                  "({} bytes follow, the first 8 bytes say {})",
                                  kVmExecMagic, kVmExecMagicV2, left(), first));
      out_.length_prefixed = true;
      magic_at = pos_;
      if (!read_u64(&magic, "the magic")) return error_;
      if (magic != kVmExecMagic && magic != kVmExecMagicV2)
        return err(magic_at, fmt::format("not a Relax VM executable (magic {:#018x}, expected {:#018x} or {:#018x})",
                                         magic, kVmExecMagic, kVmExecMagicV2));
    }
    uint64_t at = pos_;
    if (!read_string(&out_.version, "the version")) return error_;
    if (out_.version != kVmExecVersion)
      return err(at, fmt::format("Relax VM executable version {} is not supported (kdflow reads version {}, TVM "
                                 "0.20 – 0.26)",
                                 detail::quote_input(out_.version), kVmExecVersion));
    if (!read_functions()) return error_;
    if (magic == kVmExecMagicV2 && !read_memory_scopes()) return error_;
    // Constant tags: ConstantType 0–5 (0.20) or tvm-ffi type indices (0.21+). Only a 0.20 or
    // 0.21 payload can be either; the 0.20 numbering is tried first there.
    const uint64_t pool_at = pos_;
    bool ok = false;
    if (out_.length_prefixed && magic == kVmExecMagic) {
      ok = read_constants(false);
      if (!ok) {
        Error legacy = error_;
        pos_ = pool_at;
        out_.constants.clear();
        ok = read_constants(true);
        if (!ok) return legacy;
      }
    } else {
      ok = read_constants(true);
    }
    if (!ok || !read_code() || !check_functions()) return error_;
    if (left() != 0) return err(pos_, fmt::format("{} unexpected bytes after the code section", left()));
    if (!ffi_tags_) out_.tvm_versions = "0.20";
    else if (magic == kVmExecMagicV2) out_.tvm_versions = "0.23+";
    else if (saw_021_) out_.tvm_versions = "0.21";
    else if (saw_022_) out_.tvm_versions = "0.22";
    else out_.tvm_versions = "0.21-0.22";
    return std::move(out_);
  }

 private:
  bool read_count(uint64_t* n, uint64_t min_bytes, const std::string& what) {
    uint64_t at = pos_;
    if (!read_u64(n, what)) return false;
    if (min_bytes && *n > left() / min_bytes)
      return fail(at, fmt::format("{} {} is more than the {} bytes left can hold", what, *n, left()));
    return true;
  }

  bool read_functions() {
    uint64_t n = 0;
    if (!read_count(&n, 4 + 8 + 8 * 4 + 8, "the function count")) return false;
    out_.functions.reserve(n);
    for (uint64_t i = 0; i < n; ++i) {
      VmFunction f;
      std::string what = fmt::format("function {}", i);
      uint64_t at = pos_;
      int32_t kind = 0;
      if (!read_i32(&kind, "the kind of " + what)) return false;
      if (kind < 0 || kind > 2) return fail(at, fmt::format("{}: unknown function kind {}", what, kind));
      f.kind = static_cast<VmFunction::Kind>(kind);
      if (!read_string(&f.name, "the name of " + what)) return false;
      what = fmt::format("function {} ({})", i, detail::quote_input(f.name));
      at = pos_;
      if (!read_i64(&f.start_instr, "the header of " + what) || !read_i64(&f.end_instr, "the header of " + what) ||
          !read_i64(&f.num_args, "the header of " + what) || !read_i64(&f.register_file_size, "the header of " + what))
        return false;
      if (f.kind == VmFunction::Kind::Bytecode &&
          (f.num_args < 0 || f.register_file_size < f.num_args || f.register_file_size > limits_.max_registers))
        return fail(at, fmt::format("{}: {} arguments and {} registers are not possible", what, f.num_args,
                                    f.register_file_size));
      uint64_t m = 0;
      if (!read_count(&m, 8, "the parameter-name count of " + what)) return false;
      for (uint64_t k = 0; k < m; ++k) {
        std::string name;
        if (!read_string(&name, fmt::format("parameter name {} of {}", k, what))) return false;
        f.param_names.push_back(std::move(name));
      }
      func_at_.push_back(at);
      out_.functions.push_back(std::move(f));
    }
    return true;
  }

  bool read_memory_scopes() {
    uint64_t n = 0;
    if (!read_count(&n, 8 + 8, "the memory-scope count")) return false;
    for (uint64_t i = 0; i < n; ++i) {
      int64_t index = 0;
      std::string scope;
      if (!read_i64(&index, fmt::format("memory scope {}", i)) ||
          !read_string(&scope, fmt::format("the name of memory scope {}", i)))
        return false;
      out_.memory_scopes.emplace_back(index, std::move(scope));
    }
    return true;
  }

  /// `ffi`: tags are tvm-ffi type indices (0.21+: Int 1, Float 3, DataType 5, String 65,
  /// Shape 69/71, Tensor 70/72); else TVM 0.20's ConstantType (0 NDArray, 1 DLDataType,
  /// 2 shape, 3 string, 4 int, 5 float).
  bool read_constants(bool ffi) {
    ffi_tags_ = ffi;
    saw_021_ = saw_022_ = false;
    uint64_t n = 0;
    if (!read_count(&n, 4 + 4, "the constant count")) return false;
    out_.constants.reserve(n);
    for (uint64_t i = 0; i < n; ++i) {
      VmConstant c;
      std::string what = fmt::format("constant {}", i);
      uint64_t at = pos_;
      int32_t type = 0;
      if (!read_i32(&type, "the type of " + what)) return false;
      VmConstant::Kind kind;
      if (!ffi) {
        if (type < 0 || type > 5) return fail(at, fmt::format("{}: unknown constant type {} (TVM 0.20 numbering)", what, type));
        kind = static_cast<VmConstant::Kind>(type);
      } else {
        switch (type) {
          case 1: kind = VmConstant::Kind::Int; break;
          case 3: kind = VmConstant::Kind::Float; break;
          case 5: kind = VmConstant::Kind::DType; break;
          case 65: kind = VmConstant::Kind::String; break;
          case 69: kind = VmConstant::Kind::Shape, saw_022_ = true; break;
          case 70: kind = VmConstant::Kind::Tensor, saw_022_ = true; break;
          case 71: kind = VmConstant::Kind::Shape, saw_021_ = true; break;
          case 72: kind = VmConstant::Kind::Tensor, saw_021_ = true; break;
          default:
            return fail(at, fmt::format("{}: unknown constant type index {} (tvm-ffi numbering of TVM 0.21 – 0.26: "
                                        "1, 3, 5, 65, 69/71, 70/72)",
                                        what, type));
        }
        if (saw_021_ && saw_022_)
          return fail(at, fmt::format("{}: type index {} mixes TVM 0.21's numbering (Tensor 72, Shape 71) with 0.22's "
                                      "(Tensor 70, Shape 69)",
                                      what, type));
      }
      c.kind = kind;
      switch (kind) {
        case VmConstant::Kind::Tensor:
          if (!read_tensor(&c, what)) return false;
          break;
        case VmConstant::Kind::DType: {
          uint64_t dt = 0;
          if (!read_le(4, what, &dt)) return false;
          c.dtype = from_dlpack(static_cast<uint8_t>(dt & 0xff), static_cast<uint8_t>((dt >> 8) & 0xff),
                          static_cast<uint16_t>(dt >> 16));
          break;
        }
        case VmConstant::Kind::Shape: {
          uint64_t m = 0;
          if (!read_count(&m, 8, "the length of " + what)) return false;
          for (uint64_t d = 0; d < m; ++d) {
            int64_t v = 0;
            if (!read_i64(&v, what)) return false;
            c.shape.push_back(v);
          }
          break;
        }
        case VmConstant::Kind::String:
          if (!read_string(&c.text, what)) return false;
          break;
        case VmConstant::Kind::Int:
          if (!read_i64(&c.int_value, what)) return false;
          break;
        case VmConstant::Kind::Float: {
          uint64_t bits = 0;
          if (!read_u64(&bits, what)) return false;
          std::memcpy(&c.float_value, &bits, sizeof bits);
          break;
        }
      }
      out_.constants.push_back(std::move(c));
    }
    return true;
  }

  bool read_tensor(VmConstant* c, const std::string& what) {
    detail::NDArrayRecord r;
    if (!read_ndarray(what, &r)) return false;
    c->dtype = r.dtype;
    c->shape = std::move(r.shape);
    c->device_type = r.device_type;
    c->device_id = r.device_id;
    c->data_offset = r.data_offset;
    c->nbytes = r.nbytes;
    return true;
  }

  bool read_code() {
    uint64_t n = 0, m = 0;
    if (!read_count(&n, 8, "the instruction count")) return false;
    if (n > limits_.max_instructions)
      return fail(pos_ - 8, fmt::format("{} instructions, more than kdflow reads ({})", n, limits_.max_instructions));
    std::vector<int64_t> offsets(n);
    for (uint64_t i = 0; i < n; ++i)
      if (!read_i64(&offsets[i], "the instruction offsets")) return false;
    if (!read_count(&m, 8, "the code word count")) return false;
    const uint64_t words_at = pos_;
    std::vector<int64_t> words(m);
    for (uint64_t i = 0; i < m; ++i)
      if (!read_i64(&words[i], "the code words")) return false;
    out_.code.reserve(n);
    for (uint64_t i = 0; i < n; ++i) {
      const int64_t o = offsets[i];
      const uint64_t byte = words_at + 8 * static_cast<uint64_t>(o < 0 ? 0 : o);
      auto word = [&](int64_t k, int64_t* v) {
        if (o < 0 || static_cast<uint64_t>(o) >= m || static_cast<uint64_t>(k) >= m - static_cast<uint64_t>(o))
          return fail(byte, fmt::format("instruction {} (at word {}) runs past the {} code words", i, o, m));
        *v = words[static_cast<size_t>(o + k)];
        return true;
      };
      VmInstruction ins;
      ins.byte = byte;
      int64_t op = 0;
      if (!word(0, &op)) return false;
      switch (op) {
        case 1: {
          ins.op = VmInstruction::Op::Call;
          int64_t num = 0;
          if (!word(1, &ins.dst) || !word(2, &ins.func) || !word(3, &num)) return false;
          if (num < 0 || static_cast<uint64_t>(num) > m)
            return fail(byte, fmt::format("instruction {}: {} arguments", i, num));
          for (int64_t k = 0; k < num; ++k) {
            int64_t w = 0;
            if (!word(4 + k, &w)) return false;
            const int kind = static_cast<int>((static_cast<uint64_t>(w) >> 56) & 0xff);
            if (kind > 3) return fail(byte, fmt::format("instruction {}: argument {} has unknown kind {}", i, k, kind));
            VmOperand a;
            a.kind = static_cast<VmOperand::Kind>(kind);
            a.value = static_cast<int64_t>(static_cast<uint64_t>(w) << 8) >> 8;  // sign-extend 56 bits
            ins.args.push_back(a);
          }
          break;
        }
        case 2:
          ins.op = VmInstruction::Op::Ret;
          if (!word(1, &ins.reg)) return false;
          break;
        case 3:
          ins.op = VmInstruction::Op::Goto;
          if (!word(1, &ins.offset)) return false;
          break;
        case 4:
          ins.op = VmInstruction::Op::If;
          if (!word(1, &ins.reg) || !word(2, &ins.offset)) return false;
          break;
        default:
          return fail(byte, fmt::format("instruction {} has unknown opcode {}", i, op));
      }
      out_.code.push_back(std::move(ins));
    }
    return true;
  }

  /// Bytecode functions' instruction ranges lie within the code.
  bool check_functions() {
    for (size_t i = 0; i < out_.functions.size(); ++i) {
      const VmFunction& f = out_.functions[i];
      if (f.kind != VmFunction::Kind::Bytecode) continue;
      if (f.start_instr < 0 || f.end_instr < f.start_instr || static_cast<uint64_t>(f.end_instr) > out_.code.size())
        return fail(func_at_[i], fmt::format("function {}: instructions [{}, {}) are outside the {} instructions",
                                             detail::quote_input(f.name), f.start_instr, f.end_instr, out_.code.size()));
    }
    return true;
  }

  VmExecLimits limits_;
  VmExecutable out_;
  bool ffi_tags_ = false, saw_021_ = false, saw_022_ = false;
  std::vector<uint64_t> func_at_;
};

}  // namespace

Expected<VmExecutable> parse_vm_executable(std::string_view bytes, const std::string& file, const VmExecLimits& limits) {
  try {
    return VmReader(bytes, file, limits).read();
  } catch (const std::bad_alloc&) {
    return file_error(file, "out of memory while reading the VM executable", ExitCode::Software);
  }
}

bool looks_like_vm_executable(std::string_view bytes) {
  auto u64_at = [&](size_t at) {
    uint64_t v = 0;
    for (int k = 0; k < 8; ++k) v |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[at + k])) << (8 * k);
    return v;
  };
  auto is_magic = [](uint64_t m) { return m == kVmExecMagic || m == kVmExecMagicV2; };
  if (bytes.size() >= 8 && is_magic(u64_at(0))) return true;
  return bytes.size() >= 16 && is_magic(u64_at(8));
}

}  // namespace kdflow
