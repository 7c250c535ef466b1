// collectives.h — the collectives of a sharded replay (several ranks in one process, one engine
// and back end each): every rank hands what it sends to the hub when it reaches a collective,
// waits until every rank has reached the same one, and takes what it receives — as disco's
// NCCL calls behave, computed here on the host (reduce ops in float for float16/bfloat16).
// The hub is strict: every rank must reach the same call with the same kind, dtype and sizes,
// in the same order; otherwise every rank stops with one line naming both. Internal to
// lib/replay.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "kdflow/ir/dataflow.h"
#include "kdflow/support/diag.h"

namespace kdflow {

/// What one rank brings to a collective.
struct CollectiveTurn {
  int call = -1;              ///< library call id in the IR
  const Collective* what = nullptr;
  std::string send;           ///< the bytes it sends (empty where it sends nothing)
  uint64_t recv_bytes = 0;    ///< the size of its recv buffer (0: none)
  /// The back ends make the collective on their devices (NCCL): the hub checks that every
  /// rank reached the same call with consistent sizes (`send_bytes` instead of `send`) and
  /// delivers nothing.
  bool on_device = false;
  uint64_t send_bytes = 0;    ///< on_device: the size of what it sends (0: nothing)
};

class CollectiveHub {
 public:
  /// `time_limit_s`: how long a rank waits for the others (0: for ever).
  CollectiveHub(int ranks, double time_limit_s) : ranks_(ranks), time_limit_s_(time_limit_s), turns_(ranks) {}

  /// Rank `rank` reaches a collective: blocks until every rank has, then fills `recv` (the bytes
  /// of its recv buffer; untouched where it has none). Errors: the ranks disagree, a rank failed
  /// (abort), or the wait passed the time limit.
  Status exchange(int rank, CollectiveTurn turn, std::string* recv);

  /// A rank stopped (an error of its own): every rank waiting, or arriving later, stops too.
  void abort(int rank, const std::string& why);

  /// The number of collectives every rank completed.
  uint64_t completed() const;

 private:
  Status compute();  ///< with every turn in: each rank's result (results_), or the disagreement

  const int ranks_;
  const double time_limit_s_;
  mutable std::mutex m_;
  std::condition_variable cv_;
  std::vector<CollectiveTurn> turns_;
  std::vector<std::string> results_;
  int arrived_ = 0, left_ = 0;
  uint64_t generation_ = 0;
  std::string failure_;  ///< set once: every rank returns it
};

/// The reduction of `n` arrays of `dtype` (bytes each `len`) into `out` (`len` bytes): sum,
/// prod, min, max or avg (sum / n). False for a dtype it cannot reduce.
bool reduce_arrays(const std::string& dtype, const std::string& op, const std::vector<const std::string*>& in,
                   std::string* out);

}  // namespace kdflow
