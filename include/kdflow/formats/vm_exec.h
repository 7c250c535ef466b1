// vm_exec.h — reads TVM's serialized Relax VM executable (`relax.VMExecutable`, TVM 0.20:
// `ex.mod.save()` → vm_exec.bin, or the entry of that name in model.so's __tvm_dev_mblob):
// magic and version, the function table, the constant pool, the instruction stream.
// Pure parsing of memory: every count is checked against the bytes left before anything is
// sized from it; tensor constants are located, never copied. No knowledge of host code.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kdflow/support/diag.h"
#include "kdflow/support/dtype.h"

namespace kdflow {

inline constexpr uint64_t kVmExecMagic = 0xD225DE2F4214151Dull;    ///< kTVMVMBytecodeMagic (0.20 – 0.22)
inline constexpr uint64_t kVmExecMagicV2 = 0xD225DE2F4214151Eull;  ///< kTVMVMBytecodeMagicV2 (0.23+: memory scopes)
inline constexpr const char* kVmExecVersion = "0.14";              ///< VM_VERSION of TVM 0.20 – 0.26

/// One entry of the executable's function table (VMFuncInfo).
struct VmFunction {
  enum class Kind { Packed = 0, Bytecode = 1, Tir = 2 };  ///< kPackedFunc, kVMFunc, kVMTIRFunc
  Kind kind = Kind::Packed;
  std::string name;
  int64_t start_instr = 0;  ///< bytecode functions: [start_instr, end_instr) in VmExecutable::code
  int64_t end_instr = 0;
  int64_t num_args = 0;
  int64_t register_file_size = 0;
  std::vector<std::string> param_names;
};
const char* to_string(VmFunction::Kind k);  ///< "packed" | "bytecode" | "tir"

/// One constant of the pool.
struct VmConstant {
  enum class Kind { Tensor = 0, DType = 1, Shape = 2, String = 3, Int = 4, Float = 5 };
  Kind kind = Kind::Int;
  DType dtype;                 ///< Tensor: element type; DType: the value
  std::vector<int64_t> shape;  ///< Tensor: its shape; Shape: the tuple
  int32_t device_type = 1;     ///< Tensor
  int32_t device_id = 0;
  uint64_t data_offset = 0;    ///< Tensor: offset of its bytes within the bytes given to the parser
  uint64_t nbytes = 0;         ///< Tensor
  std::string text;            ///< String
  int64_t int_value = 0;       ///< Int
  double float_value = 0;      ///< Float
};
const char* to_string(VmConstant::Kind k);  ///< "tensor" | "dtype" | "shape" | "string" | "int" | "float"

/// An instruction operand (Instruction::Arg: 8-bit kind, 56-bit signed value).
struct VmOperand {
  enum class Kind { Register = 0, Immediate = 1, Constant = 2, Function = 3 };
  Kind kind = Kind::Register;
  int64_t value = 0;
};

inline constexpr int64_t kVmVoidRegister = int64_t(1) << 54;  ///< %void
inline constexpr int64_t kVmVmRegister = (int64_t(1) << 54) + 1;  ///< %vm (the VM itself)

struct VmInstruction {
  enum class Op { Call = 1, Ret = 2, Goto = 3, If = 4 };
  Op op = Op::Ret;
  int64_t dst = 0;        ///< Call: destination register
  int64_t func = 0;       ///< Call: index in the function table
  std::vector<VmOperand> args;  ///< Call
  int64_t reg = 0;        ///< Ret: the result; If: the condition
  int64_t offset = 0;     ///< Goto: pc offset; If: offset taken when the condition is false
  uint64_t byte = 0;      ///< where the instruction starts (diagnostics)
};

struct VmExecutable {
  std::string file;                      ///< label used in diagnostics
  std::string version;
  /// The TVM releases whose writer produces this layout, from the bytes themselves: "0.20"
  /// (u64 length prefix, ConstantType tags 0–5), "0.21" (tvm-ffi type indices, Tensor 72),
  /// "0.22" (Tensor 70, no prefix), "0.23+" (second magic, memory-scope section).
  std::string tvm_versions;
  bool length_prefixed = false;          ///< the bytes start with the u64 payload length
  std::vector<std::pair<int64_t, std::string>> memory_scopes;  ///< 0.23+: (index, scope)
  std::vector<VmFunction> functions;
  std::vector<VmConstant> constants;
  std::vector<VmInstruction> code;       ///< instruction i as the function table indexes it

  /// Index of the function of that name, or -1.
  int find(const std::string& name) const;
};

/// Limits on what an executable may declare.
struct VmExecLimits {
  uint64_t max_instructions = 1u << 24;
  int64_t max_registers = 1 << 24;
};

/// Parses the serialized executable, every layout TVM 0.20 – 0.26 writes: with or without the
/// u64 payload length in front (0.20 writes one, 0.21+ `ex.mod.save()` none), either magic,
/// ConstantType tags (0.20) or tvm-ffi type indices (0.21: Tensor 72, Shape 71; 0.22+: 70, 69)
/// as constant tags. Errors: `file: byte N: error: ...`; an unknown magic, version or tag is
/// an error naming it.
Expected<VmExecutable> parse_vm_executable(std::string_view bytes, const std::string& file,
                                           const VmExecLimits& limits = {});

/// Whether `bytes` start like a Relax VM executable of any layout parse_vm_executable reads:
/// either magic first (0.21+), or after a u64 payload length (0.20). A cheap sniff for
/// readers that take either a params file or an executable; parsing still decides.
bool looks_like_vm_executable(std::string_view bytes);

}  // namespace kdflow
