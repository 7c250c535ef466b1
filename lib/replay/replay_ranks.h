// replay_ranks.h — replay of a sharded flow, every rank in this process (engine_ranks.cpp).
// Internal to lib/replay: replay() hands a flow with several ranks to it.
#pragma once

#include <functional>
#include <memory>
#include <ostream>

#include "backend.h"
#include "kdflow/replay/replay.h"

namespace kdflow {

/// Makes one back end for one rank's plan (engine.cpp's make_backend).
using BackendFactory = std::function<Expected<std::unique_ptr<replay_backend::Backend>>(
    const ReplayOptions&, const ReplayPlan&, std::ostream&)>;

/// Every rank of `df` (df.ranks > 1) on its own back end and thread, the collectives between
/// them; every rank's outputs compared with `opt.expect` (ReplayReport::checks, each with its
/// rank). Options a sharded replay does not support yet are usage errors.
Expected<ReplayReport> replay_ranks(const Dataflow& df, const ReplayOptions& opt, std::ostream& log,
                                    const BackendFactory& make_backend);

}  // namespace kdflow
