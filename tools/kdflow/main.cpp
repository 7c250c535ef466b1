// kdflow — the command line. Parses options with CLI11 and calls the library
// (include/kdflow/commands.h); nothing else happens here.
#include <iostream>
#include <string>

#include <CLI/CLI.hpp>

#include "kdflow/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"kdflow: the kernel-level dataflow of a TVM-compiled model (graph.json + host C + CUDA)"};
  app.set_version_flag("--version", "kdflow 0.1.0");
  app.require_subcommand(1);

  kdflow::ExtractCommand ex;
  CLI::App* extract = app.add_subcommand("extract", "Write the kernel-level dataflow graph (JSON, DOT or text)");
  extract->add_option("DIR", ex.inputs.dir, "Folder with graph.json, host.c and *.tvm_meta.json (and params.bin)");
  extract->add_option("-o,--output", ex.output, "Output file, or - for stdout")->capture_default_str();
  extract->add_option("--format", ex.format, "json | dot | text (default: from the output's extension; stdout: json)")
      ->check(CLI::IsMember({"json", "dot", "text"}));
  extract->add_option("--graph", ex.inputs.graph, "graph.json (overrides DIR/graph.json)");
  extract->add_option("--host", ex.inputs.host, "Host C source (overrides DIR/host.c)");
  extract->add_option("--meta", ex.inputs.meta, "Function table *.tvm_meta.json (overrides the one in DIR)");
  extract->add_option("--params", ex.inputs.params, "Params file, to tell params from inputs (default: DIR/params.bin)");
  extract->add_option("--device", ex.inputs.device, "CUDA source, for per-kernel access sets (default: DIR/device.cu)");
  extract->add_option("--relay", ex.inputs.relay, "relay.txt, for the exact Relay ops per function (default: DIR/relay.txt)");
  extract->add_flag("--no-params", ex.inputs.no_params, "Do not read a params file; params are the nodes named p<N>");
  extract->add_flag("--no-device", ex.inputs.no_device, "Do not read device.cu; accesses stay unknown");
  extract->add_flag("--no-relay", ex.inputs.no_relay, "Do not read relay.txt; Relay ops are decoded from names");
  extract->add_flag("-q,--quiet", ex.quiet, "No progress on stderr");

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "kdflow: error: " << e.what() << " (see kdflow --help)\n";
    return static_cast<int>(kdflow::ExitCode::Usage);
  }

  if (extract->parsed()) return kdflow::run_extract_command(ex, std::cerr);
  return static_cast<int>(kdflow::ExitCode::Usage);
}
