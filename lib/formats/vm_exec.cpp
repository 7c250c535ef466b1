// vm_exec.cpp — reads TVM's serialized Relax VM executable (TVM 0.20, RELAX_VM_VERSION "0.14").
//
// Layout (little-endian, dmlc stream): u64 payload length, then the payload:
//   u64 magic 0xD225DE2F4214151D, version (u64 length + bytes),
//   function table: u64 n, n × {i32 kind, name, i64 start_instr, i64 end_instr, i64 num_args,
//                                i64 register_file_size, u64 m, m × param name},
//   constant pool:  u64 n, n × {i32 type, value}: 0 NDArray (as in params files), 1 DLDataType
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
    uint64_t len = 0;
    if (!read_u64(&len, "the payload length")) return error_;
    if (len != left())
      return err(0, fmt::format("the payload length says {} bytes, but {} bytes follow (a truncated or padded file?)",
                                len, left()));
    uint64_t magic = 0;
    if (!read_u64(&magic, "the magic")) return error_;
    if (magic != kVmExecMagic)
      return err(8, fmt::format("not a Relax VM executable (magic {:#018x}, expected {:#018x})", magic, kVmExecMagic));
    uint64_t at = pos_;
    if (!read_string(&out_.version, "the version")) return error_;
    if (out_.version != kVmExecVersion)
      return err(at, fmt::format("Relax VM executable version {} is not supported (kdflow reads version {}, TVM 0.20)",
                                 detail::quote_input(out_.version), kVmExecVersion));
    if (!read_functions() || !read_constants() || !read_code() || !check_functions()) return error_;
    if (left() != 0) return err(pos_, fmt::format("{} unexpected bytes after the code section", left()));
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

  bool read_constants() {
    uint64_t n = 0;
    if (!read_count(&n, 4 + 4, "the constant count")) return false;
    out_.constants.reserve(n);
    for (uint64_t i = 0; i < n; ++i) {
      VmConstant c;
      std::string what = fmt::format("constant {}", i);
      uint64_t at = pos_;
      int32_t type = 0;
      if (!read_i32(&type, "the type of " + what)) return false;
      switch (type) {
        case 0:
          c.kind = VmConstant::Kind::Tensor;
          if (!read_tensor(&c, what)) return false;
          break;
        case 1: {
          c.kind = VmConstant::Kind::DType;
          uint64_t dt = 0;
          if (!read_le(4, what, &dt)) return false;
          c.dtype = DType{static_cast<uint8_t>(dt & 0xff), static_cast<uint8_t>((dt >> 8) & 0xff),
                          static_cast<uint16_t>(dt >> 16)};
          break;
        }
        case 2: {
          c.kind = VmConstant::Kind::Shape;
          uint64_t m = 0;
          if (!read_count(&m, 8, "the length of " + what)) return false;
          for (uint64_t d = 0; d < m; ++d) {
            int64_t v = 0;
            if (!read_i64(&v, what)) return false;
            c.shape.push_back(v);
          }
          break;
        }
        case 3:
          c.kind = VmConstant::Kind::String;
          if (!read_string(&c.text, what)) return false;
          break;
        case 4:
          c.kind = VmConstant::Kind::Int;
          if (!read_i64(&c.int_value, what)) return false;
          break;
        case 5: {
          c.kind = VmConstant::Kind::Float;
          uint64_t bits = 0;
          if (!read_u64(&bits, what)) return false;
          std::memcpy(&c.float_value, &bits, sizeof bits);
          break;
        }
        default:
          return fail(at, fmt::format("{}: unknown constant type {}", what, type));
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

}  // namespace kdflow
