// progress.cpp — the one-line progress display (include/kdflow/support/progress.h).
#include "kdflow/support/progress.h"

#include <unistd.h>

#include <ostream>

#include <fmt/format.h>

namespace kdflow {

void print_terminal_progress(void* ctx, size_t done, size_t total, const std::string& what) {
  auto* p = static_cast<TerminalProgress*>(ctx);
  if (!p->enabled || !p->err) return;
  std::string line = done >= total ? std::string() : fmt::format("kdflow: [{}/{}] {}", done + 1, total, what);
  if (line.size() > 100) line.resize(100);
  for (char& c : line)  // names from the input: no control bytes on the terminal
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  *p->err << "\r" << line << std::string(p->last_len > line.size() ? p->last_len - line.size() : 0, ' ');
  if (line.empty()) *p->err << "\r";
  p->err->flush();
  p->last_len = line.size();
}

bool progress_wanted(bool quiet) { return !quiet && isatty(STDERR_FILENO) != 0; }

}  // namespace kdflow
