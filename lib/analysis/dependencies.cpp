// dependencies.cpp — access binding and kernel-to-kernel dependencies (see dependencies.h).
#include "kdflow/analysis/dependencies.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>

namespace kdflow {

namespace {

Error at(const SourceLoc& loc, const std::string& fallback_file, const std::string& msg) {
  if (loc.valid()) return source_error(loc.file, loc.line, loc.col, msg);
  return file_error(loc.file.empty() ? fallback_file : loc.file, msg);
}

std::string loc_text(const SourceLoc& l) {
  return l.valid() ? fmt::format("{}:{}:{}", l.file, l.line, l.col) : l.file;
}

/// C spellings a scalar kernel parameter of a TVM dtype may have in TVM's CUDA source
/// (after its prelude's #defines: int64_t → long long, uint → unsigned int, ...).
/// Empty: no spelling known, the check is skipped.
std::vector<std::string> c_spellings(const std::string& dtype) {
  static const std::map<std::string, std::vector<std::string>> m = {
      {"int8", {"signed char", "char", "int8_t"}},
      {"uint8", {"unsigned char", "uint8_t", "uchar"}},
      {"int16", {"short", "int16_t"}},
      {"uint16", {"unsigned short", "uint16_t", "ushort"}},
      {"int32", {"int", "int32_t"}},
      {"uint32", {"unsigned int", "uint32_t", "uint"}},
      {"int64", {"long long", "long", "int64_t"}},
      {"uint64", {"unsigned long long", "unsigned long", "uint64_t"}},
      {"float32", {"float"}},
      {"float64", {"double"}},
      {"float16", {"half", "__half"}},
      {"bool", {"bool", "_Bool"}},
  };
  auto it = m.find(dtype);
  return it == m.end() ? std::vector<std::string>{} : it->second;
}

/// "const int __restrict" → "int".
std::string bare_type(std::string t) {
  for (const char* q : {"const ", "volatile ", "__restrict__", "__restrict", "restrict"}) {
    for (size_t p; (p = t.find(q)) != std::string::npos;) t.erase(p, std::string(q).size());
  }
  std::string out;
  for (char c : t) {
    if (c == ' ' && (out.empty() || out.back() == ' ')) continue;
    out += c;
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

}  // namespace

Status apply_device_functions(Dataflow& df, const std::vector<DeviceFunction>& functions, const FunctionTable& table,
                              const std::string& device_file) {
  df.device_functions = functions;
  std::map<std::string, int> by_name;
  for (size_t i = 0; i < functions.size(); ++i) by_name.emplace(functions[i].name, static_cast<int>(i));
  std::set<std::string> checked;
  for (Kernel& k : df.kernels) {
    auto it = by_name.find(k.name);
    if (it == by_name.end())
      return at(k.loc, device_file,
                fmt::format("kernel '{}' is launched here but {} defines no __global__ function of that name", k.name,
                            device_file));
    k.device_function = it->second;
    const DeviceFunction& fn = functions[it->second];
    if (fn.launch_bounds > 0) {
      int64_t threads = k.block[0] * k.block[1] * k.block[2];
      if (threads != fn.launch_bounds)
        return at(fn.loc, device_file,
                  fmt::format("kernel '{}' declares __launch_bounds__({}) but {} launches it with block ({},{},{})",
                              k.name, fn.launch_bounds, loc_text(k.loc), k.block[0], k.block[1], k.block[2]));
    }
    if (checked.insert(k.name).second) {
      const FunctionInfo* info = table.find(k.name);
      if (info) {
        if (info->arg_types.size() != fn.params.size())
          return at(fn.loc, device_file,
                    fmt::format("kernel '{}' has {} parameters, but {} lists {} argument types", k.name,
                                fn.params.size(), table.file, info->arg_types.size()));
        for (size_t i = 0; i < fn.params.size(); ++i) {
          const std::string& dt = info->arg_types[i];
          const DeviceParam& p = fn.params[i];
          if ((dt == "handle") != p.pointer)
            return at(fn.loc, device_file,
                      fmt::format("kernel '{}' parameter {} ('{}') is {}, but {} says {}", k.name, i, p.name,
                                  p.pointer ? "a pointer" : "a scalar", table.file, dt));
          if (!p.pointer) {
            auto spellings = c_spellings(dt);
            std::string bare = bare_type(p.type);
            if (!spellings.empty() && std::find(spellings.begin(), spellings.end(), bare) == spellings.end())
              return at(fn.loc, device_file,
                        fmt::format("kernel '{}' parameter {} ('{}') has type '{}', but {} says {}", k.name, i, p.name,
                                    p.type, table.file, dt));
          }
        }
      }
    }
    for (size_t i = 0; i < k.args.size() && i < fn.params.size(); ++i)
      if (k.args[i].kind == Arg::Kind::Buffer) k.args[i].access = fn.params[i].access;
  }
  return Status::ok();
}

void assume_library_access(Dataflow& df) {
  for (LibraryCall& c : df.library_calls) {
    const Node* n = c.node >= 0 && static_cast<size_t>(c.node) < df.nodes.size() ? &df.nodes[c.node] : nullptr;
    auto has = [](const std::vector<int>& v, int b) { return std::find(v.begin(), v.end(), b) != v.end(); };
    for (Arg& a : c.args) {
      if (a.kind != Arg::Kind::Buffer) continue;
      // A collective reads what it sends and writes what it receives, whole (schema.md).
      if (c.collective) {
        a.access = a.buffer == c.collective->recv ? Access::Write : Access::Read;
        continue;
      }
      // A graph node never writes its inputs (TVM's extern ops read them); its outputs and
      // workspaces may be read back and written in any order by the opaque callee.
      bool input_only = n && has(n->inputs, a.buffer) && !has(n->outputs, a.buffer);
      a.access = input_only ? Access::Read : Access::ReadWrite;
    }
  }
}

void compute_dependencies(Dataflow& df) {
  // The launch sequence: kernels in order, each library call right after the kernel
  // launched before it (after_kernel; -1: before the first kernel).
  struct Launch {
    bool call;
    int id;
    const std::vector<Arg>* args;
  };
  std::vector<Launch> seq;
  seq.reserve(df.kernels.size() + df.library_calls.size());
  std::vector<std::vector<int>> calls_after(df.kernels.size() + 1);
  for (const LibraryCall& c : df.library_calls) {
    size_t slot = c.after_kernel < 0 ? 0 : std::min(static_cast<size_t>(c.after_kernel) + 1, df.kernels.size());
    calls_after[slot].push_back(c.id);
  }
  for (size_t k = 0; k <= df.kernels.size(); ++k) {
    if (k > 0) seq.push_back(Launch{false, df.kernels[k - 1].id, &df.kernels[k - 1].args});
    for (int c : calls_after[k]) seq.push_back(Launch{true, c, &df.library_calls[c].args});
  }

  // Memory key: (0, storage id) for graph buffers, (1, buffer id) for workspaces.
  using Key = std::pair<int, int64_t>;
  struct Touch {
    int launch;  // position in seq
    int buffer;
  };
  struct State {
    bool has_writer = false;
    Touch writer{};
    std::vector<Touch> readers;  // since the last write
  };
  std::map<Key, State> mem;
  std::set<std::tuple<int, int, int, int, int>> seen;
  std::vector<std::pair<std::pair<int, int>, Dependency>> deps;  // ((to, from) positions, dependency)
  auto add = [&](Dependency::Kind kind, const Touch& from, const Touch& to) {
    if (from.launch == to.launch) return;
    if (!seen.insert({from.launch, to.launch, static_cast<int>(kind), from.buffer, to.buffer}).second) return;
    const Launch& f = seq[from.launch];
    const Launch& t = seq[to.launch];
    deps.push_back({{to.launch, from.launch}, Dependency{kind, f.id, t.id, from.buffer, to.buffer, f.call, t.call}});
  };
  auto key_of = [&](int buffer) -> Key {
    const Buffer& b = df.buffers[buffer];
    if (b.kind == BufferKind::Workspace || !b.storage_id) return {1, buffer};
    return {0, *b.storage_id};
  };
  for (size_t pos = 0; pos < seq.size(); ++pos) {
    const int me_launch = static_cast<int>(pos);
    // Reads of one launch happen before its writes take effect for others; collect first.
    std::vector<std::pair<int, Access>> uses;
    for (const Arg& a : *seq[pos].args)
      if (a.kind == Arg::Kind::Buffer) uses.emplace_back(a.buffer, a.access);
    for (const auto& [b, acc] : uses) {
      bool reads = acc != Access::Write;
      if (!reads) continue;
      State& s = mem[key_of(b)];
      if (s.has_writer) add(Dependency::Kind::RAW, s.writer, Touch{me_launch, b});
    }
    for (const auto& [b, acc] : uses) {
      bool writes = acc != Access::Read;
      if (!writes) continue;
      State& s = mem[key_of(b)];
      Touch me{me_launch, b};
      for (const Touch& r : s.readers) add(Dependency::Kind::WAR, r, me);
      if (s.has_writer) add(Dependency::Kind::WAW, s.writer, me);
    }
    for (const auto& [b, acc] : uses) {
      State& s = mem[key_of(b)];
      if (acc != Access::Read) {
        s.has_writer = true;
        s.writer = Touch{me_launch, b};
        s.readers.clear();
      }
    }
    // A read-write launch is the last writer: later writers order after it by WAW.
    for (const auto& [b, acc] : uses)
      if (acc == Access::Read) mem[key_of(b)].readers.push_back(Touch{me_launch, b});
  }
  // By the later launch, then the earlier one, in launch order (for kernels only, the
  // same order as by kernel ids).
  std::stable_sort(deps.begin(), deps.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  df.dependencies.clear();
  for (auto& d : deps) df.dependencies.push_back(d.second);
}

std::vector<int> kernels_without_access(const Dataflow& df) {
  std::vector<int> out;
  for (const Kernel& k : df.kernels) {
    bool analyzed = k.device_function >= 0 && static_cast<size_t>(k.device_function) < df.device_functions.size() &&
                    df.device_functions[k.device_function].access_error.empty();
    if (!analyzed) out.push_back(k.id);
  }
  return out;
}

std::vector<std::string> access_warnings(const Dataflow& df) {
  std::vector<std::string> out;
  for (const DeviceFunction& f : df.device_functions) {
    if (f.access_error.empty()) continue;
    std::string where = f.loc.valid() ? fmt::format("{}:{}:{}", f.loc.file, f.loc.line, f.loc.col)
                                      : (df.sources.device.empty() ? std::string("device.cu") : df.sources.device);
    out.push_back(fmt::format("{}: warning: kernel '{}' not analyzed, its arguments' access is unknown: {}", where,
                              f.name, f.access_error));
  }
  for (const std::string& e : df.device_errors)
    out.push_back(fmt::format("{}: warning: clang error outside the kernels and what they call (no access set "
                              "depends on it): {}",
                              df.sources.device.empty() ? std::string("device.cu") : df.sources.device, e));
  return out;
}

}  // namespace kdflow
