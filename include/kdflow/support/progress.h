// progress.h — the one-line progress display on stderr for long work (extract's nodes, replay's
// launches, the CPU back end's compiles): rewritten in place on a terminal, nothing otherwise.
#pragma once

#include <cstddef>
#include <iosfwd>
#include <string>

namespace kdflow {

/// A one-line progress display ("kdflow: [3/5] fused_nn_dense") rewritten in place with
/// `\r`; used as the ProgressFn context of extract(). Prints nothing unless `enabled`,
/// which commands set only when stderr is a terminal and -q was not given.
struct TerminalProgress {
  bool enabled = false;
  std::ostream* err = nullptr;
  size_t last_len = 0;
};
void print_terminal_progress(void* ctx, size_t done, size_t total, const std::string& what);
/// Whether progress should be shown: stderr is a terminal and not `quiet`.
bool progress_wanted(bool quiet);

}  // namespace kdflow
