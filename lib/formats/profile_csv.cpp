// profile_csv.cpp — a strict RFC 4180 CSV reader with positions, the Nsight Compute and
// Nsight Systems export layouts on top of it, and the name-in-order join of profiled
// launches to the IR's kernels. No exceptions; every error names file:line:col.
#include "kdflow/formats/profile_csv.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <map>
#include <string_view>
#include <vector>

#include <fmt/format.h>

namespace kdflow {
namespace {

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && (s[b] == ' ' || s[b] == '\t')) ++b;
  while (e > b && (s[e - 1] == ' ' || s[e - 1] == '\t')) --e;
  return s.substr(b, e - b);
}

/// A field's text for a message: control bytes replaced, at most 60 bytes.
std::string shown(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (out.size() >= 60) return out + "...";
    out += static_cast<unsigned char>(c) < 0x20 || c == 0x7f ? '?' : c;
  }
  return out;
}

class CsvParser {
 public:
  CsvParser(const std::string& text, const std::string& file, const std::vector<std::string>& header_names = {})
      : s_(text), file_(file), header_names_(header_names) {}

  Expected<CsvTable> run() {
    if (s_.size() > kMaxCsvBytes)
      return file_error(file_, fmt::format("larger than {} bytes", kMaxCsvBytes));
    if (s_.compare(0, 3, "\xEF\xBB\xBF") == 0) i_ = 3, col_ = 4;
    // ncu prints its ==PROF== / ==WARNING== lines on stdout (skipped below, wherever they are),
    // where the profiled program's own output goes too (`ncu --csv ./app > profile.csv`): with
    // header names given, the header is the first line naming one of them, and every line
    // before it is skipped.
    if (!header_names_.empty()) skip_to_header();
    CsvTable t;
    bool have_header = false;
    while (i_ < s_.size()) {
      if (at_line_end()) {  // a blank line
        skip_line_end();
        continue;
      }
      if (s_.compare(i_, 2, "==") == 0) {  // ncu's messages (a record always starts a line)
        skip_line();
        continue;
      }
      CsvRow row;
      row.line = line_;
      if (Status st = record(row.fields); !st) return st.error();
      if (!have_header) {
        t.header = std::move(row.fields);
        have_header = true;
        continue;
      }
      if (row.fields.size() != t.header.size()) {
        const CsvField& last = row.fields.back();
        return source_error(file_, last.line, last.col,
                            fmt::format("this row has {} fields, the header (line {}) has {}", row.fields.size(),
                                        t.header.front().line, t.header.size()));
      }
      t.rows.push_back(std::move(row));
    }
    if (!have_header) return source_error(file_, line_, col_, "no header row: the file is empty");
    return t;
  }

 private:
  bool at_line_end() const { return i_ >= s_.size() || s_[i_] == '\n' || s_[i_] == '\r'; }

  void skip_line_end() {
    if (i_ < s_.size() && s_[i_] == '\r') ++i_;
    if (i_ < s_.size() && s_[i_] == '\n') ++i_;
    ++line_;
    col_ = 1;
  }

  void skip_line() {
    while (!at_line_end()) ++i_;
    skip_line_end();
  }

  /// Moves to the first line one of whose comma-separated fields (quotes and blanks around
  /// it dropped) is a header name; stays where it is when no line is.
  void skip_to_header() {
    size_t i = i_, line = line_, col = col_;
    while (i < s_.size()) {
      size_t end = s_.find('\n', i);
      if (end == std::string::npos) end = s_.size();
      std::string_view text(s_.data() + i, end - i);
      size_t start = 0;
      for (;;) {
        size_t comma = text.find(',', start);
        std::string field = trim(std::string(text.substr(start, comma == std::string_view::npos ? std::string_view::npos
                                                                                                 : comma - start)));
        if (!field.empty() && field.back() == '\r') field.pop_back();
        if (field.size() >= 2 && field.front() == '"' && field.back() == '"') field = field.substr(1, field.size() - 2);
        for (const std::string& name : header_names_)
          if (field == name) {
            i_ = i, line_ = line, col_ = col;
            return;
          }
        if (comma == std::string_view::npos) break;
        start = comma + 1;
      }
      i = end + 1, ++line, col = 1;
    }
  }

  void advance() {
    if (s_[i_] == '\n' || (s_[i_] == '\r' && (i_ + 1 >= s_.size() || s_[i_ + 1] != '\n'))) {
      ++line_;
      col_ = 1;
    } else if (s_[i_] != '\r') {
      ++col_;
    }
    ++i_;
  }

  /// One record, up to and including its line end.
  Status record(std::vector<CsvField>& fields) {
    for (;;) {
      if (fields.size() >= kMaxCsvColumns)
        return source_error(file_, line_, col_, fmt::format("more than {} fields in a row", kMaxCsvColumns));
      CsvField f;
      f.line = line_;
      f.col = col_;
      if (i_ < s_.size() && s_[i_] == '"') {
        advance();
        for (;;) {
          if (i_ >= s_.size())
            return source_error(file_, f.line, f.col, "unterminated quoted field (the quote opened here never closes)");
          if (s_[i_] == '"') {
            if (i_ + 1 < s_.size() && s_[i_ + 1] == '"') {
              f.text += '"';
              advance();
              advance();
              continue;
            }
            advance();
            break;
          }
          f.text += s_[i_];
          advance();
        }
        if (!at_line_end() && s_[i_] != ',')
          return source_error(file_, line_, col_,
                              fmt::format("unexpected '{}' after a closing quote (expected ',' or a line end)",
                                          shown(std::string(1, s_[i_]))));
      } else {
        while (!at_line_end() && s_[i_] != ',') {
          if (s_[i_] == '"')
            return source_error(file_, line_, col_,
                                "a '\"' inside an unquoted field (quote the whole field and double the quote)");
          f.text += s_[i_];
          advance();
        }
      }
      fields.push_back(std::move(f));
      if (i_ < s_.size() && s_[i_] == ',') {
        advance();
        continue;
      }
      skip_line_end();
      return Status::ok();
    }
  }

  const std::string& s_;
  const std::string& file_;
  std::vector<std::string> header_names_;  ///< with names: the header is the first line naming one
  size_t i_ = 0;
  unsigned line_ = 1, col_ = 1;
};

/// A decimal integer in [0, 2^40], or nullopt.
std::optional<int64_t> parse_count(const std::string& text) {
  const std::string t = trim(text);
  if (t.empty() || t.size() > 13) return std::nullopt;
  int64_t v = 0;
  for (char c : t) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
  }
  if (v > (int64_t{1} << 40)) return std::nullopt;
  return v;
}

/// A number as Nsight prints it: "1,234.5" (thousands separators dropped), or nullopt.
std::optional<double> parse_number(const std::string& text) {
  std::string t;
  for (char c : trim(text))
    if (c != ',') t += c;
  if (t.empty()) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(t.c_str(), &end);
  if (errno != 0 || end != t.c_str() + t.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

/// "(x, y, z)".
std::optional<std::array<int64_t, 3>> parse_dim3(const std::string& text) {
  std::string t = trim(text);
  if (t.size() < 2 || t.front() != '(' || t.back() != ')') return std::nullopt;
  t = t.substr(1, t.size() - 2);
  std::array<int64_t, 3> d{};
  size_t start = 0;
  for (int k = 0; k < 3; ++k) {
    size_t comma = t.find(',', start);
    if ((k < 2) != (comma != std::string::npos)) return std::nullopt;
    auto v = parse_count(t.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (!v) return std::nullopt;
    d[k] = *v;
    start = comma + 1;
  }
  return d;
}

std::string dim3_text(const std::array<int64_t, 3>& d) { return fmt::format("({},{},{})", d[0], d[1], d[2]); }

Error field_error(const std::string& file, const CsvField& f, const std::string& msg) {
  return source_error(file, f.line, f.col, msg);
}

/// Nanoseconds from an ncu Duration metric's unit, or nullopt for a unit not known.
std::optional<double> to_ns(double v, const std::string& unit) {
  const std::string u = trim(unit);
  if (u == "nsecond" || u == "ns") return v;
  if (u == "usecond" || u == "us") return v * 1e3;
  if (u == "msecond" || u == "ms") return v * 1e6;
  if (u == "second" || u == "s") return v * 1e9;
  return std::nullopt;
}

std::optional<int64_t> to_bytes(double v, const std::string& unit) {
  const std::string u = trim(unit);
  double scale = 0;
  if (u == "byte/block" || u == "byte") scale = 1;
  else if (u == "Kbyte/block" || u == "Kbyte") scale = 1e3;
  else if (u == "Mbyte/block" || u == "Mbyte") scale = 1e6;
  else if (u == "KiB/block" || u == "KiB") scale = 1024;
  else return std::nullopt;
  double b = v * scale;
  if (b < 0 || b > 1e12) return std::nullopt;
  return static_cast<int64_t>(std::llround(b));
}

/// Name without a leading "void " and a trailing argument list ("void f(float*)" → "f").
std::string base_name_of(const std::string& name) {
  std::string n = trim(name);
  if (n.compare(0, 5, "void ") == 0) n = trim(n.substr(5));
  size_t paren = n.find('(');
  if (paren != std::string::npos && paren > 0) n = trim(n.substr(0, paren));
  return n;
}

}  // namespace

int CsvTable::column(const std::string& name) const {
  for (size_t i = 0; i < header.size(); ++i)
    if (trim(header[i].text) == name) return static_cast<int>(i);
  return -1;
}

Expected<CsvTable> parse_csv(const std::string& text, const std::string& file) { return CsvParser(text, file).run(); }

namespace {
/// The columns that name kernels in an Nsight export: the header is the line that has one.
const std::vector<std::string> kProfileHeaderNames = {"Kernel Name", "Name"};
}  // namespace

const char* to_string(ProfileTool t) {
  return t == ProfileTool::NsightCompute ? "Nsight Compute" : "Nsight Systems";
}

Expected<Profile> read_profile_csv(const std::string& text, const std::string& file) {
  Expected<CsvTable> parsed = CsvParser(text, file, kProfileHeaderNames).run();
  if (!parsed) return parsed.error();
  const CsvTable& t = *parsed;
  Profile p;
  p.file = file;
  p.rows = t.rows.size();

  int name_col = t.column("Kernel Name");
  p.tool = ProfileTool::NsightCompute;
  if (name_col < 0) {
    name_col = t.column("Name");
    p.tool = ProfileTool::NsightSystems;
  }
  if (name_col < 0)
    return field_error(file, t.header.front(),
                       "no 'Kernel Name' column (Nsight Compute) and no 'Name' column (Nsight Systems): "
                       "is this an ncu --csv or nsys stats --format csv export?");
  const int id_col = p.tool == ProfileTool::NsightCompute ? t.column("ID") : -1;
  const int grid_col = t.column("Grid Size"), block_col = t.column("Block Size");
  const int metric_col = t.column("Metric Name"), unit_col = t.column("Metric Unit"), value_col = t.column("Metric Value");
  const int duration_col = t.column("Duration (ns)"), instances_col = t.column("Instances");
  const std::array<int, 3> grd{t.column("GrdX"), t.column("GrdY"), t.column("GrdZ")};
  const std::array<int, 3> blk{t.column("BlkX"), t.column("BlkY"), t.column("BlkZ")};

  auto dims = [&](const CsvRow& r, int col, const char* what,
                  std::optional<std::array<int64_t, 3>>* out) -> Status {
    if (col < 0) return Status::ok();
    const CsvField& f = r.fields[col];
    if (trim(f.text).empty()) return Status::ok();
    auto d = parse_dim3(f.text);
    if (!d) return field_error(file, f, fmt::format("'{}' is not \"(x, y, z)\": \"{}\"", what, shown(f.text)));
    *out = d;
    return Status::ok();
  };
  auto split_dims = [&](const CsvRow& r, const std::array<int, 3>& cols,
                        std::optional<std::array<int64_t, 3>>* out) -> Status {
    if (cols[0] < 0 || cols[1] < 0 || cols[2] < 0) return Status::ok();
    std::array<int64_t, 3> d{};
    for (int k = 0; k < 3; ++k) {
      const CsvField& f = r.fields[cols[k]];
      if (trim(f.text).empty()) return Status::ok();  // memcpy rows leave them empty
      auto v = parse_count(f.text);
      if (!v) return field_error(file, f, fmt::format("'{}' is not a count: \"{}\"", trim(t.header[cols[k]].text),
                                                      shown(f.text)));
      d[k] = *v;
    }
    *out = d;
    return Status::ok();
  };

  std::map<std::string, size_t> by_id;  // ncu launch ID → index in launches
  for (const CsvRow& r : t.rows) {
    const CsvField& name = r.fields[name_col];
    const std::string kernel = trim(name.text);
    const std::string id = id_col >= 0 ? trim(r.fields[id_col].text) : std::string();
    if (kernel.empty()) {
      if (id.empty()) {  // ncu --page raw: the units row under the header
        ++p.skipped_rows;
        continue;
      }
      return field_error(file, name, "empty kernel name");
    }
    if (p.tool == ProfileTool::NsightSystems && kernel.compare(0, 6, "[CUDA ") == 0) {  // memcpy / memset
      ++p.skipped_rows;
      continue;
    }
    ProfiledLaunch* launch = nullptr;
    if (!id.empty()) {
      auto it = by_id.find(id);
      if (it != by_id.end()) {
        launch = &p.launches[it->second];
        if (launch->name != kernel)
          return field_error(file, name,
                             fmt::format("launch ID {} is '{}' here but '{}' on line {}", id, shown(kernel),
                                         shown(launch->name), launch->line));
      }
    }
    if (!launch) {
      ProfiledLaunch l;
      l.name = kernel;
      l.id = id;
      l.line = r.line;
      l.name_col = name.col;
      if (Status s = dims(r, grid_col, "Grid Size", &l.grid); !s) return s.error();
      if (Status s = dims(r, block_col, "Block Size", &l.block); !s) return s.error();
      if (!l.grid)
        if (Status s = split_dims(r, grd, &l.grid); !s) return s.error();
      if (!l.block)
        if (Status s = split_dims(r, blk, &l.block); !s) return s.error();
      if (duration_col >= 0) l.duration_ns = parse_number(r.fields[duration_col].text);
      size_t copies = 1;
      if (instances_col >= 0) {
        const CsvField& f = r.fields[instances_col];
        auto n = parse_count(f.text);
        if (!n || *n < 1 || *n > 1000000)
          return field_error(file, f, fmt::format("'Instances' is not a count from 1 to 1000000: \"{}\"", shown(f.text)));
        copies = static_cast<size_t>(*n);
      }
      if (p.launches.size() + copies > kMaxProfiledLaunches)
        return field_error(file, name, fmt::format("more than {} kernel launches", kMaxProfiledLaunches));
      if (!id.empty()) by_id[id] = p.launches.size();
      for (size_t c = 0; c < copies; ++c) p.launches.push_back(l);
      launch = &p.launches[p.launches.size() - copies];
    }
    ++launch->rows;
    // ncu's one-row-per-metric layout: pick up the metrics the join uses.
    if (metric_col >= 0 && value_col >= 0) {
      const std::string metric = trim(r.fields[metric_col].text);
      const std::string unit = unit_col >= 0 ? r.fields[unit_col].text : std::string();
      auto v = parse_number(r.fields[value_col].text);
      // The details page's names, and the raw metrics behind them (`ncu --metrics
      // gpu__time_duration.sum`, as scripts/gpu-check.sh asks).
      if (v && (metric == "Duration" || metric == "gpu__time_duration.sum")) {
        if (auto ns = to_ns(*v, unit)) launch->duration_ns = ns;
      } else if (v && (metric == "Dynamic Shared Memory Per Block" ||
                       metric == "launch__shared_mem_per_block_dynamic")) {
        if (auto b = to_bytes(*v, unit)) launch->dynamic_shared_memory = b;
      }
    }
  }
  return p;
}

std::string other_tvm_kernel_name(const std::string& name) {
  const std::string k = "_kernel";
  size_t pos = name.rfind(k);
  if (pos == std::string::npos || pos == 0) return "";
  const std::string stem = name.substr(0, pos), tail = name.substr(pos + k.size());
  if (tail.empty()) return stem + "_kernel0";
  if (tail == "0") return stem + "_kernel";
  auto digits = [](const std::string& s) {
    return !s.empty() && s.size() < 10 && s.find_first_not_of("0123456789") == std::string::npos && s[0] != '0';
  };
  if (tail[0] == '_' && digits(tail.substr(1))) return stem + "_kernel" + tail.substr(1);
  if (digits(tail)) return stem + "_kernel_" + tail;
  return "";
}

ProfileJoin join_profile(const Dataflow& df, const Profile& profile) {
  std::map<std::string, std::vector<int>> by_name;  // graph launches per kernel name
  for (const Kernel& k : df.kernels) by_name[k.name].push_back(k.id);
  auto lookup = [&](const std::string& name) -> const std::vector<int>* {
    auto it = by_name.find(name);
    if (it == by_name.end()) it = by_name.find(base_name_of(name));
    return it == by_name.end() ? nullptr : &it->second;
  };

  ProfileJoin j;
  std::vector<bool> matched(df.kernels.size());
  std::map<const std::vector<int>*, size_t> seen;  // profiled launches so far per graph name
  std::map<std::string, size_t> unknown_index;
  for (size_t i = 0; i < profile.launches.size(); ++i) {
    const ProfiledLaunch& l = profile.launches[i];
    ProfileMatch m;
    m.launch = static_cast<int>(i);
    const std::vector<int>* ids = lookup(l.name);
    // A profile of this model built by another TVM version: the same kernels under the
    // other naming scheme (0.8 `_kernel0`/`_kernel1`, 0.13+ `_kernel`/`_kernel_1`). Join
    // them, and report the name as a difference.
    bool renamed = false;
    if (!ids) {
      const std::string other = other_tvm_kernel_name(base_name_of(l.name));
      if (!other.empty() && (ids = lookup(other)) != nullptr) renamed = true;
    }
    if (!ids) {
      auto it = unknown_index.find(l.name);
      if (it == unknown_index.end()) {
        UnknownProfiledKernel u;
        u.name = l.name;
        u.first_line = l.line;
        const std::string other = other_tvm_kernel_name(base_name_of(l.name));
        if (const std::vector<int>* o = other.empty() ? nullptr : lookup(other)) u.other_scheme_kernel = o->front();
        it = unknown_index.emplace(l.name, j.unknown.size()).first;
        j.unknown.push_back(u);
      }
      ++j.unknown[it->second].launches;
      j.matches.push_back(m);
      continue;
    }
    const size_t n = seen[ids]++;
    m.kernel = (*ids)[n % ids->size()];
    m.run = static_cast<int>(n / ids->size());
    j.runs = std::max(j.runs, m.run + 1);
    matched[m.kernel] = true;
    const Kernel& k = df.kernels[m.kernel];
    if (renamed) m.mismatches.push_back({"name", l.name, k.name});
    if (l.grid && *l.grid != k.grid) m.mismatches.push_back({"grid", dim3_text(*l.grid), dim3_text(k.grid)});
    if (l.block && *l.block != k.block) m.mismatches.push_back({"block", dim3_text(*l.block), dim3_text(k.block)});
    if (l.dynamic_shared_memory && *l.dynamic_shared_memory != k.dynamic_shared_memory)
      m.mismatches.push_back({"dynamic shared memory", fmt::format("{} B", *l.dynamic_shared_memory),
                              fmt::format("{} B", k.dynamic_shared_memory)});
    j.matches.push_back(std::move(m));
  }
  for (size_t k = 0; k < matched.size(); ++k)
    if (!matched[k]) j.missing.push_back(static_cast<int>(k));
  return j;
}

}  // namespace kdflow
