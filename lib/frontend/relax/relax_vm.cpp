// relax_vm.cpp — symbolic execution of a Relax VM bytecode function into a graph.
//
// Values are what the VM would hold in its registers, without any data: integers, strings,
// dtypes, shapes, tuples, storages (id and size) and tensors (shape, dtype and where their
// bytes live: a VM parameter, a pool constant, or a storage at an offset). The builtins the
// memory planner emits are modelled as TVM 0.20's src/runtime/relax_vm/builtin.cc defines them;
// a call of a function the host module defines becomes a graph node: a tensor passed to it that
// no call has written yet is one of its outputs (destination-passing style), every other tensor
// an input. Anything else is an error naming the builtin and the instruction.
#include "kdflow/frontend/relax_vm.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "formats/json_read.h"  // detail::quote_input, parse_json_text
#include "kdflow/support/file_names.h"
#include "kdflow/support/io.h"
#include "frontend/relax/disco.h"
#include "frontend/relax/paged_kv_cache.h"
#include "kdflow/formats/tensor_values.h"

namespace kdflow {
namespace {

struct Value {
  enum class Kind { Unset, Void, Vm, Int, Float, String, DType, Shape, Tensor, Storage, Tuple, Heap, Func, Object };
  Kind kind = Kind::Unset;
  int64_t i = 0;  ///< Int; Tensor: tensor object; Storage: storage id
  double f = 0;
  std::string s;
  DType dtype;
  std::vector<int64_t> shape;
  std::vector<Value> items;
};

Value void_value() {
  Value v;
  v.kind = Value::Kind::Void;
  return v;
}

const char* kind_name(Value::Kind k) {
  switch (k) {
    case Value::Kind::Unset: return "an unset register";
    case Value::Kind::Void: return "void";
    case Value::Kind::Vm: return "the VM";
    case Value::Kind::Int: return "an integer";
    case Value::Kind::Float: return "a float";
    case Value::Kind::String: return "a string";
    case Value::Kind::DType: return "a dtype";
    case Value::Kind::Shape: return "a shape";
    case Value::Kind::Tensor: return "a tensor";
    case Value::Kind::Storage: return "a storage";
    case Value::Kind::Tuple: return "a tuple";
    case Value::Kind::Heap: return "the shape heap";
    case Value::Kind::Func: return "a function";
    case Value::Kind::Object: return "a runtime object";
  }
  return "?";
}

/// A tensor the program handles.
struct TensorObj {
  enum class Home { Input, Constant, Storage, View, Packed };
  Home home = Home::Storage;
  int index = 0;             ///< Input: VM parameter; Constant: pool index; Storage: storage id; View: source
                             ///< tensor; Packed: position in the packed params (RelaxVmEnv::packed)
  bool known = false;        ///< Input: shape and dtype stated by check_tensor_info + match_shape
  bool dtype_known = false;
  int ndim = -1;             ///< Input: from check_tensor_info before match_shape
  std::vector<int64_t> shape;
  DType dtype;
  bool written = false;      ///< Storage: a call has received it as an output
  int producer = -1;         ///< pending node that writes it (Storage, View), -1 for Input/Constant
};

/// An argument of a host function the KV cache's runtime calls, as RelaxCallArg; while the
/// program runs, `entry` holds the tensor object (build_heads maps it to its graph entry).
using PendingArg = RelaxCallArg;

struct PendingNode {
  std::string func;          ///< host function, "__nop" for a reshape, or a runtime builtin (KV cache)
  std::vector<int> inputs, outputs;  ///< tensor objects
  uint64_t instr = 0;
  std::map<std::string, std::string> attrs;  ///< a runtime builtin's scalar arguments, as text
  std::vector<PendingArg> args;  ///< called by the KV cache's runtime: its arguments in order; else empty
};

/// A copy of the KV cache's auxiliary arrays to the device (the node that makes it, the
/// aux buffer's version it writes, the arrays).
struct PendingCopy {
  int node = -1;
  int tensor = -1;
  std::vector<KvAuxArray> arrays;
  std::string dtype = "int32";  ///< of the values (int64: relax.run.shape_to_tensor)
};

/// The KV-cache builtins whose work happens inside TVM's runtime (paged_kv_cache.cc): each is
/// a node of the flow (a runtime call with the tensors it reads and writes), its kernels not
/// yet modelled — never a silent omission.
bool is_kv_cache_attention(const std::string& n) {
  return n == "vm.builtin.attention_kv_cache_attention_with_fused_qkv";
}

class Runner {
 public:
  Runner(const VmExecutable& ex, const std::vector<std::string>& host, const RelaxVmLimits& limits,
         const RelaxVmEnv& env)
      : ex_(ex), host_(host.begin(), host.end()), limits_(limits), env_(env) {}

  Expected<RelaxProgram> run(const std::string& name) {
    int fi = ex_.find(name);
    if (fi < 0) return file_error(ex_.file, fmt::format("the executable has no function {}", detail::quote_input(name)));
    const VmFunction& f = ex_.functions[fi];
    if (f.kind != VmFunction::Kind::Bytecode)
      return file_error(ex_.file, fmt::format("function {} is a {} function, not bytecode (a compiled-mode build: "
                                              "kdflow runs __vmtir__main of host.c for those)",
                                              detail::quote_input(name), to_string(f.kind)));
    regs_.assign(static_cast<size_t>(f.register_file_size), Value{});
    for (int64_t a = 0; a < f.num_args; ++a) {
      TensorObj t;
      t.home = TensorObj::Home::Input;
      t.index = static_cast<int>(a);
      regs_[a].kind = Value::Kind::Tensor;
      regs_[a].i = static_cast<int64_t>(tensors_.size());
      tensors_.push_back(t);
    }
    num_args_ = f.num_args;
    param_names_ = f.param_names;
    for (int64_t a = 0; a < f.num_args; ++a) {
      inputs_.push_back(static_cast<int>(a));
      input_names_.push_back(static_cast<size_t>(a) < f.param_names.size() ? f.param_names[a]
                                                                           : fmt::format("input{}", a));
    }
    Value result;
    if (!execute(f, name, &result)) return error_;
    return build(result);
  }

  /// A session of a language model (RelaxSession): create_tir_paged_kv_cache once, then per
  /// step embed the step's tokens, view the embeddings as (1, tokens, hidden) as the host
  /// program does, and run prefill or decode on them with the cache and the packed params.
  /// Every call joins one graph, in order, each node marked with its step; the logits of
  /// every step are the outputs.
  Expected<RelaxProgram> run_session(const RelaxSession& session) {
    auto bytecode = [&](const char* name) -> int {
      int fi = ex_.find(name);
      return fi >= 0 && ex_.functions[fi].kind == VmFunction::Kind::Bytecode ? fi : -1;
    };
    const int create = bytecode("create_tir_paged_kv_cache"), embed = bytecode("embed"),
              prefill = bytecode("prefill"), decode = bytecode("decode"), batch_decode = bytecode("batch_decode"),
              extend = bytecode("extend");
    for (auto [fi, name] : {std::pair{create, "create_tir_paged_kv_cache"}, std::pair{embed, "embed"},
                            std::pair{prefill, "prefill"}, std::pair{decode, "decode"}})
      if (fi < 0)
        return file_error(ex_.file, fmt::format("a session runs the bytecode VM functions create_tir_paged_kv_cache, "
                                                "embed, prefill and decode; this executable has no {} (an LLM "
                                                "built with tvm.relax.frontend.nn and a paged KV cache has them)",
                                                name),
                          ExitCode::Usage);
    if (!env_.packed)
      return file_error(ex_.file, "a session needs the packed params: the params file beside the build "
                                  "(DIR/params.bin, or --params), in the tuple's order");
    Value params;
    params.kind = Value::Kind::Tuple;
    make_packed();
    for (int t : packed_) {
      Value v;
      v.kind = Value::Kind::Tensor;
      v.i = t;
      params.items.push_back(v);
    }
    auto shape = [](int64_t v) {
      Value x;
      x.kind = Value::Kind::Shape;
      x.shape = {v};
      return x;
    };
    // The cache as the session needs it: every token, the largest forward (one sequence a forward).
    int64_t total = 0, largest = 0;
    int64_t widest = 1;
    for (const RelaxSessionStep& st : session.steps) {
      if (st.kind == RelaxSessionStep::Kind::Prefill || st.kind == RelaxSessionStep::Kind::Decode)
        total += st.tokens, largest = std::max(largest, st.tokens);
      if (st.kind == RelaxSessionStep::Kind::BatchDecode) {
        const int64_t b = static_cast<int64_t>(st.seqs.size());
        total += b, largest = std::max(largest, b), widest = std::max(widest, b);
      }
    }
    step_ = "create";
    Value cache;
    std::vector<Value> create_args = {shape(std::max(session.max_batch_size, widest)),
                                      shape(session.max_total_seq_len > 0 ? session.max_total_seq_len : total),
                                      shape(session.prefill_chunk_size > 0 ? session.prefill_chunk_size : largest),
                                      shape(session.page_size)};
    // MLC-LLM's models take a fifth, support_sliding_window (the session's kv_cache states it).
    if (ex_.functions[static_cast<size_t>(create)].num_args == 5)
      create_args.push_back(shape(session.support_sliding_window));
    else if (session.support_sliding_window)
      return file_error(ex_.file, "the session's kv_cache asks for support_sliding_window, but this build's "
                                  "create_tir_paged_kv_cache takes no such argument (MLC-LLM's models do)",
                        ExitCode::Usage);
    if (!invoke(create, create_args, &cache)) return error_;
    if (cache.kind != Value::Kind::Object || !kv_)
      return fail(fmt::format("create_tir_paged_kv_cache returns {}, not the KV cache", kind_name(cache.kind)));
    std::vector<int> heads;
    // MLC-LLM's engine (serve/model.cc) prefills a sequence it has prefilled before, or forked,
    // with `extend` where the model has one (DeepSeek-V2: its `prefill` attends to the new
    // tokens only).
    std::set<int64_t> prefilled;
    for (const RelaxSessionStep& st : session.steps) {
      callee_ = "";
      if (st.kind == RelaxSessionStep::Kind::ForkSequence) prefilled.insert(st.seq);
      if (st.kind == RelaxSessionStep::Kind::RemoveSequence) prefilled.erase(st.seq);
      if (st.kind == RelaxSessionStep::Kind::ForkSequence || st.kind == RelaxSessionStep::Kind::PopN) {
        // The runtime's page bookkeeping; a fork inside a page copies it (copy_single_page per layer).
        const bool fork = st.kind == RelaxSessionStep::Kind::ForkSequence;
        callee_ = fork ? "vm.builtin.kv_state_fork_sequence" : "vm.builtin.kv_state_popn";
        step_ = st.label;
        Expected<std::vector<KvCall>> calls = fork ? kv_->fork_sequence(st.parent, st.seq, st.pos)
                                                   : kv_->popn(st.seq, st.tokens);
        if (!calls) return driver_fail(calls.error());
        std::vector<int> none;
        if (!kv_runtime_calls(*calls, callee_, -1, none)) return error_;
        continue;
      }
      if (st.kind == RelaxSessionStep::Kind::AddSequence || st.kind == RelaxSessionStep::Kind::RemoveSequence) {
        // The driver's calls of the cache: host bookkeeping, nothing on the device.
        const bool add = st.kind == RelaxSessionStep::Kind::AddSequence;
        callee_ = add ? "vm.builtin.kv_state_add_sequence" : "vm.builtin.kv_state_remove_sequence";
        step_ = fmt::format("{} {}", add ? "add_sequence" : "remove_sequence", st.seq);
        if (Status r = add ? kv_->add_sequence(st.seq) : kv_->remove_sequence(st.seq); !r) return driver_fail(r.error());
        continue;
      }
      if (st.kind == RelaxSessionStep::Kind::EnableSlidingWindow) {
        callee_ = "vm.builtin.attention_kv_cache_enable_sliding_window_for_seq";
        step_ = st.label;
        if (Status r = kv_->enable_sliding_window(st.seq, st.window, st.sink); !r) return driver_fail(r.error());
        continue;
      }
      const bool is_prefill = st.kind == RelaxSessionStep::Kind::Prefill;
      const bool batch = st.kind == RelaxSessionStep::Kind::BatchDecode;
      const int64_t tokens = batch ? static_cast<int64_t>(st.seqs.size()) : st.tokens;
      if (batch && batch_decode < 0)
        return file_error(ex_.file, fmt::format("session step {}: decodes {} sequences in one forward, which needs the "
                                                "bytecode VM function batch_decode; this executable has none",
                                                st.label, st.seqs.size()),
                          ExitCode::Usage);
      step_ = st.label;
      TensorObj ids;
      ids.home = TensorObj::Home::Input;
      ids.index = static_cast<int>(inputs_.size());
      ids.known = ids.dtype_known = true;
      ids.shape = {tokens};
      ids.dtype = DType{0, 32, 1};  // int32 token ids
      const int ids_id = static_cast<int>(tensors_.size());
      tensors_.push_back(ids);
      inputs_.push_back(ids_id);
      input_names_.push_back(fmt::format("input_ids[{}]", st.label));
      Value v;
      v.kind = Value::Kind::Tensor;
      v.i = ids_id;
      Value embedded;
      if (!invoke(embed, {v, params}, &embedded)) return error_;
      if (embedded.kind != Value::Kind::Tensor || tensors_[embedded.i].shape.size() != 2)
        return fail(fmt::format("embed returns {}, not a (tokens, hidden) tensor", kind_name(embedded.kind)));
      // The host program's view of the embeddings as (1, tokens, hidden): a __nop node.
      Value view_shape;
      view_shape.kind = Value::Kind::Shape;
      // A batch decode sees one token per sequence: (batch, 1, hidden).
      view_shape.shape = batch ? std::vector<int64_t>{tokens, 1, tensors_[embedded.i].shape[1]}
                               : std::vector<int64_t>{1, tensors_[embedded.i].shape[0], tensors_[embedded.i].shape[1]};
      if (!view(embedded, view_shape, &v)) return error_;
      callee_ = "vm.builtin.kv_state_begin_forward";
      if (Status r = batch ? kv_->begin_forward(st.seqs, std::vector<int64_t>(st.seqs.size(), 1))
                           : kv_->begin_forward({st.seq}, {tokens});
          !r)
        return driver_fail(r.error());
      callee_ = "";
      Value result;
      const bool extends = is_prefill && extend >= 0 && !prefilled.insert(st.seq).second;
      if (!invoke(extends ? extend : is_prefill ? prefill : batch ? batch_decode : decode, {v, cache, params}, &result))
        return error_;
      if (Status r = kv_->end_forward(); !r) return driver_fail(r.error());
      std::vector<int> logits;
      collect_heads(result, &logits);
      if (logits.size() != 1)
        return fail(fmt::format("{} returns {} tensors; a session expects the logits and the cache",
                                is_prefill ? "prefill" : "decode", logits.size()));
      heads.push_back(logits[0]);
    }
    step_.clear();
    return build_heads(heads);
  }

 private:
  /// Runs function `f` on the current registers until it returns; false with error_ set.
  bool execute(const VmFunction& f, const std::string& name, Value* out) {
    Value result;
    int64_t pc = f.start_instr;
    for (;; ++steps_) {
      if (steps_ >= limits_.max_steps)
        return error_ = file_error(ex_.file, fmt::format("function {} runs more than {} instructions (a loop?)", name,
                                                         limits_.max_steps)),
               false;
      if (pc < f.start_instr || pc >= f.end_instr)
        return error_ = file_error(ex_.file, fmt::format("function {} jumps to instruction {}, outside its "
                                                         "instructions [{}, {})",
                                                         name, pc, f.start_instr, f.end_instr)),
               false;
      pc_ = pc;
      const VmInstruction& ins = ex_.code[static_cast<size_t>(pc)];
      callee_ = "";
      if (ins.op == VmInstruction::Op::Ret) {
        if (!reg(ins.reg, &result)) return false;
        break;
      }
      if (ins.op == VmInstruction::Op::Goto) {
        pc += ins.offset;
        continue;
      }
      if (ins.op == VmInstruction::Op::If) {
        Value c;
        if (!reg(ins.reg, &c)) return false;
        if (c.kind != Value::Kind::Int)
          return fail(fmt::format("the condition is {}, not a known integer", kind_name(c.kind))), false;
        pc += c.i != 0 ? 1 : ins.offset;
        continue;
      }
      if (!call(ins)) return false;
      ++pc;
    }
    *out = std::move(result);
    return true;
  }

  /// Calls VM function `fi` (a closure the program passed as f[...]) with `args`, on its own
  /// registers, as TVM's InvokeClosurePacked does; its calls join the graph in order.
  bool invoke(int64_t fi, const std::vector<Value>& args, Value* out) {
    if (fi < 0 || static_cast<uint64_t>(fi) >= ex_.functions.size())
      return fail(fmt::format("calls function {}, outside the {} functions of the table", fi, ex_.functions.size())),
             false;
    const VmFunction& f = ex_.functions[fi];
    if (f.kind != VmFunction::Kind::Bytecode)
      return fail(fmt::format("calls {} function {} as a closure: only bytecode functions are followed",
                              to_string(f.kind), detail::quote_input(f.name))),
             false;
    if (static_cast<int64_t>(args.size()) != f.num_args)
      return fail(fmt::format("calls {} with {} arguments; it takes {}", detail::quote_input(f.name), args.size(),
                              f.num_args)),
             false;
    if (++depth_ > 16) return fail("closure calls nest more than 16 deep"), false;
    std::vector<Value> saved = std::move(regs_);
    const int64_t saved_pc = pc_;
    const std::string saved_callee = callee_;
    // Each function call has its own shape heap (vm.builtin.alloc_shape_heap).
    std::vector<int64_t> saved_heap = std::move(heap_);
    std::vector<bool> saved_known = std::move(heap_known_);
    heap_.clear();
    heap_known_.clear();
    regs_.assign(static_cast<size_t>(std::max<int64_t>(f.register_file_size, f.num_args)), Value{});
    for (size_t k = 0; k < args.size(); ++k) regs_[k] = args[k];
    const bool ok = execute(f, f.name, out);
    --depth_;
    if (!ok) return false;
    heap_ = std::move(saved_heap);
    heap_known_ = std::move(saved_known);
    regs_ = std::move(saved);
    pc_ = saved_pc;
    callee_ = saved_callee;
    return true;
  }

  /// vm.builtin.cuda_graph.get_cached_alloc(vm, alloc_func, entry): the allocation function
  /// runs once per entry; later calls get its result.
  bool cuda_graph_alloc(const VmInstruction& ins, const std::vector<Value>& a) {
    if (a.size() != 3 || !want(a, 1, Value::Kind::Func, "the allocation function") ||
        !want(a, 2, Value::Kind::Int, "the entry index"))
      return false;
    auto it = graph_allocs_.find(a[2].i);
    if (it == graph_allocs_.end()) {
      Value v;
      if (!invoke(a[1].i, {}, &v)) return false;
      it = graph_allocs_.emplace(a[2].i, std::move(v)).first;
    }
    return set(ins.dst, it->second);
  }

  /// vm.builtin.cuda_graph.run_or_capture(vm, capture_func, args, entry[, shape]): at its first
  /// call for (entry, shape) TVM runs the capture function once (a warm-up whose kernels
  /// execute) and once more under stream capture, and keeps the graph; later calls launch the
  /// graph. The capture function's calls join the flow in order, each marked with the region.
  bool cuda_graph_run(const VmInstruction& ins, const std::vector<Value>& a) {
    if ((a.size() != 4 && a.size() != 5) || !want(a, 1, Value::Kind::Func, "the capture function") ||
        !want(a, 2, Value::Kind::Tuple, "the arguments") || !want(a, 3, Value::Kind::Int, "the entry index"))
      return false;
    std::string key = std::to_string(a[3].i);
    if (a.size() == 5) {
      if (!want(a, 4, Value::Kind::Shape, "the shape")) return false;
      key += fmt::format("@[{}]", fmt::join(a[4].shape, ","));
    }
    const std::string saved = region_;
    region_ = ex_.functions[static_cast<size_t>(a[1].i)].name + "#" + key;
    Value v;
    const bool ok = invoke(a[1].i, a[2].items, &v);
    region_ = saved;
    if (!ok) return false;
    return set(ins.dst, std::move(v));
  }


  /// A session's driver call (kv_state_*) the KV cache's runtime would refuse: named by step.
  Error driver_fail(const Error& e) {
    error_ = file_error(ex_.file, fmt::format("session step {} ({}): {}", step_.empty() ? "?" : step_, callee_, e.message),
                        e.code);
    return error_;
  }

  Error fail(const std::string& msg) {
    error_ = file_error(ex_.file, callee_.empty() ? fmt::format("instruction {}: {}", pc_, msg)
                                                  : fmt::format("instruction {} ({}): {}", pc_, callee_, msg));
    return error_;
  }

  bool reg(int64_t r, Value* out) {
    if (r == kVmVoidRegister) return out->kind = Value::Kind::Void, true;
    if (r == kVmVmRegister) return out->kind = Value::Kind::Vm, true;
    if (r < 0 || static_cast<uint64_t>(r) >= regs_.size())
      return fail(fmt::format("register %{} is out of range (the function has {} registers)", r, regs_.size())), false;
    if (regs_[r].kind == Value::Kind::Unset) return fail(fmt::format("reads register %{} before it is set", r)), false;
    *out = regs_[r];
    return true;
  }

  bool operand(const VmOperand& a, Value* out) {
    switch (a.kind) {
      case VmOperand::Kind::Register: return reg(a.value, out);
      case VmOperand::Kind::Immediate: out->kind = Value::Kind::Int, out->i = a.value; return true;
      case VmOperand::Kind::Function:
        if (a.value < 0 || static_cast<uint64_t>(a.value) >= ex_.functions.size())
          return fail(fmt::format("function operand f[{}] is outside the {} functions of the table", a.value,
                                  ex_.functions.size())),
                 false;
        out->kind = Value::Kind::Func, out->i = a.value;
        return true;
      case VmOperand::Kind::Constant: break;
    }
    if (a.value < 0 || static_cast<uint64_t>(a.value) >= ex_.constants.size())
      return fail(fmt::format("constant c[{}] is out of range (the pool has {} constants)", a.value,
                              ex_.constants.size())),
             false;
    const VmConstant& c = ex_.constants[a.value];
    switch (c.kind) {
      case VmConstant::Kind::Tensor: {
        auto it = const_tensor_.find(a.value);
        if (it == const_tensor_.end()) {
          TensorObj t;
          t.home = TensorObj::Home::Constant;
          t.index = static_cast<int>(a.value);
          t.known = t.dtype_known = true;
          t.shape = c.shape;
          t.dtype = c.dtype;
          it = const_tensor_.emplace(a.value, static_cast<int>(tensors_.size())).first;
          tensors_.push_back(t);
        }
        out->kind = Value::Kind::Tensor, out->i = it->second;
        return true;
      }
      case VmConstant::Kind::DType: out->kind = Value::Kind::DType, out->dtype = c.dtype; return true;
      case VmConstant::Kind::Shape: out->kind = Value::Kind::Shape, out->shape = c.shape; return true;
      case VmConstant::Kind::String: out->kind = Value::Kind::String, out->s = c.text; return true;
      case VmConstant::Kind::Int: out->kind = Value::Kind::Int, out->i = c.int_value; return true;
      case VmConstant::Kind::Float: out->kind = Value::Kind::Float, out->f = c.float_value; return true;
    }
    return false;
  }

  bool set(int64_t dst, Value v) {
    if (dst == kVmVoidRegister) return true;
    if (dst < 0 || static_cast<uint64_t>(dst) >= regs_.size())
      return fail(fmt::format("destination register %{} is out of range (the function has {} registers)", dst,
                              regs_.size())),
             false;
    regs_[dst] = std::move(v);
    return true;
  }

  bool want(const std::vector<Value>& a, size_t i, Value::Kind k, const char* what) {
    if (i >= a.size()) return fail(fmt::format("argument {} ({}) is missing", i, what)), false;
    if (a[i].kind != k)
      return fail(fmt::format("argument {} ({}) is {}, not {}", i, what, kind_name(a[i].kind), kind_name(k))), false;
    return true;
  }

  bool call(const VmInstruction& ins) {
    if (ins.func < 0 || static_cast<uint64_t>(ins.func) >= ex_.functions.size())
      return fail(fmt::format("calls function {}, outside the {} functions of the table", ins.func,
                              ex_.functions.size())),
             false;
    const VmFunction& f = ex_.functions[ins.func];
    callee_ = f.name;
    std::vector<Value> a(ins.args.size());
    for (size_t k = 0; k < ins.args.size(); ++k)
      if (!operand(ins.args[k], &a[k])) return false;
    const std::string& n = f.name;
    if (f.kind == VmFunction::Kind::Packed && host_.count(n) && n.rfind("vm.builtin.", 0) != 0) {
      for (const Value& v : a)
        if (v.kind == Value::Kind::Heap) return shape_function(ins, a);
      if (a.empty() && env_.scalar_function) {  // compute_symbolic_expr(): a scalar from the host
        Value v;
        bool is_float = false;
        if (Status st = env_.scalar_function(n, &is_float, &v.i, &v.f); !st) {
          error_ = st.error();
          return false;
        }
        v.kind = is_float ? Value::Kind::Float : Value::Kind::Int;
        return set(ins.dst, std::move(v));
      }
      return fused(ins, a);
    }
    if (is_disco_builtin(n)) return disco(ins, a);
    if (n == "vm.builtin.alloc_shape_heap") return alloc_shape_heap(ins, a);
    if (n == "vm.builtin.make_shape") return make_shape(ins, a);
    if (n == "vm.builtin.null_value") return set(ins.dst, void_value());
    if (n == "vm.builtin.alloc_storage") return alloc_storage(ins, a);
    if (n == "vm.builtin.alloc_tensor") return alloc_tensor(ins, a);
    if (n == "vm.builtin.check_tensor_info") return check_tensor_info(a);
    if (n == "vm.builtin.check_tuple_info") return check_tuple_info(a);
    if (n == "vm.builtin.cuda_graph.get_cached_alloc") return cuda_graph_alloc(ins, a);
    if (n == "vm.builtin.paged_attention_kv_cache_create" && !step_.empty()) return kv_cache_create(ins, a);
    if (n == "vm.builtin.cuda_graph.run_or_capture") return cuda_graph_run(ins, a);
    if (n == "vm.builtin.check_shape_info") return check_shape_info(a);
    if (is_kv_cache_attention(n)) return kv_attention(ins, a);
    if (n == "vm.builtin.attention_kv_cache_self_attention" || n == "vm.builtin.attention_kv_cache_cross_attention" ||
        n == "vm.builtin.attention_kv_cache_append_mla_kv" ||
        n == "vm.builtin.attention_kv_cache_merge_attn_output_inplace")
      return kv_mla(ins, a, n.substr(std::string("vm.builtin.attention_kv_cache_").size()));
    if (n == "vm.builtin.attention_kv_cache_get_query_positions") return kv_query_positions(ins, a);
    if (n.rfind("vm.builtin.attention_kv_cache_", 0) == 0 || n.rfind("vm.builtin.kv_state_", 0) == 0 ||
        n.rfind("vm.builtin.paged_attention_kv_cache", 0) == 0)
      return fail("a KV-cache builtin kdflow does not model yet (of TVM's paged KV cache, only "
                  "attention_kv_cache_attention_with_fused_qkv is a node of the flow)"),
             false;
    if (n == "vm.builtin.match_shape") return match_shape(a);
    if (n == "vm.builtin.reshape") return reshape(ins, a);
    if (n == "vm.builtin.make_prim_value") return make_prim_value(ins, a);
    if (n == "relax.run.shape_to_tensor") return shape_to_tensor(ins, a);
    if (n == "vm.builtin.match_prim_value") return match_prim_value(a);
    if (n == "vm.builtin.shape_of") return shape_of(ins, a);
    if (n == "vm.builtin.tensor_to_shape") return tensor_to_shape(ins, a);
    if (n == "vm.builtin.read_if_cond") return read_if_cond(ins, a);
    if (n == "vm.builtin.call_tir_dyn") return call_tir_dyn(ins, a);
    if (n == "vm.builtin.ensure_zero_offset") return ensure_zero_offset(ins, a);
    if (n == "vm.builtin.make_closure") return make_closure(ins, a);
    if (n == "vm.builtin.invoke_closure") return invoke_closure(ins, a);
    // Checks of a value's kind that change nothing; a runtime check that would fail is TVM's to raise.
    if (n == "vm.builtin.check_prim_value_info" || n == "vm.builtin.check_func_info" ||
        n == "vm.builtin.check_string_info")
      return set(ins.dst, void_value());
    if (n == "vm.builtin.tuple_reset_item") return set(ins.dst, void_value());  // releases a weight
    if (n == "vm.builtin.invoke_debug_func") {  // prints (nn's op.print_): no data changes; returns the effect
      if (a.empty()) return fail("no io effect argument"), false;
      return set(ins.dst, a[0]);
    }
    if (n == "vm.builtin.call_py_func")
      return fail("calls a Python function registered in the process that ran the build (R.call_py_func); "
                  "kdflow reads no Python, so what it computes is unknown"),
             false;
    if (n == "vm.builtin.to_device")
      return fail("copies a tensor to another device (R.to_vdevice); kdflow models one GPU's kernels and copies "
                  "no tensor between devices"),
             false;
    if (n == "vm.builtin.attention_kv_cache_create" || n.rfind("vm.builtin.attention_kv_cache_", 0) == 0)
      return fail("nn.KVCache's (the legacy, unpaged cache's) runtime copies are not modelled: build with TVM's "
                  "paged KV cache (nn.llm PagedKVCache), whose kernels kdflow follows"),
             false;
    if (n == "vm.builtin.copy") {  // returns its argument (builtin.cc: *rv = args[0])
      if (a.size() != 1) return fail(fmt::format("{} arguments, expected 1", a.size())), false;
      return set(ins.dst, a[0]);
    }
    if (n == "vm.builtin.make_tuple") {
      Value t;
      t.kind = Value::Kind::Tuple;
      t.items = a;
      return set(ins.dst, std::move(t));
    }
    if (n == "vm.builtin.tuple_getitem") {
      if (!want(a, 0, Value::Kind::Tuple, "the tuple") || !want(a, 1, Value::Kind::Int, "the index")) return false;
      if (a[1].i < 0 || static_cast<uint64_t>(a[1].i) >= a[0].items.size())
        return fail(fmt::format("index {} is outside the tuple of {}", a[1].i, a[0].items.size())), false;
      return set(ins.dst, a[0].items[a[1].i]);
    }
    if (f.kind == VmFunction::Kind::Packed)
      return fail(host_.count(n) ? "a builtin name defined in host.c" : "this function is neither a modelled VM builtin "
                                                                        "nor a function of host.c"),
             false;
    return fail(fmt::format("calls a {} function of the executable; only calls of builtins and host functions are "
                            "modelled",
                            to_string(f.kind))),
           false;
  }

  bool alloc_storage(const VmInstruction& ins, const std::vector<Value>& a) {
    if (!want(a, 0, Value::Kind::Vm, "the VM") || !want(a, 1, Value::Kind::Shape, "the size") ||
        !want(a, 2, Value::Kind::Int, "the device index") || !want(a, 3, Value::Kind::DType, "the dtype"))
      return false;
    if (a[2].i != 0)
      return fail(fmt::format("storage on device index {}: only the first device (the GPU) is modelled", a[2].i)), false;
    if (a.size() > 4 && a[4].kind == Value::Kind::String && a[4].s != "global")
      return fail(fmt::format("storage scope {} is not modelled (only \"global\")", detail::quote_input(a[4].s))), false;
    uint64_t bytes = dtype_element_bytes(a[3].dtype);
    for (int64_t d : a[1].shape)
      if (d < 0 || !checked_mul(bytes, static_cast<uint64_t>(d), &bytes) || bytes > (1ull << 40))
        return fail("the storage size is negative or above 1 TiB"), false;
    Value v;
    v.kind = Value::Kind::Storage;
    v.i = static_cast<int64_t>(storage_bytes_.size());
    storage_bytes_.push_back(bytes);
    return set(ins.dst, std::move(v));
  }

  static bool tensor_bytes(const std::vector<int64_t>& shape, DType dt, uint64_t* out) {
    uint64_t bytes = dtype_element_bytes(dt);
    for (int64_t d : shape)
      if (d < 0 || !checked_mul(bytes, static_cast<uint64_t>(d), &bytes) || bytes > (1ull << 40)) return false;
    *out = bytes;
    return true;
  }

  bool alloc_tensor(const VmInstruction& ins, const std::vector<Value>& a) {
    if (!want(a, 0, Value::Kind::Storage, "the storage") || !want(a, 1, Value::Kind::Int, "the offset") ||
        !want(a, 2, Value::Kind::Shape, "the shape") || !want(a, 3, Value::Kind::DType, "the dtype"))
      return false;
    uint64_t bytes = 0;
    if (!tensor_bytes(a[2].shape, a[3].dtype, &bytes)) return fail("the tensor size is negative or above 1 TiB"), false;
    const uint64_t cap = storage_bytes_[a[0].i];
    if (a[1].i < 0 || static_cast<uint64_t>(a[1].i) > cap || bytes > cap - static_cast<uint64_t>(a[1].i))
      return fail(fmt::format("a {}-byte tensor at offset {} does not fit storage {} of {} bytes", bytes, a[1].i,
                              a[0].i, cap)),
             false;
    if (a[1].i != 0)
      return fail(fmt::format("a tensor at offset {} of its storage: TVM passes it as byte_offset, which kdflow's IR "
                              "does not carry yet (only offset 0 is modelled)",
                              a[1].i)),
             false;
    TensorObj t;
    t.home = TensorObj::Home::Storage;
    t.index = static_cast<int>(a[0].i);
    t.known = t.dtype_known = true;
    t.shape = a[2].shape;
    t.dtype = a[3].dtype;
    Value v;
    v.kind = Value::Kind::Tensor;
    v.i = static_cast<int64_t>(tensors_.size());
    tensors_.push_back(t);
    return set(ins.dst, std::move(v));
  }

  bool check_tensor_info(const std::vector<Value>& a) {
    if (a.size() != 3 && a.size() != 4) return fail(fmt::format("{} arguments, expected 3 or 4", a.size())), false;
    if (!want(a, 0, Value::Kind::Tensor, "the tensor") || !want(a, 1, Value::Kind::Int, "the ndim")) return false;
    if (a.size() == 4 && !want(a, 2, Value::Kind::DType, "the dtype")) return false;
    TensorObj& t = tensors_[a[0].i];
    const int64_t ndim = a[1].i;
    if (!t.known && t.home == TensorObj::Home::Input) {
      if (ndim >= 0) t.ndim = static_cast<int>(ndim);
      if (a.size() == 4) t.dtype = a[2].dtype, t.dtype_known = true;
      // A 0-d tensor (an If's condition) has no match_shape: this check states it whole.
      if (ndim == 0 && t.dtype_known) t.shape.clear(), t.known = true;
      return true;
    }
    if (ndim != -1 && ndim != static_cast<int64_t>(t.shape.size()))
      return fail(fmt::format("the tensor has {} dimensions, the check states {}", t.shape.size(), ndim)), false;
    if (a.size() == 4 && t.dtype_known && a[2].dtype != t.dtype)
      return fail(fmt::format("the tensor is {}, the check states {}", dtype_to_string(t.dtype),
                              dtype_to_string(a[2].dtype))),
             false;
    return true;
  }

  /// Every register holding tensor `id` holds `v` instead (a VM parameter found to be a tuple).
  void replace_everywhere(int64_t id, const Value& v) {
    for (Value& r : regs_)
      if (r.kind == Value::Kind::Tensor && r.i == id) r = v;
  }

  /// vm.builtin.check_tuple_info(value, size, error context): the VM parameter is a tuple of
  /// `size` tensors — the packed params of an nn.Module build (param_mode="packed"), bound by
  /// position to the arrays of the params file (RelaxVmEnv::packed, in the tuple's order).
  bool check_tuple_info(const std::vector<Value>& a) {
    if (a.size() != 3) return fail(fmt::format("{} arguments, expected 3", a.size())), false;
    if (!want(a, 1, Value::Kind::Int, "the size")) return false;
    if (a[0].kind == Value::Kind::Tuple) {
      if (static_cast<int64_t>(a[0].items.size()) != a[1].i)
        return fail(fmt::format("the tuple has {} items, the check states {}", a[0].items.size(), a[1].i)), false;
      return true;
    }
    if (!want(a, 0, Value::Kind::Tensor, "the tuple")) return false;
    const int64_t id = a[0].i;
    const TensorObj& arg = tensors_[id];
    if (arg.home != TensorObj::Home::Input || arg.known)
      return fail("the value checked as a tuple is a tensor"), false;
    const std::string pname = static_cast<size_t>(arg.index) < param_names_.size() ? param_names_[arg.index] : "";
    if (!env_.packed)
      return fail(fmt::format("VM parameter {} ({}) is a tuple of {} tensors (packed params): give the params file "
                              "that holds them in the tuple's order (DIR/params.bin, or --params)",
                              arg.index, detail::quote_input(pname), a[1].i)),
             false;
    if (static_cast<int64_t>(env_.packed->arrays.size()) != a[1].i)
      return fail(fmt::format("VM parameter {} ({}) is a tuple of {} tensors, but {} holds {} arrays", arg.index,
                              detail::quote_input(pname), a[1].i, env_.packed->file, env_.packed->arrays.size())),
             false;
    if (!packed_.empty() && packed_arg_ != arg.index)
      return fail(fmt::format("VM parameters {} and {} are both tuples of params: only one packed tuple is modelled",
                              packed_arg_, arg.index)),
             false;
    if (packed_.empty()) {
      packed_arg_ = arg.index;
      make_packed();
    }
    Value tuple;
    tuple.kind = Value::Kind::Tuple;
    for (int t : packed_) {
      Value v;
      v.kind = Value::Kind::Tensor;
      v.i = t;
      tuple.items.push_back(v);
    }
    replace_everywhere(id, tuple);
    return true;
  }

  /// The tensor objects of the packed params (env_.packed), made once.
  void make_packed() {
    if (!packed_.empty() || !env_.packed) return;
    for (size_t k = 0; k < env_.packed->arrays.size(); ++k) {
      const ParamArray& pa = env_.packed->arrays[k];
      TensorObj t;
      t.home = TensorObj::Home::Packed;
      t.index = static_cast<int>(k);
      t.known = t.dtype_known = true;
      t.shape = pa.shape;
      t.dtype = pa.dtype;
      packed_.push_back(static_cast<int>(tensors_.size()));
      tensors_.push_back(t);
    }
  }

  /// vm.builtin.paged_attention_kv_cache_create(...): TVM's C++ runtime builds the cache
  /// (paged_kv_cache.cc): the configuration is read into the model of its runtime
  /// (paged_kv_cache.h), and its device buffers — the page pool per layer, the temporary
  /// arrays, the merged auxiliary buffer — are the outputs of a node that launches nothing.
  bool kv_cache_create(const VmInstruction& ins, const std::vector<Value>& a) {
    if (a.size() != 28 && a.size() != 29) return fail(fmt::format("{} arguments, expected 28 or 29", a.size())), false;
    if (!want(a, 0, Value::Kind::Shape, "the cache configuration") || !want(a, 1, Value::Kind::Shape, "the layer partition"))
      return false;
    for (size_t k : {2, 3, 4, 5, 7, 8})
      if (!want(a, k, Value::Kind::Int, "an integer of the configuration")) return false;
    if (!want(a, 6, Value::Kind::Shape, "the attention kind of each layer")) return false;
    auto number = [&](size_t k, double* out) {
      if (a[k].kind == Value::Kind::Int) return *out = static_cast<double>(a[k].i), true;
      if (a[k].kind == Value::Kind::Float) return *out = a[k].f, true;
      return fail(fmt::format("argument {} is {}, not a number", k, kind_name(a[k].kind))), false;
    };
    auto refuse = [&](const std::string& what) {
      error_ = file_error(ex_.file, fmt::format("instruction {} ({}): TVM's paged KV cache {}: not modelled (kdflow "
                                                "models the TIR cache's MHA and MLA layers)",
                                                pc_, callee_, what),
                          ExitCode::Unavailable);
      return false;
    };
    const std::vector<int64_t>& cfg = a[0].shape;
    if (cfg.size() != 5 && cfg.size() != 6)
      return fail(fmt::format("the cache configuration has {} values, expected 5 or 6", cfg.size())), false;
    if (a[1].shape.size() != 2)
      return refuse(fmt::format("split over {} layer groups (Disco)", a[1].shape.size() - 1));
    const bool mla = !a[6].shape.empty() && a[6].shape.front() == 1;
    for (int64_t kind : a[6].shape)
      if ((kind != 0 && kind != 3 && kind != 1) || (kind == 1) != mla)
        return refuse(kind == 1 || mla ? "with MLA and other layers in one cache"
                      : kind == 2      ? "with linear-attention layers"
                                       : fmt::format("with attention kind {}", kind));
    if (a[7].i != 0) return refuse("with disaggregation (enable_disaggregation)");
    if (!want(a, 12, Value::Kind::Tensor, "the dtype's zero tensor")) return false;
    KvCacheConfig c;
    c.max_batch_size = cfg[0], c.max_total_seq_len = cfg[1], c.prefill_chunk_size = cfg[2], c.page_size = cfg[3];
    c.layer_begin = a[1].shape[0], c.num_layers = a[1].shape[1] - a[1].shape[0];
    c.num_qo_heads = a[2].i, c.num_kv_heads = a[3].i, c.qk_head_dim = a[4].i, c.v_head_dim = a[5].i;
    c.rope_mode = a[8].i;
    if (a[11].kind == Value::Kind::Tensor) {  // LongRoPE's factors (else IntImm 0: none)
      if (!usable(static_cast<int>(a[11].i), 11)) return false;
      kv_factors_ = static_cast<int>(a[11].i);
      c.rope_ext_factors = tensors_[a[11].i].shape;
      if (c.rope_ext_factors.empty()) c.rope_ext_factors = {1};
    }
    if (!number(9, &c.rope_scale) || !number(10, &c.rope_theta)) return false;
    c.dtype = tensors_[a[12].i].dtype;
    // A function, or ("tirx" | "tir", function): the TIR backend; anything else (FlashInfer) is refused.
    auto function = [&](const Value& v, size_t k, std::string* out) {
      const Value* f = &v;
      if (f->kind == Value::Kind::Tuple) {
        if (f->items.size() != 2 || f->items[0].kind != Value::Kind::String || f->items[1].kind != Value::Kind::Func)
          return fail(fmt::format("argument {} is neither a function nor a (backend, function) pair", k)), false;
        if (f->items[0].s != "tirx" && f->items[0].s != "tir")
          return refuse(fmt::format("with the {} attention backend", detail::quote_input(f->items[0].s)));
        f = &f->items[1];
      }
      if (f->kind != Value::Kind::Func)
        return fail(fmt::format("argument {} is {}, not a function", k, kind_name(f->kind))), false;
      *out = ex_.functions[static_cast<size_t>(f->i)].name;
      if (!host_.count(*out))
        return fail(fmt::format("argument {} names {}, which host.c does not define", k, detail::quote_input(*out))),
               false;
      return true;
    };
    if (!function(a[13], 13, &c.transpose_append) || !function(a[15], 15, &c.prefill_ragged) ||
        !function(a[24], 24, &c.split_rotary))
      return false;
    // An MLA cache has no MHA paged kernels (empty tuples); its own are the latent append and
    // the MLA paged attention.
    if (mla ? !function(a[14], 14, &c.transpose_append_mla) || !function(a[22], 22, &c.mla_prefill)
            : !function(a[16], 16, &c.prefill_paged) || !function(a[17], 17, &c.decode))
      return false;
    c.attn_kinds = a[6].shape;
    if (cfg.size() == 6) c.layer_window = cfg[5];  // TVM 0.27: layer_sliding_window_size
    c.support_sliding_window = cfg[4] != 0;
    if ((c.layer_sliding() || c.support_sliding_window) &&
        (!function(a[18], 18, &c.prefill_sliding) || !function(a[19], 19, &c.decode_sliding)))
      return false;
    // The merge functions: the depths' merge, and with MLA the general one (MergeAttnOutputInplace).
    if (a[23].kind != Value::Kind::Tuple || a[23].items.size() != (mla ? 2u : 1u))
      return fail(fmt::format("argument 23 (the merge functions) is not a tuple of {} function{}", mla ? 2 : 1,
                              mla ? "s" : "")),
             false;
    if (!function(a[23].items[0], 23, &c.merge)) return false;
    if (mla && !function(a[23].items[1], 23, &c.merge_general)) return false;
    // copy_single_page (forks within a page): absent in some builds; a fork that needs it is refused.
    if ((a[25].kind == Value::Kind::Func || a[25].kind == Value::Kind::Tuple) &&
        !function(a[25], 25, &c.copy_single_page))
      return false;
    Expected<PagedKvCacheModel> m = PagedKvCacheModel::create(c);
    if (!m) {
      error_ = file_error(ex_.file, fmt::format("instruction {} ({}): {}", pc_, callee_, m.error().message),
                          m.error().code);
      return false;
    }
    kv_.emplace(m.take());
    // The buffers, each its own storage, as the create node's outputs.
    PendingNode node;
    node.func = callee_;
    node.instr = static_cast<uint64_t>(pc_);
    auto alloc = [&](KvBuffer b, int64_t layer, const std::string& name) {
      TensorObj t;
      t.home = TensorObj::Home::Storage;
      t.known = t.dtype_known = true;
      t.shape = kv_->buffer_shape(b);
      t.dtype = kv_->buffer_dtype(b);
      uint64_t bytes = 0;
      tensor_bytes(t.shape, t.dtype, &bytes);
      t.index = static_cast<int>(storage_bytes_.size());
      storage_bytes_.push_back(bytes);
      t.written = true;
      t.producer = static_cast<int>(nodes_.size());
      const int id = static_cast<int>(tensors_.size());
      tensors_.push_back(t);
      kv_tensor_[{static_cast<int>(b), layer}] = id;
      kv_name_[t.index] = name;
      node.outputs.push_back(id);
    };
    for (int64_t l = 0; l < c.num_layers; ++l)
      alloc(KvBuffer::Pages, l, fmt::format("kv_cache.pages[{}]", c.layer_begin + l));
    if (!c.mla()) {  // the constructor allocates the split q, k and v only for MHA layers
      alloc(KvBuffer::TempQ, 0, "kv_cache.temp_q");
      alloc(KvBuffer::TempK, 0, "kv_cache.temp_k");
      alloc(KvBuffer::TempV, 0, "kv_cache.temp_v");
    }
    alloc(KvBuffer::TempO, 0, "kv_cache.temp_output");
    alloc(KvBuffer::TempLse, 0, "kv_cache.temp_lse");
    alloc(KvBuffer::MergedLse, 0, "kv_cache.merged_lse");
    alloc(KvBuffer::Aux, 0, "kv_cache.aux");
    alloc(KvBuffer::CompactAux, 0, "kv_cache.compact_aux");
    mark(node);
    nodes_.push_back(std::move(node));
    Value v;
    v.kind = Value::Kind::Object;
    v.s = "paged_kv_cache";
    return set(ins.dst, std::move(v));
  }

  /// The KV cache's runtime running AttentionWithFusedQKV(layer, qkv, o, sm_scale): each host
  /// function it calls is a node of the flow, in order, with the arguments the runtime passes
  /// (views of its buffers, the auxiliary arrays at their offsets, scalars); the copy of the
  /// auxiliary arrays to the device is a node with the values it copies. A buffer written is a
  /// new version of its storage; one written in part also reads the version before.
  bool kv_runtime_attention(const VmInstruction& ins, int64_t layer, double sm_scale, int qkv, int out) {
    Expected<std::vector<KvCall>> calls =
        kv_->attention_with_fused_qkv(layer, tensors_[qkv].shape.empty() ? 0 : tensors_[qkv].shape[0], sm_scale);
    if (!calls) return fail(calls.error().message), false;
    std::vector<int> vm{qkv, out};
    if (!kv_runtime_calls(*calls, callee_, layer, vm)) return false;
    return set(ins.dst, void_value());
  }

  /// The host functions the KV cache's runtime calls (an attention's, or a fork's page copies),
  /// each a node of the flow in order, called from `runtime_call`; `vm` holds the builtin's
  /// tensors (fused attention: qkv and the output; empty outside one), each replaced by its new
  /// version where a call writes it again.
  bool kv_runtime_calls(const std::vector<KvCall>& calls, const std::string& runtime_call, int64_t layer,
                        std::vector<int>& vm) {
    for (const KvCall& call : calls) {
      PendingNode node;
      node.func = call.function.empty() ? "kv_cache.copy_aux_to_device" : call.function;
      node.instr = static_cast<uint64_t>(pc_);
      node.attrs["runtime_call"] = runtime_call;
      if (const int64_t l = call.layer >= 0 ? call.layer : layer; l >= 0) node.attrs["kv_layer"] = std::to_string(l);
      node.attrs["kv_role"] = call.role;
      const int self = static_cast<int>(nodes_.size());
      auto add_unique = [](std::vector<int>& v, int x) {
        if (std::find(v.begin(), v.end(), x) == v.end()) v.push_back(x);
      };
      std::vector<std::pair<int, int>> replaced;  // (old version, new version) of the VM's output
      for (const KvArg& ka : call.args) {
        PendingArg pa;
        if (ka.kind == KvArg::Kind::Int || ka.kind == KvArg::Kind::Float) {
          pa.kind = ka.kind == KvArg::Kind::Int ? RelaxCallArg::Kind::Int : RelaxCallArg::Kind::Float;
          pa.i = ka.i;
          pa.f = ka.f;
          node.args.push_back(pa);
          continue;
        }
        const size_t slot = ka.kind == KvArg::Kind::Qkv ? 0 : ka.kind == KvArg::Kind::Output ? 1
                                                                                           : static_cast<size_t>(ka.slot);
        const bool from_vm = ka.kind == KvArg::Kind::Qkv || ka.kind == KvArg::Kind::Output || ka.kind == KvArg::Kind::Vm;
        if (from_vm && slot >= vm.size())
          return fail("internal: a KV cache call outside an attention names its tensors"), false;
        int current = from_vm ? vm[slot] : ka.kind == KvArg::Kind::RopeFactors ? kv_factors_ : -1;
        if (ka.kind != KvArg::Kind::Buffer && current < 0)
          return fail("internal: a KV cache call outside an attention names its tensors"), false;
        if (ka.kind == KvArg::Kind::Buffer) {
          auto it = kv_tensor_.find({static_cast<int>(ka.buffer), ka.buffer == KvBuffer::Pages ? ka.layer : 0});
          if (it == kv_tensor_.end()) return fail("internal: a KV cache buffer that was never allocated"), false;
          current = it->second;
        }
        int used = current;
        if (ka.writes) {
          TensorObj& cur = tensors_[current];
          if ((ka.kind == KvArg::Kind::Output || ka.kind == KvArg::Kind::Vm) && !cur.written) {
            cur.written = true;  // the VM's freshly allocated output, written the first time
            cur.producer = self;
          } else {
            TensorObj t;
            t.home = TensorObj::Home::Storage;
            int root = current;
            while (tensors_[root].home == TensorObj::Home::View) root = tensors_[root].index;
            t.index = tensors_[root].index;
            t.known = t.dtype_known = true;
            t.shape = ka.kind == KvArg::Kind::Buffer && ka.buffer == KvBuffer::Aux ? std::vector<int64_t>{kv_->aux_length()}
                      : ka.kind == KvArg::Kind::Vm                                    ? cur.shape
                                                                                      : ka.shape;
            t.dtype = tensors_[current].dtype;
            t.written = true;
            t.producer = self;
            used = static_cast<int>(tensors_.size());
            tensors_.push_back(t);
            if (ka.keeps) add_unique(node.inputs, current);
            if (ka.kind == KvArg::Kind::Buffer)
              kv_tensor_[{static_cast<int>(ka.buffer), ka.buffer == KvBuffer::Pages ? ka.layer : 0}] = used;
            else
              replaced.emplace_back(current, used);
          }
          add_unique(node.outputs, used);
        } else {
          add_unique(node.inputs, current);
        }
        pa.entry = used;
        pa.shape = ka.kind == KvArg::Kind::Vm && ka.shape.empty() ? tensors_[used].shape : ka.shape;
        pa.dtype = tensors_[used].dtype;
        pa.byte_offset = static_cast<uint64_t>(ka.aux_offset) * 4;
        node.args.push_back(pa);
      }
      // Outputs written before inputs read would confuse no one, but a tensor both read and
      // written in one call is only its new version's producer.
      for (int o : node.outputs)
        node.inputs.erase(std::remove(node.inputs.begin(), node.inputs.end(), o), node.inputs.end());
      if (call.function.empty()) {
        PendingCopy copy;
        copy.node = self;
        copy.tensor = node.outputs.at(0);
        copy.arrays = kv_->aux_arrays();
        copies_.push_back(std::move(copy));
        node.args.clear();
      }
      mark(node);
      nodes_.push_back(std::move(node));
      for (const auto& [from, to] : replaced) {
        Value v;
        v.kind = Value::Kind::Tensor;
        v.i = to;
        replace_everywhere(from, v);
        std::replace(vm.begin(), vm.end(), from, to);
      }
    }
    return true;
  }

  /// vm.builtin.attention_kv_cache_get_query_positions(cache): an int32 tensor of the forward's
  /// T tokens, each one's position in its sequence (what MLC-LLM's gpt2 and gpt_bigcode take
  /// their position embeddings by). In a session it is the first T elements of the KV cache's
  /// auxiliary buffer (q_rope_position_map, at offset 0: kv_state.cc GetQueryPositions returns
  /// that view), after the copy of the arrays, which this call makes when no attention of the
  /// forward has. Without a session the cache is unknown: a node of the runtime call writing
  /// T positions, T the tokens of the function's first input (batch × sequence of the
  /// (b, s, hidden) embeddings every TVM LLM forward takes first).
  bool kv_query_positions(const VmInstruction& ins, const std::vector<Value>& a) {
    if (a.size() != 1) return fail(fmt::format("{} arguments, expected 1 (the cache)", a.size())), false;
    if (kv_ && a[0].kind == Value::Kind::Object) {
      Expected<std::vector<KvCall>> calls = kv_->query_positions();
      if (!calls) return fail(calls.error().message), false;
      std::vector<int> none;
      if (!kv_runtime_calls(*calls, callee_, -1, none)) return false;
      auto it = kv_tensor_.find({static_cast<int>(KvBuffer::Aux), 0});
      if (it == kv_tensor_.end()) return fail("internal: the KV cache has no auxiliary buffer"), false;
      Value src, shape, positions;
      src.kind = Value::Kind::Tensor;
      src.i = it->second;
      shape.kind = Value::Kind::Shape;
      shape.shape = {kv_->tokens()};
      if (!view(src, shape, &positions, /*prefix=*/true)) return false;
      return set(ins.dst, std::move(positions));
    }
    const TensorObj* first = inputs_.empty() ? nullptr : &tensors_[inputs_[0]];
    if (!first || !first->known || first->shape.size() != 3)
      return fail("returns each query token's position in its sequence, which only the KV cache knows: extract a "
                  "session (--session prefill:N,decode:M)"),
             false;
    uint64_t tokens = 0, bytes = 0;
    if (!checked_mul(static_cast<uint64_t>(first->shape[0]), static_cast<uint64_t>(first->shape[1]), &tokens) ||
        tokens > (1ull << 32))
      return fail("the first input's batch × sequence is above 2^32 tokens"), false;
    TensorObj t;
    t.home = TensorObj::Home::Storage;
    t.index = static_cast<int>(storage_bytes_.size());
    t.known = t.dtype_known = true;
    t.shape = {static_cast<int64_t>(tokens)};
    t.dtype = DType{0, 32, 1};
    t.written = true;
    t.producer = static_cast<int>(nodes_.size());
    tensor_bytes(t.shape, t.dtype, &bytes);
    storage_bytes_.push_back(bytes);
    const int id = static_cast<int>(tensors_.size());
    tensors_.push_back(t);
    PendingNode node;
    node.func = callee_;
    node.instr = static_cast<uint64_t>(pc_);
    node.outputs = {id};
    mark(node);
    nodes_.push_back(std::move(node));
    Value v;
    v.kind = Value::Kind::Tensor;
    v.i = id;
    return set(ins.dst, std::move(v));
  }

  /// vm.builtin.check_shape_info(value, ndim, error context): a shape argument (a
  /// ShapeTuple), as create_tir_paged_kv_cache takes. Only a known shape passes: a session's,
  /// or a VM parameter's given as --input-shape NAME=V1xV2 (phi3_v's image sizes), which
  /// then is that shape wherever the function reads it, and no tensor input of the flow.
  bool check_shape_info(const std::vector<Value>& a) {
    if (a.size() != 3) return fail(fmt::format("{} arguments, expected 3", a.size())), false;
    if (a[0].kind == Value::Kind::Shape) return true;
    if (a[0].kind == Value::Kind::Tensor && tensors_[a[0].i].home == TensorObj::Home::Input &&
        !tensors_[a[0].i].known) {
      const int index = tensors_[a[0].i].index;
      const std::string pname = static_cast<size_t>(index) < param_names_.size() ? param_names_[index]
                                                                                 : fmt::format("input{}", index);
      auto it = env_.input_shapes.find(index);
      if (it == env_.input_shapes.end())
        return fail(fmt::format("VM parameter {} ({}) is a shape (a ShapeTuple): give its values with --input-shape "
                                "{}=V1xV2... (or run the function in a session)",
                                index, detail::quote_input(pname), pname)),
               false;
      if (a[1].kind == Value::Kind::Int && a[1].i >= 0 && static_cast<int64_t>(it->second.size()) != a[1].i)
        return fail(fmt::format("VM parameter {} ({}) is a shape of {} values; --input-shape gives {}", index,
                                detail::quote_input(pname), a[1].i, it->second.size())),
               false;
      Value shape;
      shape.kind = Value::Kind::Shape;
      shape.shape = it->second;
      replace_everywhere(a[0].i, shape);
      return true;
    }
    return fail(fmt::format("the value is {}, not a shape", kind_name(a[0].kind))), false;
  }

  /// vm.builtin.attention_kv_cache_attention_with_fused_qkv(cache, layer, sm_scale, qkv, o):
  /// TVM's runtime splits qkv, applies rotary embedding, appends k and v to the layer's pages
  /// and runs attention into o (paged_kv_cache.cc). A node of the flow that reads qkv and
  /// writes o, with the layer and the scale.
  bool kv_attention(const VmInstruction& ins, const std::vector<Value>& a) {
    if (a.size() != 5) return fail(fmt::format("{} arguments, expected 5", a.size())), false;
    if (!want(a, 1, Value::Kind::Int, "the layer") || !want(a, 3, Value::Kind::Tensor, "qkv") ||
        !want(a, 4, Value::Kind::Tensor, "the output"))
      return false;
    if (a[2].kind != Value::Kind::Float && a[2].kind != Value::Kind::Int)
      return fail(fmt::format("argument 2 (the attention scale) is {}, not a number", kind_name(a[2].kind))), false;
    const int qkv = static_cast<int>(a[3].i), out = static_cast<int>(a[4].i);
    if (!usable(qkv, 3) || !usable(out, 4)) return false;
    TensorObj& o = tensors_[out];
    if (o.home != TensorObj::Home::Storage || o.written)
      return fail("the output is not a freshly allocated tensor"), false;
    if (kv_ && a[0].kind == Value::Kind::Object)
      return kv_runtime_attention(ins, a[1].i, a[2].kind == Value::Kind::Float ? a[2].f : static_cast<double>(a[2].i),
                                  qkv, out);
    PendingNode node;
    node.func = callee_;
    node.instr = static_cast<uint64_t>(pc_);
    node.inputs = {qkv};
    node.outputs = {out};
    node.attrs["kv_layer"] = std::to_string(a[1].i);
    node.attrs["sm_scale"] = a[2].kind == Value::Kind::Float ? fmt::format("{}", a[2].f) : std::to_string(a[2].i);
    o.written = true;
    o.producer = static_cast<int>(nodes_.size());
    mark(node);
    nodes_.push_back(std::move(node));
    return set(ins.dst, void_value());
  }

  /// MLA's builtins (kv_state.cc), as MLC-LLM's DeepSeek-V2 calls them:
  ///   self_attention(cache, layer, sm_scale, q, k, v, o, lse), cross_attention(cache, layer,
  ///   sm_scale, q, o, lse), append_mla_kv(cache, layer, kv) → cache,
  ///   merge_attn_output_inplace(cache, o1, lse1, o2, lse2) → (o1, lse1).
  /// In a session each is the host functions the runtime calls (PagedKvCacheModel); without one,
  /// a node of the runtime call with the tensors it reads and writes.
  bool kv_mla(const VmInstruction& ins, const std::vector<Value>& a, const std::string& which) {
    const bool self = which == "self_attention", cross = which == "cross_attention",
               append = which == "append_mla_kv";
    const size_t want_args = self ? 8 : cross ? 6 : append ? 3 : 5;
    if (a.size() != want_args) return fail(fmt::format("{} arguments, expected {}", a.size(), want_args)), false;
    const size_t first_tensor = append ? 2 : (self || cross) ? 3 : 1;
    if ((self || cross || append) && !want(a, 1, Value::Kind::Int, "the layer")) return false;
    double sm_scale = 0;
    if (self || cross) {
      if (a[2].kind != Value::Kind::Float && a[2].kind != Value::Kind::Int)
        return fail(fmt::format("argument 2 (the attention scale) is {}, not a number", kind_name(a[2].kind))), false;
      sm_scale = a[2].kind == Value::Kind::Float ? a[2].f : static_cast<double>(a[2].i);
    }
    std::vector<int> vm;
    for (size_t k = first_tensor; k < a.size(); ++k) {
      if (!want(a, k, Value::Kind::Tensor, "a tensor") || !usable(static_cast<int>(a[k].i), static_cast<int>(k)))
        return false;
      vm.push_back(static_cast<int>(a[k].i));
    }
    // The tensors the call writes, [written_from, written_to) of vm: the attentions' o and lse,
    // which the VM allocated for the call; the merge's o1 and lse1, in place; none for append.
    const size_t written_from = self ? 3 : cross ? 1 : 0, written_to = append ? 0 : self || cross ? vm.size() : 2;
    const bool in_place = !self && !cross;
    for (size_t k = written_from; k < written_to && !in_place; ++k) {
      const TensorObj& t = tensors_[vm[k]];
      if (t.home != TensorObj::Home::Storage || t.written)
        return fail(fmt::format("argument {} (an output) is not a freshly allocated tensor", first_tensor + k)), false;
    }
    const int64_t rows = tensors_[vm[0]].shape.empty() ? 0 : tensors_[vm[0]].shape[0];
    if (kv_ && a[0].kind == Value::Kind::Object) {
      Expected<std::vector<KvCall>> calls = self     ? kv_->self_attention(a[1].i, rows, sm_scale)
                                            : cross  ? kv_->cross_attention(a[1].i, rows, sm_scale)
                                            : append ? kv_->append_mla_kv(a[1].i, rows)
                                                     : kv_->merge_attn_output(rows);
      if (!calls) return fail(calls.error().message), false;
      if (!kv_runtime_calls(*calls, callee_, append || self || cross ? a[1].i : -1, vm)) return false;
    } else {
      // No session: one node of the runtime call; a merge writes o1 and lse1 anew.
      PendingNode node;
      node.func = callee_;
      node.instr = static_cast<uint64_t>(pc_);
      if (self || cross || append) node.attrs["kv_layer"] = std::to_string(a[1].i);
      if (self || cross) node.attrs["sm_scale"] = fmt::format("{}", sm_scale);
      const int me = static_cast<int>(nodes_.size());
      for (size_t k = 0; k < vm.size(); ++k) {
        if (k >= written_from && k < written_to) {
          if (in_place) {  // a new version that reads the old
            node.inputs.push_back(vm[k]);
            TensorObj t = tensors_[vm[k]];
            t.producer = me;
            const int id = static_cast<int>(tensors_.size());
            tensors_.push_back(t);
            Value v;
            v.kind = Value::Kind::Tensor;
            v.i = id;
            replace_everywhere(vm[k], v);
            vm[k] = id;
          } else {
            tensors_[vm[k]].written = true;
            tensors_[vm[k]].producer = me;
          }
          node.outputs.push_back(vm[k]);
        } else {
          node.inputs.push_back(vm[k]);
        }
      }
      mark(node);
      nodes_.push_back(std::move(node));
    }
    if (append) return set(ins.dst, a[0]);
    if (self || cross) return set(ins.dst, void_value());
    Value t;  // the merge returns (o1, lse1), their new versions
    t.kind = Value::Kind::Tuple;
    for (int k : {vm[0], vm[1]}) {
      Value v;
      v.kind = Value::Kind::Tensor;
      v.i = k;
      t.items.push_back(v);
    }
    return set(ins.dst, std::move(t));
  }

  /// vm.builtin.match_shape(tensor or shape, heap or NULL, ndim, (code, value) × ndim, error
  /// context): code 0 asserts the dimension equals the value, 1 stores it into heap[value],
  /// 2 does nothing, 3 asserts it equals heap[value] (src/runtime/vm/builtin.cc MatchShapeCode).
  bool match_shape(const std::vector<Value>& a) {
    if (a.empty() || (a[0].kind != Value::Kind::Tensor && a[0].kind != Value::Kind::Shape))
      return fail("argument 0 is neither a tensor nor a shape"), false;
    if (!want(a, 2, Value::Kind::Int, "the ndim")) return false;
    const int64_t n = a[2].i;
    if (n < 0 || n > 32 || a.size() < static_cast<size_t>(3 + 2 * n))
      return fail(fmt::format("ndim {} with {} arguments", n, a.size())), false;
    const bool has_heap = a[1].kind == Value::Kind::Heap;
    std::vector<int64_t> shape;
    bool input_unknown = false;
    TensorObj* t = a[0].kind == Value::Kind::Tensor ? &tensors_[a[0].i] : nullptr;
    if (t && !t->known && t->home == TensorObj::Home::Input) {
      input_unknown = true;
      if (t->ndim >= 0 && t->ndim != n)
        return fail(fmt::format("states {} dimensions, check_tensor_info stated {}", n, t->ndim)), false;
      if (!t->dtype_known) return fail("the input's dtype is not stated by vm.builtin.check_tensor_info before"), false;
    } else {
      shape = t ? t->shape : a[0].shape;
      if (static_cast<int64_t>(shape.size()) != n)
        return fail(fmt::format("the value has {} dimensions, the match states {}", shape.size(), n)), false;
    }
    // A parameter whose shape the program stores into the heap has a symbolic shape: it is
    // given from outside; every other dimension of a parameter is stated here.
    bool symbolic = false;
    for (int64_t d = 0; d < n; ++d) {
      if (!want(a, 3 + 2 * d, Value::Kind::Int, "a match code") || !want(a, 4 + 2 * d, Value::Kind::Int, "a value"))
        return false;
      const int64_t code = a[3 + 2 * d].i;
      if (code < 0 || code > 3) return fail(fmt::format("dimension {}: unknown match code {}", d, code)), false;
      if (code != 0) symbolic = symbolic || code == 1 || code == 3;
    }
    if (input_unknown) {
      if (symbolic) {
        auto it = env_.input_shapes.find(t->index);
        const std::string pname = static_cast<size_t>(t->index) < param_names_.size() ? param_names_[t->index]
                                                                                     : fmt::format("input{}", t->index);
        if (it == env_.input_shapes.end())
          return fail(fmt::format("VM parameter {} ({}) has a symbolic shape: give it with --input-shape {}=AxB... or "
                                  "an {} beside the build",
                                  t->index, detail::quote_input(pname), pname, input_file_name(pname))),
                 false;
        shape = it->second;
        if (static_cast<int64_t>(shape.size()) != n)
          return fail(fmt::format("the shape given for {} has {} dimensions, the program states {}",
                                  detail::quote_input(pname), shape.size(), n)),
                 false;
        symbolic_inputs_[t->index] = shape;
      } else {
        for (int64_t d = 0; d < n; ++d) shape.push_back(a[4 + 2 * d].i);
      }
    }
    for (int64_t d = 0; d < n; ++d) {
      const int64_t code = a[3 + 2 * d].i, v = a[4 + 2 * d].i;
      if (shape[d] < 0) return fail(fmt::format("dimension {} is negative", d)), false;
      if (code == 0 && shape[d] != v)
        return fail(fmt::format("dimension {} is {}, the match states {}", d, shape[d], v)), false;
      if (code == 1 || code == 3) {
        if (!has_heap) return fail(fmt::format("dimension {}: match code {} without a shape heap", d, code)), false;
        if (v < 0 || static_cast<uint64_t>(v) >= heap_.size())
          return fail(fmt::format("dimension {}: heap slot {} is outside the heap of {}", d, v, heap_.size())), false;
        if (code == 1) {
          heap_[v] = shape[d], heap_known_[v] = true;
        } else if (!heap_known_[v]) {
          return fail(fmt::format("dimension {}: heap slot {} is read before it is stored", d, v)), false;
        } else if (heap_[v] != shape[d]) {
          return fail(fmt::format("dimension {} is {}, heap slot {} holds {}", d, shape[d], v, heap_[v])), false;
        }
      }
    }
    if (input_unknown) {
      uint64_t bytes = 0;
      if (!tensor_bytes(shape, t->dtype, &bytes)) return fail("the input size is above 1 TiB"), false;
      t->shape = shape;
      t->known = true;
    }
    return true;
  }

  bool alloc_shape_heap(const VmInstruction& ins, const std::vector<Value>& a) {
    if (!want(a, 0, Value::Kind::Vm, "the VM") || !want(a, 1, Value::Kind::Int, "the size")) return false;
    if (a[1].i < 0 || a[1].i > 65536) return fail(fmt::format("a shape heap of {} slots", a[1].i)), false;
    if (!heap_.empty()) return fail("a second shape heap: kdflow models one per function"), false;
    heap_.assign(static_cast<size_t>(a[1].i), 0);
    heap_known_.assign(static_cast<size_t>(a[1].i), false);
    Value v;
    v.kind = Value::Kind::Heap;
    return set(ins.dst, std::move(v));
  }

  /// vm.builtin.make_shape(heap, ndim, (code, value) × ndim): code 0 the value itself, 1 heap[value].
  bool make_shape(const VmInstruction& ins, const std::vector<Value>& a) {
    if (!want(a, 0, Value::Kind::Heap, "the shape heap") || !want(a, 1, Value::Kind::Int, "the ndim")) return false;
    const int64_t n = a[1].i;
    if (n < 0 || n > 32 || a.size() != static_cast<size_t>(2 + 2 * n))
      return fail(fmt::format("ndim {} with {} arguments", n, a.size())), false;
    Value out;
    out.kind = Value::Kind::Shape;
    for (int64_t d = 0; d < n; ++d) {
      if (!want(a, 2 + 2 * d, Value::Kind::Int, "a code") || !want(a, 3 + 2 * d, Value::Kind::Int, "a value")) return false;
      int64_t value = 0;
      if (!heap_or_immediate(a[2 + 2 * d].i, a[3 + 2 * d].i, fmt::format("dimension {}", d), &value)) return false;
      out.shape.push_back(value);
    }
    return set(ins.dst, std::move(out));
  }

  /// A host-only function of host.c called with the shape heap: it computes heap slots.
  bool shape_function(const VmInstruction& ins, const std::vector<Value>& a) {
    if (a.size() != 1) return fail("a shape function called with more than the shape heap"), false;
    if (!env_.shape_function) return fail("a shape function, but no host program to run it"), false;
    // The slots it writes become known; one no code writes stays unset (TVM's heap has holes).
    std::vector<bool> known = heap_known_;
    Expected<std::vector<int64_t>> heap = env_.shape_function(callee_, heap_, &known);
    if (!heap) {
      error_ = heap.error();
      return false;
    }
    if (heap->size() != heap_.size() || known.size() != heap_.size())
      return fail("the shape function changed the heap's size"), false;
    heap_ = heap.take();
    heap_known_ = std::move(known);
    return set(ins.dst, void_value());
  }

  bool usable(int tensor, size_t argi) {
    const TensorObj& t = tensors_[tensor];
    if (!t.known)
      return fail(fmt::format("argument {} is VM parameter {} whose shape and dtype no check_tensor_info and "
                              "match_shape stated",
                              argi, t.index)),
             false;
    return true;
  }

  /// A scalar from the shape heap or an immediate: MakeShapeCode 0 the value, 1 heap[value].
  bool heap_or_immediate(int64_t code, int64_t v, const std::string& what, int64_t* out) {
    if (code == 0) {
      *out = v;
    } else if (code == 1) {
      if (v < 0 || static_cast<uint64_t>(v) >= heap_.size() || !heap_known_[v])
        return fail(fmt::format("{} loads heap slot {}, which holds no value", what, v)), false;
      *out = heap_[v];
    } else {
      return fail(fmt::format("{}: unknown make_shape code {}", what, code)), false;
    }
    return true;
  }

  /// vm.builtin.make_prim_value(heap or NULL, code, value): an int64 (MakeShapeCode).
  bool make_prim_value(const VmInstruction& ins, const std::vector<Value>& a) {
    if (a.size() != 3 || !want(a, 1, Value::Kind::Int, "the code") || !want(a, 2, Value::Kind::Int, "the value"))
      return fail(fmt::format("{} arguments, expected heap, code and value", a.size())), false;
    Value v;
    v.kind = Value::Kind::Int;
    if (!heap_or_immediate(a[1].i, a[2].i, "the value", &v.i)) return false;
    return set(ins.dst, std::move(v));
  }

  /// vm.builtin.match_prim_value(value, heap or NULL, code, slot, error context): as one
  /// dimension of match_shape (MatchShapeCode 0 asserts, 1 stores, 2 nothing, 3 asserts heap).
  bool match_prim_value(const std::vector<Value>& a) {
    if (a.size() < 4 || !want(a, 2, Value::Kind::Int, "the code") || !want(a, 3, Value::Kind::Int, "the slot"))
      return fail(fmt::format("{} arguments, expected value, heap, code, slot", a.size())), false;
    if (a[0].kind != Value::Kind::Int)
      return fail(fmt::format("the value is {}, not a known integer (a VM parameter that is a scalar is not "
                              "modelled)",
                              kind_name(a[0].kind))),
             false;
    const int64_t code = a[2].i, slot = a[3].i, v = a[0].i;
    if (code == 2) return true;
    if (code == 0) return v == slot ? true : (fail(fmt::format("the value is {}, the match states {}", v, slot)), false);
    if (slot < 0 || static_cast<uint64_t>(slot) >= heap_.size())
      return fail(fmt::format("heap slot {} is outside the heap of {}", slot, heap_.size())), false;
    if (code == 1) {
      heap_[slot] = v, heap_known_[slot] = true;
      return true;
    }
    if (code == 3 && heap_known_[slot] && heap_[slot] == v) return true;
    return fail(code == 3 ? fmt::format("the value is {}, heap slot {} holds {}", v, slot,
                                        heap_known_[slot] ? std::to_string(heap_[slot]) : std::string("nothing"))
                          : fmt::format("unknown match code {}", code)),
           false;
  }

  /// vm.builtin.shape_of(tensor): its shape, without touching its data.
  bool shape_of(const VmInstruction& ins, const std::vector<Value>& a) {
    if (a.size() != 1 || !want(a, 0, Value::Kind::Tensor, "the tensor")) return false;
    if (!usable(static_cast<int>(a[0].i), 0)) return false;
    Value v;
    v.kind = Value::Kind::Shape;
    v.shape = tensors_[a[0].i].shape;
    return set(ins.dst, std::move(v));
  }

  /// The values of a tensor the host reads (TVM copies it to the CPU first): a pool constant's
  /// bytes, or a VM parameter's values from its input file (the flow then depends on them:
  /// RelaxProgram::values_used). A tensor a kernel computes has values extract cannot know.
  bool host_values(int id, std::vector<int64_t>* out) {
    int root = id;
    while (tensors_[root].home == TensorObj::Home::View) root = tensors_[root].index;
    const TensorObj& t = tensors_[root];
    const TensorObj& seen = tensors_[id];
    if (root != id)
      return fail("reads the values of a view of a tensor; kdflow reads the values of inputs and constants only"),
             false;
    if (t.home == TensorObj::Home::Constant) {
      const VmConstant& c = ex_.constants[static_cast<size_t>(t.index)];
      if (env_.constant_bytes.empty() || c.data_offset + c.nbytes > env_.constant_bytes.size())
        return fail(fmt::format("reads the values of constant c[{}], whose bytes are not at hand", t.index)), false;
      Expected<std::vector<int64_t>> v = integer_values(c.dtype, env_.constant_bytes.substr(c.data_offset, c.nbytes),
                                                        fmt::format("constant c[{}]", t.index));
      if (!v) return fail(v.error().message), false;
      *out = std::move(*v);
      return true;
    }
    if (t.home == TensorObj::Home::Input) {
      const std::string pname = static_cast<size_t>(t.index) < param_names_.size() ? param_names_[t.index]
                                                                                   : fmt::format("input{}", t.index);
      if (!env_.input_values)
        return fail(fmt::format("reads the values of input {}, and the flow depends on them: put them in {} beside "
                                "the build",
                                detail::quote_input(pname), input_file_name(pname))),
               false;
      Expected<std::vector<int64_t>> v = env_.input_values(t.index);
      if (!v) return fail(v.error().message), false;
      uint64_t elems = 1;
      for (int64_t d : seen.shape) elems *= static_cast<uint64_t>(d);
      if (seen.known && v->size() != elems)
        return fail(fmt::format("input {} holds {} values; the program states {}", detail::quote_input(pname),
                                v->size(), elems)),
               false;
      values_used_[t.index] = *v;
      *out = std::move(*v);
      return true;
    }
    const std::string by = t.producer >= 0 && static_cast<size_t>(t.producer) < nodes_.size()
                               ? fmt::format(" ({} computes them)", nodes_[static_cast<size_t>(t.producer)].func)
                               : std::string();
    return fail(fmt::format("reads on the host the values of a tensor a kernel computes{}; extract runs no kernel, "
                            "so the shapes and calls that follow are unknown",
                            by)),
           false;
  }

  /// vm.builtin.tensor_to_shape(tensor): a 1-D signed integer tensor's values as a shape
  /// (builtin.cc: copied to the CPU, ndim 1, int16/32/64).
  bool tensor_to_shape(const VmInstruction& ins, const std::vector<Value>& a) {
    if (a.size() != 1 || !want(a, 0, Value::Kind::Tensor, "the tensor")) return false;
    const TensorObj& t = tensors_[a[0].i];
    if (!t.dtype_known || t.dtype.code != kDLInt || t.dtype.lanes != 1 ||
        !(t.dtype.bits == 16 || t.dtype.bits == 32 || t.dtype.bits == 64))
      return fail(fmt::format("the tensor is {}; TVM takes int16, int32 or int64",
                              t.dtype_known ? dtype_to_string(t.dtype) : std::string("of unknown dtype"))),
             false;
    if (t.known && t.shape.size() != 1)
      return fail(fmt::format("the tensor has {} dimensions; TVM takes 1", t.shape.size())), false;
    Value v;
    v.kind = Value::Kind::Shape;
    if (!host_values(static_cast<int>(a[0].i), &v.shape)) return false;
    for (int64_t d : v.shape)
      if (d < 0) return fail(fmt::format("the shape it holds has a negative dimension ({})", d)), false;
    return set(ins.dst, std::move(v));
  }

  /// vm.builtin.read_if_cond(value): an If's condition; a tensor's first element on the host.
  bool read_if_cond(const VmInstruction& ins, const std::vector<Value>& a) {
    if (a.size() != 1) return fail(fmt::format("{} arguments, expected 1", a.size())), false;
    Value v;
    v.kind = Value::Kind::Int;
    if (a[0].kind == Value::Kind::Int) {
      v.i = a[0].i != 0;
    } else if (a[0].kind == Value::Kind::Tensor) {
      std::vector<int64_t> values;
      if (!host_values(static_cast<int>(a[0].i), &values)) return false;
      if (values.empty()) return fail("the condition tensor is empty"), false;
      v.i = values[0] != 0;
    } else {
      return fail(fmt::format("the condition is {}", kind_name(a[0].kind))), false;
    }
    return set(ins.dst, std::move(v));
  }

  /// vm.builtin.call_tir_dyn(f, args..., shape) (TVM 0.20 - 0.25: a call_tir with symbolic
  /// scalars): calls f with the arguments, then the shape's values as int64 scalars.
  bool call_tir_dyn(const VmInstruction& ins, const std::vector<Value>& a) {
    if (a.size() < 2 || !want(a, 0, Value::Kind::Func, "the function") ||
        !want(a, a.size() - 1, Value::Kind::Shape, "the scalars"))
      return false;
    const VmFunction& f = ex_.functions[static_cast<size_t>(a[0].i)];
    if (f.kind != VmFunction::Kind::Packed || !host_.count(f.name))
      return fail(fmt::format("calls {}, which is not a function of host.c", detail::quote_input(f.name))), false;
    std::vector<Value> args(a.begin() + 1, a.end() - 1);
    for (int64_t s : a.back().shape) {
      Value v;
      v.kind = Value::Kind::Int;
      v.i = s;
      args.push_back(std::move(v));
    }
    callee_ = f.name;
    return fused(ins, args);
  }

  /// relax.run.shape_to_tensor(shape) (TVM 0.20 - 0.25's lowering of R.shape_to_tensor; ONNX
  /// Gather): a new int64 tensor holding the shape's values, which TVM fills on the host. Here a
  /// buffer of its own and a node that copies the values into it (Dataflow::host_copies), so
  /// the kernels that read it read those values.
  bool shape_to_tensor(const VmInstruction& ins, const std::vector<Value>& a) {
    if (a.size() != 1 || !want(a, 0, Value::Kind::Shape, "the shape")) return false;
    TensorObj t;
    t.home = TensorObj::Home::Storage;
    t.index = static_cast<int>(storage_bytes_.size());
    storage_bytes_.push_back(8 * std::max<uint64_t>(a[0].shape.size(), 1));
    t.known = t.dtype_known = t.written = true;
    t.shape = {static_cast<int64_t>(a[0].shape.size())};
    t.dtype = DType{kDLInt, 64, 1};
    const int id = static_cast<int>(tensors_.size());
    t.producer = static_cast<int>(nodes_.size());
    tensors_.push_back(t);
    PendingNode node;
    node.func = "relax.run.shape_to_tensor";
    node.instr = static_cast<uint64_t>(pc_);
    node.outputs = {id};
    mark(node);
    PendingCopy copy;
    copy.node = static_cast<int>(nodes_.size());
    copy.tensor = id;
    copy.dtype = "int64";
    copy.arrays.push_back(KvAuxArray{"shape", 0, a[0].shape});
    copies_.push_back(std::move(copy));
    nodes_.push_back(std::move(node));
    Value v;
    v.kind = Value::Kind::Tensor;
    v.i = id;
    return set(ins.dst, std::move(v));
  }

  /// runtime.disco.<kind>: a collective (disco.h) every rank makes at this point, a node of the
  /// flow that reads what it sends and writes what it receives; world_size is the ranks the
  /// build is run with. A value that differs per rank (worker_id) is refused: the flow is one
  /// program for every rank.
  bool disco(const VmInstruction& ins, const std::vector<Value>& a) {
    const std::string& n = callee_;
    if (n == "runtime.disco.world_size") {
      if (env_.ranks <= 0)
        return fail("asks for the number of ranks: give the shards (params_shard<r>.bin beside the build, or "
                    "--shards N)"),
               false;
      Value v;
      v.kind = Value::Kind::Int;
      v.i = env_.ranks;
      return set(ins.dst, std::move(v));
    }
    if (n == "runtime.disco.worker_id" || n == "runtime.disco.worker_rank" || n == "runtime.disco.device")
      return fail("a value that differs per rank: kdflow extracts one program that every rank runs, and this one "
                  "would differ between ranks"),
             false;
    std::vector<DiscoOperand> ops(a.size());
    for (size_t k = 0; k < a.size(); ++k) {
      DiscoOperand& o = ops[k];
      switch (a[k].kind) {
        case Value::Kind::Tensor:
          if (!usable(static_cast<int>(a[k].i), k)) return false;
          o.kind = DiscoOperand::Kind::Tensor;
          o.shape = tensors_[a[k].i].shape;
          o.dtype = tensors_[a[k].i].dtype;
          break;
        case Value::Kind::Int: o.kind = DiscoOperand::Kind::Int, o.value = a[k].i; break;
        case Value::Kind::Shape: o.kind = DiscoOperand::Kind::Shape, o.shape = a[k].shape; break;
        case Value::Kind::Void: o.kind = DiscoOperand::Kind::None; break;
        default: o.what = kind_name(a[k].kind); break;
      }
    }
    Expected<DiscoCall> d = describe_disco_call(n, ops);
    if (!d) return fail(d.error().message), false;
    const Collective& c = d->collective;
    PendingNode node;
    node.func = n;
    node.instr = static_cast<uint64_t>(pc_);
    if (c.send >= 0) node.inputs.push_back(static_cast<int>(a[static_cast<size_t>(c.send)].i));
    if (c.recv >= 0) {
      const int id = static_cast<int>(a[static_cast<size_t>(c.recv)].i);
      TensorObj& t = tensors_[id];
      if (t.home != TensorObj::Home::Storage || t.written)
        return fail(fmt::format("argument {} (recv) is not a freshly allocated tensor: a collective into a tensor "
                                "already written (in place) is not modelled",
                                c.recv)),
               false;
      node.outputs.push_back(id);
    }
    node.attrs["collective"] = c.kind;
    if (!c.reduce_op.empty()) node.attrs["reduce_op"] = c.reduce_op;
    node.attrs["in_group"] = c.in_group ? "1" : "0";
    if (c.peer >= 0) node.attrs["peer"] = std::to_string(c.peer);
    for (int id : node.outputs) tensors_[id].written = true, tensors_[id].producer = static_cast<int>(nodes_.size());
    mark(node);
    nodes_.push_back(std::move(node));
    return set(ins.dst, void_value());
  }

  /// vm.builtin.ensure_zero_offset(tensor): the tensor itself where its data starts at offset 0
  /// of its allocation (every tensor kdflow models on the GPU: CUDA supports pointer arithmetic,
  /// builtin.cc then returns a view with the offset folded into the pointer).
  bool ensure_zero_offset(const VmInstruction& ins, const std::vector<Value>& a) {
    if (a.size() != 1 || !want(a, 0, Value::Kind::Tensor, "the tensor")) return false;
    return set(ins.dst, a[0]);
  }

  /// vm.builtin.make_closure(f, saved...): f with its last arguments bound.
  bool make_closure(const VmInstruction& ins, const std::vector<Value>& a) {
    if (a.empty() || !want(a, 0, Value::Kind::Func, "the function")) return false;
    Value v = a[0];
    v.items.assign(a.begin() + 1, a.end());
    return set(ins.dst, std::move(v));
  }

  /// vm.builtin.invoke_closure(vm, closure, args...): the VM function with the arguments, then
  /// the closure's saved values (InvokeClosurePacked).
  bool invoke_closure(const VmInstruction& ins, const std::vector<Value>& a) {
    if (!want(a, 0, Value::Kind::Vm, "the VM") || !want(a, 1, Value::Kind::Func, "the closure")) return false;
    std::vector<Value> args(a.begin() + 2, a.end());
    args.insert(args.end(), a[1].items.begin(), a[1].items.end());
    const VmFunction& f = ex_.functions[static_cast<size_t>(a[1].i)];
    if (f.kind == VmFunction::Kind::Packed) {
      if (!host_.count(f.name)) return fail(fmt::format("calls {}, which is not a function of host.c", f.name)), false;
      callee_ = f.name;
      return fused(ins, args);
    }
    Value out;
    if (!invoke(a[1].i, args, &out)) return false;
    return set(ins.dst, std::move(out));
  }

  bool reshape(const VmInstruction& ins, const std::vector<Value>& a) {
    if (!want(a, 0, Value::Kind::Tensor, "the tensor") || !want(a, 1, Value::Kind::Shape, "the new shape")) return false;
    Value v;
    if (!view(a[0], a[1], &v)) return false;
    return set(ins.dst, std::move(v));
  }

  /// A view of tensor `src` under `new_shape` (the same bytes): a __nop node.
  /// `prefix`: the view may be smaller, the source's first bytes (the KV cache's query positions).
  bool view(const Value& src_v, const Value& new_shape, Value* out, bool prefix = false) {
    const std::vector<Value> a = {src_v, new_shape};
    if (!usable(static_cast<int>(a[0].i), 0)) return false;
    const TensorObj src = tensors_[a[0].i];
    uint64_t old_bytes = 0, new_bytes = 0;
    tensor_bytes(src.shape, src.dtype, &old_bytes);
    if (!tensor_bytes(a[1].shape, src.dtype, &new_bytes) || (prefix ? new_bytes > old_bytes : new_bytes != old_bytes))
      return fail(fmt::format("reshapes [{}] to [{}], another size", fmt::join(src.shape, ", "),
                              fmt::join(a[1].shape, ", "))),
             false;
    TensorObj t;
    t.home = TensorObj::Home::View;
    t.index = static_cast<int>(a[0].i);
    t.known = t.dtype_known = true;
    t.shape = a[1].shape;
    t.dtype = src.dtype;
    t.written = true;
    t.producer = static_cast<int>(nodes_.size());
    const int id = static_cast<int>(tensors_.size());
    tensors_.push_back(t);
    nodes_.push_back(PendingNode{"__nop", {static_cast<int>(a[0].i)}, {id}, static_cast<uint64_t>(pc_), {}, {}});
    mark(nodes_.back());
    out->kind = Value::Kind::Tensor;
    out->i = id;
    return true;
  }

  bool fused(const VmInstruction& ins, const std::vector<Value>& a) {
    PendingNode node;
    node.func = callee_;
    node.instr = static_cast<uint64_t>(pc_);
    // Scalars among the arguments (TVM 0.26+'s make_prim_value, 0.20 - 0.25's call_tir_dyn):
    // the call's arguments are kept in order, tensors and scalars (RelaxProgram::call_args).
    const bool scalars = std::any_of(a.begin(), a.end(), [](const Value& v) {
      return v.kind == Value::Kind::Int || v.kind == Value::Kind::Float;
    });
    for (size_t k = 0; k < a.size(); ++k) {
      if (scalars && (a[k].kind == Value::Kind::Int || a[k].kind == Value::Kind::Float)) {
        PendingArg s;
        s.kind = a[k].kind == Value::Kind::Int ? RelaxCallArg::Kind::Int : RelaxCallArg::Kind::Float;
        s.i = a[k].i;
        s.f = a[k].f;
        node.args.push_back(std::move(s));
        continue;
      }
      if (a[k].kind != Value::Kind::Tensor)
        return fail(fmt::format("argument {} is {}: only tensors and scalars are passed to host functions in this "
                                "model",
                                k, kind_name(a[k].kind))),
               false;
      const int id = static_cast<int>(a[k].i);
      if (scalars) {
        PendingArg t;
        t.kind = RelaxCallArg::Kind::Tensor;
        t.entry = id;
        t.shape = tensors_[id].shape;
        t.dtype = tensors_[id].dtype;
        node.args.push_back(std::move(t));
      }
      if (!usable(id, k)) return false;
      TensorObj& t = tensors_[id];
      const bool fresh = t.home == TensorObj::Home::Storage && !t.written;
      if (fresh) {
        if (std::find(node.outputs.begin(), node.outputs.end(), id) != node.outputs.end())
          return fail(fmt::format("argument {} is the same unwritten tensor as an earlier argument", k)), false;
        node.outputs.push_back(id);
      } else {
        if (!node.outputs.empty())
          return fail(fmt::format("argument {} is an input after the output argument {}: outputs (tensors no call "
                                  "has written yet) must come last",
                                  k, k - 1)),
                 false;
        node.inputs.push_back(id);
      }
    }
    if (node.outputs.empty())
      return fail("no argument is a freshly allocated tensor: the call's output is unknown"), false;
    for (int id : node.outputs) tensors_[id].written = true, tensors_[id].producer = static_cast<int>(nodes_.size());
    mark(node);
    nodes_.push_back(std::move(node));
    return set(ins.dst, void_value());
  }

  /// The CUDA graph capture and the session step a new node belongs to.
  void mark(PendingNode& n) const {
    if (!region_.empty()) n.attrs["cuda_graph"] = region_;
    if (!step_.empty()) n.attrs["session_step"] = step_;
  }

  void collect_heads(const Value& v, std::vector<int>* out) {
    // A VM parameter no check stated is an object passed through (the KV cache), not a tensor.
    if (v.kind == Value::Kind::Tensor &&
        !(tensors_[v.i].home == TensorObj::Home::Input && !tensors_[v.i].known))
      out->push_back(static_cast<int>(v.i));
    for (const Value& it : v.items) collect_heads(it, out);
  }

  Expected<RelaxProgram> build(const Value& result) {
    callee_ = "";
    std::vector<int> heads;
    collect_heads(result, &heads);
    if (heads.empty()) return fail(fmt::format("returns {}, not a tensor or a tuple of tensors", kind_name(result.kind)));
    return build_heads(heads);
  }

  Expected<RelaxProgram> build_heads(const std::vector<int>& heads) {
    callee_ = "";

    RelaxProgram p;
    p.shape_heap = heap_;
    p.symbolic_inputs = symbolic_inputs_;
    p.values_used = values_used_;
    p.num_storages = static_cast<int64_t>(storage_bytes_.size());
    p.storage_bytes = storage_bytes_;
    Graph& g = p.graph;
    g.file = ex_.file;
    std::map<int, int> entry_of;  // tensor object → entry id
    auto add_node = [&](GraphNode n, const std::vector<int>& outs, int input, int constant, uint64_t instr) {
      const int nid = static_cast<int>(g.nodes.size());
      n.num_outputs = static_cast<int>(outs.size());
      n.num_inputs = static_cast<int>(n.inputs.size());
      g.node_row_ptr.push_back(static_cast<int>(g.entries.size()));
      for (size_t k = 0; k < outs.size(); ++k) {
        const TensorObj& t = tensors_[outs[k]];
        GraphEntry e;
        e.node = nid;
        e.index = static_cast<int>(k);
        e.shape = t.shape;
        e.type = t.dtype;
        e.dtype = dtype_to_string(t.dtype);
        int root = outs[k];
        while (tensors_[root].home == TensorObj::Home::View) root = tensors_[root].index;
        const TensorObj& r = tensors_[root];
        const int64_t n_inputs = static_cast<int64_t>(inputs_.size());
        e.storage_id = r.home == TensorObj::Home::Storage  ? r.index
                       : r.home == TensorObj::Home::Input ? p.num_storages + r.index
                       : r.home == TensorObj::Home::Packed
                           ? p.num_storages + n_inputs + static_cast<int64_t>(const_rank_.size()) + r.index
                           : p.num_storages + n_inputs + const_rank_.at(r.index);
        tensor_bytes(e.shape, e.type, &e.bytes);
        entry_of[outs[k]] = static_cast<int>(g.entries.size());
        g.entries.push_back(std::move(e));
      }
      g.nodes.push_back(std::move(n));
      p.input_index.push_back(input);
      p.constant_index.push_back(constant);
      p.packed_index.push_back(-1);
      p.call_instr.push_back(instr);
      return nid;
    };
    // Constants in pool order get storage ids after the inputs'.
    for (const auto& [c, t] : const_tensor_) const_rank_[c] = static_cast<int>(const_rank_.size());
    for (size_t k = 0; k < inputs_.size(); ++k) {
      const int a = inputs_[k];
      const TensorObj& t = tensors_[a];
      if (!t.known) {
        // A parameter no check states: kept only if nothing uses it (no node, no entry).
        bool used = std::find(heads.begin(), heads.end(), a) != heads.end();
        for (const PendingNode& n : nodes_)
          used = used || std::find(n.inputs.begin(), n.inputs.end(), a) != n.inputs.end();
        if (used) return fail(fmt::format("VM parameter {} is used, but its shape is never stated", a));
        continue;
      }
      GraphNode n;
      n.op = "null";
      n.name = input_names_[k];
      g.arg_nodes.push_back(add_node(std::move(n), {a}, static_cast<int>(k), -1, uint64_t(-1)));
    }
    for (const auto& [c, t] : const_tensor_) {
      GraphNode n;
      n.op = "null";
      n.name = fmt::format("const{}", c);
      g.arg_nodes.push_back(add_node(std::move(n), {t}, -1, static_cast<int>(c), uint64_t(-1)));
    }
    for (size_t k = 0; k < packed_.size(); ++k) {
      GraphNode n;
      n.op = "null";
      n.name = env_.packed->arrays[k].name;
      const int nid = add_node(std::move(n), {packed_[k]}, -1, -1, uint64_t(-1));
      p.packed_index[static_cast<size_t>(nid)] = static_cast<int>(k);
      g.arg_nodes.push_back(nid);
    }
    std::map<std::string, int> seen;
    std::vector<int> node_of_pending;
    for (const PendingNode& pn : nodes_) {
      GraphNode n;
      n.op = "tvm_op";
      n.func_name = pn.func;
      int& k = seen[pn.func];
      n.name = k == 0 ? pn.func : fmt::format("{}_{}", pn.func, k);
      ++k;
      n.attrs["func_name"] = pn.func;
      for (const auto& [k, v] : pn.attrs) n.attrs[k] = v;
      for (int in : pn.inputs) {
        auto it = entry_of.find(in);
        if (it == entry_of.end()) return fail(fmt::format("internal: tensor {} has no producer", in));
        const GraphEntry& e = g.entries[it->second];
        n.inputs.push_back(NodeEntryRef{e.node, e.index, 0});
      }
      if (!pn.args.empty()) n.attrs["num_args"] = std::to_string(pn.args.size());
      const int nid = add_node(std::move(n), pn.outputs, -1, -1, pn.instr);
      node_of_pending.push_back(nid);
      p.call_args.resize(static_cast<size_t>(nid) + 1);
      for (RelaxCallArg ca : pn.args) {
        if (ca.kind == RelaxCallArg::Kind::Tensor) {
          auto it = entry_of.find(ca.entry);
          if (it == entry_of.end()) return fail(fmt::format("internal: tensor {} has no producer", ca.entry));
          ca.entry = it->second;
        }
        p.call_args[static_cast<size_t>(nid)].push_back(std::move(ca));
      }
    }
    p.call_args.resize(g.nodes.size());
    for (const PendingCopy& c : copies_) {
      RelaxHostCopy hc;
      hc.node = node_of_pending.at(static_cast<size_t>(c.node));
      hc.entry = entry_of.at(c.tensor);
      for (const KvAuxArray& a : c.arrays) {
        hc.arrays.emplace_back(a.name, a.offset, static_cast<int64_t>(a.values.size()));
        if (hc.values.size() < static_cast<size_t>(a.offset)) hc.values.resize(static_cast<size_t>(a.offset), 0);
        hc.values.insert(hc.values.end(), a.values.begin(), a.values.end());
      }
      // The padding between arrays is what the pinned host buffer held before (zero here).
      hc.values.resize(static_cast<size_t>(tensors_[c.tensor].shape.at(0)), 0);
      hc.dtype = c.dtype;
      p.host_copies.push_back(std::move(hc));
    }
    for (const auto& [t, eid] : entry_of) {
      int root = t;
      while (tensors_[root].home == TensorObj::Home::View) root = tensors_[root].index;
      if (tensors_[root].home != TensorObj::Home::Storage) continue;
      auto it = kv_name_.find(tensors_[root].index);
      if (it != kv_name_.end()) p.entry_names[eid] = it->second;
    }
    g.node_row_ptr.push_back(static_cast<int>(g.entries.size()));
    for (int h : heads) {
      auto it = entry_of.find(h);
      if (it == entry_of.end()) return fail("returns a tensor no call has written");
      const GraphEntry& e = g.entries[it->second];
      g.heads.push_back(NodeEntryRef{e.node, e.index, 0});
    }
    return p;
  }

  const VmExecutable& ex_;
  std::set<std::string> host_;
  RelaxVmLimits limits_;
  const RelaxVmEnv& env_;
  std::vector<int64_t> heap_;
  std::vector<bool> heap_known_;
  std::map<int, std::vector<int64_t>> symbolic_inputs_;
  std::map<int, std::vector<int64_t>> values_used_;  ///< VM parameter → the values the program read
  std::vector<Value> regs_;
  std::vector<TensorObj> tensors_;
  std::map<int64_t, int> const_tensor_;  // pool index → tensor object
  std::map<int64_t, int> const_rank_;    // pool index → rank among the tensor constants used
  std::vector<PendingNode> nodes_;
  std::vector<uint64_t> storage_bytes_;
  std::vector<std::string> param_names_;
  std::vector<int> packed_;  ///< tensor objects of the packed params (check_tuple_info), in order
  std::map<int64_t, Value> graph_allocs_;  ///< cuda_graph.get_cached_alloc: entry → its allocation
  std::optional<PagedKvCacheModel> kv_;   ///< the KV cache a session created (its runtime, modelled)
  std::map<std::pair<int, int64_t>, int> kv_tensor_;  ///< (KvBuffer, layer) → its current version
  std::map<int, std::string> kv_name_;    ///< storage id → the KV cache buffer's name
  int kv_factors_ = -1;                   ///< the rope_ext_factors tensor the cache was created with (LongRoPE), or -1
  std::vector<PendingCopy> copies_;
  std::string region_;       ///< the CUDA-graph capture running ("capture_function#entry[@shape]"), or ""
  std::string step_;         ///< the session step running ("prefill", "decode 0"), or ""
  std::vector<int> inputs_;  ///< the graph's inputs: tensor objects, in order
  std::vector<std::string> input_names_;
  int depth_ = 0;            ///< closure calls in progress
  uint64_t steps_ = 0;       ///< instructions executed, closures included
  int packed_arg_ = -1;      ///< the VM parameter they came from
  int64_t num_args_ = 0;
  int64_t pc_ = 0;
  std::string callee_;
  Error error_;
};

}  // namespace

Expected<RelaxProgram> run_relax_session(const VmExecutable& ex, const std::vector<std::string>& host_functions,
                                         const RelaxSession& session, const RelaxVmLimits& limits,
                                         const RelaxVmEnv& env) {
  try {
    return Runner(ex, host_functions, limits, env).run_session(session);
  } catch (const std::bad_alloc&) {
    return file_error(ex.file, "out of memory while running the VM program", ExitCode::Software);
  }
}

Expected<RelaxProgram> run_relax_vm(const VmExecutable& ex, const std::vector<std::string>& host_functions,
                                    const std::string& function, const RelaxVmLimits& limits,
                                    const RelaxVmEnv& env) {
  try {
    return Runner(ex, host_functions, limits, env).run(function);
  } catch (const std::bad_alloc&) {
    return file_error(ex.file, "out of memory while running the VM program", ExitCode::Software);
  }
}

}  // namespace kdflow
