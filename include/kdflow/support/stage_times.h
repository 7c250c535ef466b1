// stage_times.h — wall-clock spans of the named stages of one command (extract
// --stage-times): for people asking where the time goes, and for the benchmark. Never part
// of any output file (output stays byte-identical); safe to record from several threads.
#pragma once

#include <chrono>
#include <mutex>
#include <string>
#include <vector>

namespace kdflow {

class StageTimes {
 public:
  struct Span {
    std::string name;
    double start = 0, end = 0;  ///< seconds since the StageTimes was made
  };
  StageTimes() : origin_(std::chrono::steady_clock::now()) {}
  double now() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - origin_).count(); }
  void add(std::string name, double start, double end);
  /// The spans by start time (ties: by name).
  std::vector<Span> spans() const;

 private:
  std::chrono::steady_clock::time_point origin_;
  mutable std::mutex mu_;
  std::vector<Span> spans_;
};

/// Records [construction, destruction) as `name` in `times`; nothing when `times` is null.
class StageSpan {
 public:
  StageSpan(StageTimes* times, std::string name) : times_(times), name_(std::move(name)), start_(times ? times->now() : 0) {}
  ~StageSpan() {
    if (times_) times_->add(std::move(name_), start_, times_->now());
  }
  StageSpan(const StageSpan&) = delete;
  StageSpan& operator=(const StageSpan&) = delete;

 private:
  StageTimes* times_;
  std::string name_;
  double start_;
};

/// A table: one line per span (start, end, duration in seconds), then the total wall time
/// and the process's CPU time (user + system).
std::string format_stage_times(const StageTimes& times);

}  // namespace kdflow
