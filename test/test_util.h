// test_util.h — helpers shared by the tests: where the samples are, reading files,
// running the kdflow binary.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace kdflow::test {

/// The repository root (compile-time KDFLOW_SOURCE_DIR).
std::string source_dir();
/// samples/<name> in the repository.
std::string sample_dir(const std::string& name);
/// ../shared/samples/<name> beside the repository, or "" when that folder does not exist.
std::string shared_sample_dir(const std::string& name);
/// Every sample folder under samples/ (those holding a graph.json), sorted.
std::vector<std::string> sample_names();
/// Reads a file whole; throws std::runtime_error when it cannot.
std::string slurp(const std::string& path);
/// A fresh empty temp directory (removed at exit).
std::string temp_dir();
/// Runs the kdflow binary with `args` (shell-quoted here), capturing stdout and stderr.
struct RunResult { int exit_code; std::string out; std::string err; };
RunResult run_kdflow(const std::vector<std::string>& args);
/// run_kdflow with `cwd` as the working folder.
RunResult run_kdflow_in(const std::string& cwd, const std::vector<std::string>& args);
/// Runs `body` in a forked child whose stderr comes back through a pipe; the child exits 0
/// when `body` returns. Throws std::runtime_error when the pipe, fork or wait fails.
struct Child {
  int exit_code = -1;  ///< -1 when it died of a signal
  int signal = 0;
  std::string err;
};
Child run_child(const std::function<void()>& body);

/// Sets an environment variable for one scope, restoring the old value (or its absence) after.
class Env {
 public:
  Env(const char* name, const std::string& value);
  ~Env();
  Env(const Env&) = delete;
  Env& operator=(const Env&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

/// The fake CUDA driver opened with `handle` (dlopen): device `device`'s primary context
/// retained and made current on this thread, as a program does before it allocates (the fake,
/// like the driver, refuses work on a thread with no current context). False when it fails.
bool fake_cuda_context(void* handle, int device = 0);

}  // namespace kdflow::test
