// stage_times.cpp — stage spans and their table (include/kdflow/support/stage_times.h).
#include "kdflow/support/stage_times.h"

#include <sys/resource.h>

#include <algorithm>

#include <fmt/format.h>

namespace kdflow {

void StageTimes::add(std::string name, double start, double end) {
  std::lock_guard<std::mutex> lock(mu_);
  spans_.push_back({std::move(name), start, end});
}

std::vector<StageTimes::Span> StageTimes::spans() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Span> out = spans_;
  std::stable_sort(out.begin(), out.end(), [](const Span& a, const Span& b) {
    return a.start != b.start ? a.start < b.start : a.name < b.name;
  });
  return out;
}

std::string format_stage_times(const StageTimes& times) {
  std::vector<StageTimes::Span> spans = times.spans();
  size_t width = 5;
  for (const auto& s : spans) width = std::max(width, s.name.size());
  std::string out = fmt::format("kdflow: stage times (wall seconds from the start; stages on other threads overlap)\n");
  out += fmt::format("  {:<{}}  {:>7}  {:>7}  {:>7}\n", "stage", width, "start", "end", "took");
  for (const auto& s : spans)
    out += fmt::format("  {:<{}}  {:7.3f}  {:7.3f}  {:7.3f}\n", s.name, width, s.start, s.end, s.end - s.start);
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  const double cpu = static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                     static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
  out += fmt::format("  {:<{}}  {:7.3f} wall, {:.3f} CPU (user + system, whole process)\n", "total", width, times.now(), cpu);
  return out;
}

}  // namespace kdflow
