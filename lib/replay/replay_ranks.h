// replay_ranks.h — replay of a sharded flow, every rank in this process (engine_ranks.cpp).
// Internal to lib/replay: replay() hands a flow with several ranks to it.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <vector>
#include <ostream>

#include "backend.h"
#include "kdflow/replay/replay.h"

namespace kdflow {

/// Which rank a back end is, and what makes its collectives (null: the host).
struct RankSetup {
  int rank = -1;
  int ranks = 1;
  std::shared_ptr<nccl::Communicators> nccl;
};

/// Makes the back end of one rank for its plan (engine.cpp's make_backend).
using BackendFactory = std::function<Expected<std::unique_ptr<replay_backend::Backend>>(
    const ReplayOptions&, const ReplayPlan&, std::ostream&, const RankSetup&)>;

/// The expected outputs (opt.expect; "" skips one), read before any device is touched.
Expected<std::vector<std::optional<NpyArray>>> read_expected(const ReplayOptions& opt);

/// Each of `from`'s results compared with its expected array (rtol/atol of `opt`), appended to
/// `to->checks` with `rank` (-1: a flow of one rank).
void compare_outputs(const ReplayReport& from, const std::vector<std::optional<NpyArray>>& expected,
                     const ReplayOptions& opt, int rank, ReplayReport* to);

/// Every rank of `df` (df.ranks > 1) on its own back end and thread, the collectives between
/// them; every rank's outputs compared with `opt.expect` (ReplayReport::checks, each with its
/// rank). Options a sharded replay does not support yet are usage errors.
Expected<ReplayReport> replay_ranks(const Dataflow& df, const ReplayOptions& opt, std::ostream& log,
                                    const BackendFactory& make_backend);

}  // namespace kdflow
