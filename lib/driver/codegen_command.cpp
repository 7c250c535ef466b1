// codegen_command.cpp — `kdflow codegen`: what replay would run (setup_replay, make_plan for every
// rank) handed to the program generator (lib/codegen), and its files written into OUT. OUT is
// new, empty, or a folder kdflow codegen wrote before (it holds .kdflow-codegen, the list of the
// files it wrote): each file is written whole (write_output), files of the previous program that
// the new one lacks are removed, anything else in OUT (a build folder) is left alone.
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <ostream>
#include <set>
#include <sstream>

#include "kdflow/codegen/codegen.h"
#include "kdflow/driver/codegen_command.h"
#include "kdflow/driver/commands.h"
#include "kdflow/frontend/format_source.h"
#include "kdflow/support/io.h"

namespace kdflow {
namespace {

namespace fs = std::filesystem;

constexpr const char* kMarker = ".kdflow-codegen";

Error usage(const std::string& msg) { return Error{"kdflow codegen: error: " + msg, ExitCode::Usage}; }

/// The files a previous kdflow codegen wrote into `out` (empty when `out` is new or empty);
/// an error when `out` is something else.
Expected<std::set<std::string>> previous_files(const std::string& out) {
  std::error_code ec;
  fs::file_status st = fs::symlink_status(out, ec);
  if (ec || !fs::exists(st)) return std::set<std::string>{};
  if (!fs::is_directory(fs::status(out, ec)))
    return file_error(out, "exists and is not a folder: -o names the folder the program is written into",
                      ExitCode::CantCreate);
  if (fs::is_empty(out, ec)) return std::set<std::string>{};
  const std::string marker = (fs::path(out) / kMarker).string();
  if (!file_exists(marker))
    return file_error(out, "is a folder that kdflow codegen did not write (no .kdflow-codegen in it); name a new or "
                           "empty folder",
                      ExitCode::CantCreate);
  Expected<std::string> text = read_file(marker, 1 << 20);
  if (!text) return text.error();
  std::set<std::string> files;
  std::istringstream in(*text);
  for (std::string line; std::getline(in, line);)
    if (!line.empty() && line[0] != '#' && line.find("..") == std::string::npos && line[0] != '/') files.insert(line);
  return files;
}

/// Module files grouped as replay groups them: files named alike but for the extension are one
/// module's alternatives, binaries before PTX.
std::vector<std::vector<std::string>> module_groups(const std::vector<std::string>& modules) {
  std::vector<std::string> stems;
  std::vector<std::vector<std::string>> groups;
  for (const std::string& path : modules) {
    std::string stem = fs::path(path).replace_extension().string();
    size_t g = std::find(stems.begin(), stems.end(), stem) - stems.begin();
    if (g == stems.size()) {
      stems.push_back(stem);
      groups.emplace_back();
    }
    groups[g].push_back(path);
  }
  for (std::vector<std::string>& g : groups)
    std::stable_partition(g.begin(), g.end(), [](const std::string& p) { return fs::path(p).extension() != ".ptx"; });
  return groups;
}

std::string name_of(const std::string& path) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  return fs::path(p).filename().string();
}

}  // namespace

int run_codegen_command(const CodegenCommand& cmd, std::ostream& out, std::ostream& err) {
  if (cmd.out.empty()) return report(usage("-o OUT is required: the folder the program is written into"), err);
  Expected<std::set<std::string>> before = previous_files(cmd.out);
  if (!before) return report(before.error(), err);

  ReplayCommand rc = cmd.build;
  rc.backend = "cuda";
  rc.mode = "eager";
  rc.no_node_reference = true;
  Expected<ReplaySetup> setup = setup_replay(rc, err);
  if (!setup) return report(setup.error(), err);
  const Dataflow& df = setup->flow;
  const ReplayOptions& opt = setup->options;

  codegen::ProgramInput in;
  in.flow = &df;
  if (df.ranks > 1) {
    if (opt.rank_params.size() != static_cast<size_t>(df.ranks))
      return report(usage(fmt::format("{} params files for {} ranks", opt.rank_params.size(), df.ranks)), err);
    for (int r = 0; r < df.ranks; ++r) {
      ReplayInputs ri = opt.inputs;
      ri.packed_params = opt.rank_params[static_cast<size_t>(r)];
      Expected<ReplayPlan> plan = make_plan(df, ri);
      if (!plan) return report(plan.error(), err);
      in.plans.push_back(plan.take());
    }
  } else {
    Expected<ReplayPlan> plan = make_plan(df, opt.inputs);
    if (!plan) return report(plan.error(), err);
    in.plans.push_back(plan.take());
  }
  if (!in.plans[0].launches.empty() && opt.modules.empty())
    return report(file_error(setup->label, "no device module: pass --module FILE (a cubin, fatbin or PTX)",
                             ExitCode::NoInput),
                  err);
  for (const std::string& m : opt.modules) {
    Expected<std::string> bytes = read_file(m, 1ull << 31);
    if (!bytes) return report(bytes.error(), err);
    if (detect_module_format(*bytes) == ModuleFormat::CudaSource && opt.modules.size() == 1)
      return report(file_error(setup->scratch && m.rfind(setup->scratch->path, 0) == 0
                                   ? cmd.build.dir + "(CUDA module)"
                                   : m,
                               "is CUDA source (TVM 0.27's wheel stores no binary in model.so), and the program "
                                  "loads a cubin, fatbin or PTX: compile it with nvcc (kdflow_tvm does where nvcc "
                                  "is installed) and pass --module FILE",
                               ExitCode::Unavailable),
                    err);
  }
  in.modules = module_groups(opt.modules);
  in.expect = opt.expect;
  in.rtol = rc.rtol;
  in.atol = rc.atol;
  const std::string source = name_of(!cmd.build.dir.empty() ? cmd.build.dir : cmd.build.flow);
  in.title = source;
  in.command = fmt::format("kdflow codegen {}", cmd.build.dir.empty() ? "--flow " + source : source);
  if (!cmd.build.extract.session.empty()) {
    in.title += fmt::format(" (session {})", name_of(cmd.build.extract.session));
    in.command += " --session " + name_of(cmd.build.extract.session);
  }
  if (!cmd.build.extract.function.empty()) {
    in.title += fmt::format(" (function {})", cmd.build.extract.function);
    in.command += " --function " + cmd.build.extract.function;
  }
  if (df.ranks > 1) in.title += fmt::format(", {} ranks", df.ranks);
  in.out_name = name_of(cmd.out);

  Expected<std::vector<codegen::GeneratedFile>> files = codegen::generate_program(in);
  if (!files) return report(files.error(), err);
  // run.cpp in clang-format's style (the support header is kept so in the repository), and that
  // style beside it for whoever edits the program.
  for (codegen::GeneratedFile& f : *files)
    if (f.path == "run.cpp") f.bytes = format_cpp_source(f.bytes);
  files->push_back({".clang-format", source_format_style()});

  std::error_code ec;
  fs::create_directories(fs::path(cmd.out) / "data", ec);
  if (ec) return report(file_error(cmd.out, "cannot create the folder: " + ec.message(), ExitCode::CantCreate), err);
  std::set<std::string> written;
  std::string marker = "# the files kdflow codegen wrote here (regenerating replaces them; nothing else is touched)\n";
  for (const codegen::GeneratedFile& f : *files) {
    if (Status s = write_output((fs::path(cmd.out) / f.path).string(), f.bytes); !s) return report(s.error(), err);
    written.insert(f.path);
    marker += f.path + "\n";
  }
  for (const std::string& old : *before)
    if (!written.count(old)) fs::remove(fs::path(cmd.out) / old, ec);
  if (Status s = write_output((fs::path(cmd.out) / kMarker).string(), marker); !s) return report(s.error(), err);

  uint64_t data = 0;
  size_t lines = 0;
  for (const codegen::GeneratedFile& f : *files) {
    if (f.path.rfind("data/", 0) == 0) data += f.bytes.size();
    if (f.path == "run.cpp") lines = static_cast<size_t>(std::count(f.bytes.begin(), f.bytes.end(), '\n'));
  }
  const ReplayPlan& p = in.plans[0];
  auto n = [](size_t k, const char* one, const char* many) { return fmt::format("{} {}", k, k == 1 ? one : many); };
  out << fmt::format("wrote {}: run.cpp ({} lines: {}, {}, {}{}), "
                     "kdflow_support.h, CMakeLists.txt, README.md, data/ ({} bytes)\n",
                     cmd.out, lines, n(p.launches.size(), "launch", "launches"),
                     n(p.library_calls.size(), "library call", "library calls"),
                     n(p.host_copies.size(), "host copy", "host copies"),
                     df.ranks > 1 ? fmt::format(", {} ranks", df.ranks) : "", data);
  out << fmt::format("build: cmake -S {0} -B {0}/build && cmake --build {0}/build    run: {0}/build/run\n", cmd.out);
  return 0;
}

}  // namespace kdflow
