// bounds.cpp — the bounds verdict over the IR (bounds.h).
#include "kdflow/analysis/bounds.h"

#include <fmt/format.h>

namespace kdflow {

const char* to_string(BoundsVerdict v) {
  switch (v) {
    case BoundsVerdict::None: return "none";
    case BoundsVerdict::Proven: return "proven";
    case BoundsVerdict::Unknown: return "unknown";
    case BoundsVerdict::OutOfBounds: return "out-of-bounds";
  }
  return "?";
}

BoundsVerdict bounds_verdict(const Dataflow& df, const Kernel& k, size_t arg, std::string* why) {
  if (arg >= k.args.size()) return BoundsVerdict::None;
  const Arg& a = k.args[arg];
  if (a.kind != Arg::Kind::Buffer || !a.footprint) return BoundsVerdict::None;
  const Footprint& f = *a.footprint;
  if (!f.unknown.empty()) {
    if (why) *why = f.unknown;
    return BoundsVerdict::Unknown;
  }
  if (a.buffer < 0 || static_cast<size_t>(a.buffer) >= df.buffers.size()) {
    if (why) *why = "no such buffer";
    return BoundsVerdict::Unknown;
  }
  const Buffer& b = df.buffers[a.buffer];
  const int64_t size = b.bytes > static_cast<uint64_t>(INT64_MAX) ? INT64_MAX : static_cast<int64_t>(b.bytes);
  std::string bad;
  for (const auto* r : {&f.read, &f.write}) {
    if (!*r) continue;
    int64_t lo = 0, hi = 0;
    if (__builtin_add_overflow(a.offset, (**r)[0], &lo) || __builtin_add_overflow(a.offset, (**r)[1], &hi) || lo < 0 ||
        hi > size) {
      const char* verb = r == &f.read ? "read" : "write";
      bad = fmt::format("kernel {} ({}) argument {} {}s bytes [{}, {}) of buffer {} ('{}', {} bytes)", k.id, k.name, arg,
                        verb, static_cast<long long>(lo), static_cast<long long>(hi), b.id, b.name, b.bytes);
      // Where, for a report upstream: the access reaching the end that leaves the buffer.
      const bool high = hi > size;
      const Footprint::End& end = (r == &f.read ? f.read_ends : f.write_ends)[high ? 1 : 0];
      if (end.line) {
        const bool has_fn = k.device_function >= 0 && static_cast<size_t>(k.device_function) < df.device_functions.size();
        const std::string file = has_fn ? df.device_functions[k.device_function].loc.file : "";
        bad += fmt::format("; its {} byte, {}, is {} at {}:{}", high ? "highest" : "lowest",
                           static_cast<long long>(high ? hi - 1 : lo), r == &f.read ? "read" : "written",
                           file.empty() ? "the device source" : file, end.line);
        if (end.at)
          bad += fmt::format(" by thread ({}, {}, {}) of block ({}, {}, {})", (*end.at)[0], (*end.at)[1], (*end.at)[2],
                             (*end.at)[3], (*end.at)[4], (*end.at)[5]);
      }
      break;
    }
  }
  if (bad.empty()) return BoundsVerdict::Proven;
  if (!f.exact) {
    if (why) *why = "superset footprint leaves the buffer";
    return BoundsVerdict::Unknown;
  }
  if (why) *why = bad;
  return BoundsVerdict::OutOfBounds;
}

BoundsSummary summarize_bounds(const Dataflow& df) {
  BoundsSummary s;
  for (const Kernel& k : df.kernels)
    for (size_t j = 0; j < k.args.size(); ++j) {
      std::string why;
      switch (bounds_verdict(df, k, j, &why)) {
        case BoundsVerdict::None: break;
        case BoundsVerdict::Proven: ++s.proven; break;
        case BoundsVerdict::Unknown:
          ++s.unknown;
          ++s.unknown_reasons[why];
          break;
        case BoundsVerdict::OutOfBounds:
          ++s.out_of_bounds;
          s.violations.push_back(why);
          break;
      }
    }
  return s;
}

std::string bounds_summary_line(const BoundsSummary& s) {
  std::string line = fmt::format("{} proven in bounds, {} unknown, {} out of bounds", s.proven, s.unknown,
                                 s.out_of_bounds);
  if (!s.unknown_reasons.empty()) {
    line += " (unknown:";
    bool first = true;
    for (const auto& [why, n] : s.unknown_reasons) {
      line += fmt::format("{} {} × {}", first ? "" : ",", n, why);
      first = false;
    }
    line += ")";
  }
  return line;
}

Status check_launch_bounds(const Dataflow& df, const Kernel& k) {
  for (size_t j = 0; j < k.args.size(); ++j) {
    std::string why;
    if (bounds_verdict(df, k, j, &why) == BoundsVerdict::OutOfBounds)
      return Error{"out of bounds: " + why + " (a static footprint from device.cu)", ExitCode::DataError};
  }
  return Status::ok();
}

Status check_launch_bounds(const Dataflow& df) {
  for (const Kernel& k : df.kernels)
    if (Status s = check_launch_bounds(df, k); !s) return s;
  return Status::ok();
}

std::optional<int64_t> touched_bytes(const Arg& a, bool write, bool* counted) {
  if (counted) *counted = false;
  if (a.kind != Arg::Kind::Buffer || !a.footprint || !a.footprint->unknown.empty() || !a.footprint->exact)
    return std::nullopt;
  const Footprint& f = *a.footprint;
  const auto& range = write ? f.write : f.read;
  const auto& n = write ? f.write_bytes : f.read_bytes;
  if (!range) return 0;
  if (n) {
    if (counted) *counted = true;
    return *n;
  }
  return (*range)[1] - (*range)[0];
}

std::optional<int64_t> launch_touched_bytes(const std::vector<Arg>& args, int buffer, bool write, bool* counted) {
  if (counted) *counted = false;
  const Arg* only = nullptr;
  for (const Arg& a : args) {
    if (a.kind != Arg::Kind::Buffer || a.buffer != buffer) continue;
    if (only) return std::nullopt;
    only = &a;
  }
  return only ? touched_bytes(*only, write, counted) : std::nullopt;
}

std::string footprint_text(const Dataflow& df, const Kernel& k, size_t arg) {
  if (arg >= k.args.size() || !k.args[arg].footprint) return "";
  const Arg& a = k.args[arg];
  const Footprint& f = *a.footprint;
  std::string why;
  BoundsVerdict v = bounds_verdict(df, k, arg, &why);
  if (!f.unknown.empty()) return "unknown (" + f.unknown + ")";
  std::vector<std::string> parts;
  auto part = [&](const char* verb, const std::optional<std::array<int64_t, 2>>& r, const std::optional<int64_t>& n) {
    if (!r) return;
    std::string p = fmt::format("{} bytes [{}, {}) of the buffer", verb, static_cast<long long>(a.offset) + (*r)[0],
                                static_cast<long long>(a.offset) + (*r)[1]);
    if (n) p += fmt::format(" ({} distinct)", *n);
    parts.push_back(p);
  };
  part("reads", f.read, f.read_bytes);
  part("writes", f.write, f.write_bytes);
  std::string out = parts.empty() ? std::string("touches nothing") : parts[0];
  if (parts.size() > 1) out += ", " + parts[1];
  if (f.elements) out += fmt::format(", {} element{}", *f.elements, *f.elements == 1 ? "" : "s");
  if (!f.exact) out += ", a superset (a guard reads data)";
  switch (v) {
    case BoundsVerdict::Proven: out += "; proven in bounds"; break;
    case BoundsVerdict::Unknown: out += "; bounds unknown (" + why + ")"; break;
    case BoundsVerdict::OutOfBounds: out += "; OUT OF BOUNDS"; break;
    case BoundsVerdict::None: break;
  }
  return out;
}

std::string footprints_summary_text(const Dataflow& df) {
  for (const Kernel& k : df.kernels)
    for (const Arg& a : k.args)
      if (a.footprint) return bounds_summary_line(summarize_bounds(df));
  return "not computed (no device.cu)";
}

}  // namespace kdflow
