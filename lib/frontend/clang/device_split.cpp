// device_split.cpp — device.cu cut at kernel boundaries (device_split.h).
#include "device_split.h"

#include <cstdlib>
#include <vector>

namespace kdflow::detail {

namespace {

struct Line {
  size_t begin = 0, end = 0;  ///< [begin, end) in the source, end past the newline
};

bool starts_with_at(const std::string& s, size_t at, const char* word) {
  for (size_t i = 0; word[i]; ++i)
    if (at + i >= s.size() || s[at + i] != word[i]) return false;
  return true;
}

}  // namespace

std::optional<DeviceHalves> split_device_source(const std::string& src) {
  std::vector<Line> lines;
  for (size_t at = 0; at < src.size();) {
    size_t nl = src.find('\n', at);
    size_t end = nl == std::string::npos ? src.size() : nl + 1;
    lines.push_back({at, end});
    at = end;
  }
  // One pass: brace depth and preprocessor-conditional depth at each line's start, outside
  // comments and literals; a directive runs to its last continued line.
  struct Kernel {
    size_t first = 0, last = 0;  ///< line indices, inclusive
  };
  std::vector<Kernel> kernels;
  long depth = 0, pp_depth = 0;
  bool in_block_comment = false, in_directive = false;
  long kernel_open = -1;  // the line a kernel started on, while its body is open
  bool kernel_body_seen = false;
  for (size_t li = 0; li < lines.size(); ++li) {
    const Line& l = lines[li];
    size_t i = l.begin;
    while (i < l.end && (src[i] == ' ' || src[i] == '\t')) ++i;
    const bool directive_start = !in_block_comment && !in_directive && i < l.end && src[i] == '#';
    if (directive_start) {
      size_t d = i + 1;
      while (d < l.end && (src[d] == ' ' || src[d] == '\t')) ++d;
      const bool pragma = starts_with_at(src, d, "pragma");
      if (starts_with_at(src, d, "line")) return std::nullopt;  // positions already remapped: not ours to redo
      if (starts_with_at(src, d, "if")) ++pp_depth;  // #if, #ifdef, #ifndef
      else if (starts_with_at(src, d, "endif")) --pp_depth;
      if (kernel_open >= 0 && !pragma) return std::nullopt;  // a directive inside a kernel
      if (pp_depth < 0) return std::nullopt;
    }
    if (!in_block_comment && !in_directive && !directive_start && depth == 0 && kernel_open < 0 &&
        starts_with_at(src, i, "extern \"C\" __global__")) {
      if (pp_depth != 0) return std::nullopt;
      kernel_open = static_cast<long>(li);
      kernel_body_seen = false;
    }
    in_directive = directive_start || in_directive;
    // Scan the line's characters.
    for (size_t c = l.begin; c < l.end; ++c) {
      char ch = src[c];
      if (in_block_comment) {
        if (ch == '*' && c + 1 < l.end && src[c + 1] == '/') in_block_comment = false, ++c;
        continue;
      }
      if (ch == '/' && c + 1 < l.end && src[c + 1] == '/') break;  // a line comment
      if (ch == '/' && c + 1 < l.end && src[c + 1] == '*') {
        in_block_comment = true;
        ++c;
        continue;
      }
      if (ch == 'R' && c + 1 < l.end && src[c + 1] == '"') return std::nullopt;  // raw strings: not followed
      if (ch == '"' || ch == '\'') {
        for (++c; c < l.end && src[c] != ch; ++c)
          if (src[c] == '\\') ++c;
        if (c >= l.end) return std::nullopt;  // a literal running past its line
        continue;
      }
      if (in_directive) continue;  // braces of a macro body are not the file's
      if (ch == '{') {
        ++depth;
        if (kernel_open >= 0) kernel_body_seen = true;
      } else if (ch == '}') {
        if (--depth < 0) return std::nullopt;
        if (depth == 0 && kernel_open >= 0 && kernel_body_seen) {
          for (size_t r = c + 1; r < l.end; ++r)
            if (src[r] != ' ' && src[r] != '\t' && src[r] != '\n' && src[r] != '\r') return std::nullopt;
          kernels.push_back({static_cast<size_t>(kernel_open), li});
          kernel_open = -1;
        }
      }
    }
    // A directive continues while its line ends in a backslash.
    if (in_directive) {
      size_t e = l.end;
      while (e > l.begin && (src[e - 1] == '\n' || src[e - 1] == '\r')) --e;
      in_directive = e > l.begin && src[e - 1] == '\\';
    }
  }
  if (depth != 0 || in_block_comment || kernel_open >= 0 || pp_depth != 0 || kernels.size() < 2) return std::nullopt;

  // The cut: before the kernel that best balances the two halves' bytes (the second half
  // also holds every non-kernel line before the cut).
  auto bytes = [&](const Kernel& k) { return lines[k.last].end - lines[k.first].begin; };
  size_t kernel_bytes_before = 0;  // of kernels before the candidate cut
  size_t cut = 1;
  long best = -1;
  for (size_t k = 1; k < kernels.size(); ++k) {
    kernel_bytes_before += bytes(kernels[k - 1]);
    const size_t first = lines[kernels[k].first].begin;        // the first half: everything before
    const size_t shared = first - kernel_bytes_before;          // its non-kernel lines, copied
    const size_t second = shared + (src.size() - first);
    const long off = std::labs(static_cast<long>(first) - static_cast<long>(second));
    if (best < 0 || off < best) best = off, cut = k;
  }
  DeviceHalves h;
  const size_t cut_line = kernels[cut].first;
  h.first = src.substr(0, lines[cut_line].begin);
  // The second half: each run of non-kernel lines before the cut, then the rest.
  size_t k = 0;
  bool in_run = false;
  for (size_t li = 0; li < cut_line; ++li) {
    while (k < cut && kernels[k].last < li) ++k;
    const bool in_kernel = k < cut && kernels[k].first <= li && li <= kernels[k].last;
    if (in_kernel) {
      in_run = false;
      continue;
    }
    if (!in_run) h.second += "#line " + std::to_string(li + 1) + "\n";
    in_run = true;
    h.second.append(src, lines[li].begin, lines[li].end - lines[li].begin);
    if (h.second.back() != '\n') h.second += '\n';
  }
  h.second += "#line " + std::to_string(cut_line + 1) + "\n";
  h.second.append(src, lines[cut_line].begin, std::string::npos);
  h.first_kernels = cut;
  h.second_kernels = kernels.size() - cut;
  return h;
}

}  // namespace kdflow::detail
