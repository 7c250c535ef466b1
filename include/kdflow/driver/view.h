// view.h — `kdflow view` (and `kdflow extract -o FILE.html`): the dataflow as an interactive
// page, or as Model Explorer's graph JSON. Loads the input as `show` does, computes the
// summary and costs, and hands them to the emitter (emit_view.h); never exits.
#pragma once

#include <iosfwd>
#include <string>

#include "kdflow/emit/emit_view.h"
#include "kdflow/frontend/extract.h"

namespace kdflow {

struct ViewCommand {
  ExtractInputs inputs;          ///< inputs.dir: DIR, model.so or FLOW.json; the rest as for extract
  std::string output;            ///< file ("-": stdout)
  std::string format;            ///< "html" | "model-explorer"; empty: html (.json output: model-explorer)
  std::string timing;            ///< kdflow replay --timing-json file: measured times
  std::string profile;           ///< ncu / nsys CSV export: measured times
  std::string device = "h100";   ///< --roofline: the roofline device ("none": no bounds)
  bool quiet = false;
};

/// The summary lines of `kdflow show` and the costs, for the page of an IR already built.
/// `times` may be null. `title`: the model's name.
ViewFacts view_facts(const Dataflow& df, const CostReport* costs, const std::string& title);

int run_view_command(const ViewCommand& cmd, std::ostream& err);

}  // namespace kdflow
