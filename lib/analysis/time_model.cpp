// time_model.cpp — a kernel's GPU time predicted from its code and launch (time_model.h).
#include "kdflow/analysis/time_model.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "kdflow/analysis/bounds.h"

namespace kdflow {

const std::vector<GpuArch>& gpu_archs() {
  // Per-SM limits, SM counts, boost clocks and DRAM bandwidth: NVIDIA's datasheets and the CUDA
  // C++ Programming Guide's table of compute capabilities (9.0, 8.0, 8.9). L2 bandwidth and
  // latency: published microbenchmarks (Luo et al., "Benchmarking and Dissecting the Nvidia
  // Hopper GPU Architecture", IPDPS 2024; Jia et al., "Dissecting the Ampere GPU Architecture
  // through Microbenchmarking", GTC 2021; Chips and Cheese's L2 measurements). The launch floor
  // (an empty kernel timed with events on the GPU's stream) is a round figure from public
  // measurements, 2-5 us on these GPUs; `kdflow calibrate` is meant to replace it (docs/costs.md).
  static const std::vector<GpuArch> archs = {
      {"h100", 132, 1.98, 2048, 32, 233472, 4, 3350, 5500, 260, 4, 3.0,
       "H100 SXM5 datasheet, CUDA Programming Guide (cc 9.0), Luo et al. 2024 (L2 latency)"},
      {"h200", 132, 1.98, 2048, 32, 233472, 4, 4800, 5500, 260, 4, 3.0,
       "H200 SXM datasheet (H100's SMs and clocks, HBM3e), CUDA Programming Guide (cc 9.0), Luo et al. 2024"},
      {"a100", 108, 1.41, 2048, 32, 167936, 4, 2039, 4800, 200, 4, 3.0,
       "A100 SXM4 80GB datasheet, CUDA Programming Guide (cc 8.0), Jia et al. 2021 (L2 latency)"},
      {"l4", 58, 2.04, 1536, 24, 102400, 4, 300, 1700, 230, 4, 3.0,
       "L4 datasheet, CUDA Programming Guide (cc 8.9), Chips and Cheese (Ada L2)"},
  };
  return archs;
}

const GpuArch* find_gpu_arch(const std::string& id) {
  std::string lower = id;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  for (const GpuArch& a : gpu_archs())
    if (a.id == lower) return &a;
  return nullptr;
}

namespace {

// Issue cost of one execution of each kind (KernelOps::Kind: add/sub, mul, fma, div, special,
// min/max/compare) in warp instructions, and its dependent latency in ALU latencies. An FP32
// division is a sequence of about ten instructions; a special function goes through the SFU at a
// quarter of the FP32 rate.
constexpr double kIssue[KernelOps::kKinds] = {1, 1, 1, 10, 4, 1};
constexpr double kChain[KernelOps::kKinds] = {1, 1, 1, 10, 5, 1};
// Integer and address instructions around each global access (the index arithmetic TVM's kernels
// compute per access) and per thread (its ids, the guard).
constexpr double kAddressInstr = 2.0, kThreadInstr = 4.0;
// nvcc unrolls a loop of constant trip count (TVM's reduction loops) by about 4, so the loads of 4
// iterations are in flight together; a barrier between them stops that (loads do not move across
// __syncthreads()). A barrier itself costs about 20 cycles once every warp arrived.
constexpr double kUnroll = 4.0, kBarrierCycles = 20.0;
constexpr double kWord = 4.0, kSector = 32.0;

}  // namespace

namespace {

/// The distinct bytes a launch's arguments touch: static footprints where exact, else whole buffers.
double distinct_bytes(const Dataflow& df, const Kernel& k) {
  double distinct = 0;
  for (const Arg& a : k.args) {
    if (a.kind != Arg::Kind::Buffer) continue;
    double arg_bytes = 0;
    bool exact = true;
    for (bool write : {false, true}) {
      std::optional<int64_t> t = touched_bytes(a, write);
      if (!t) exact = false;
      else arg_bytes += static_cast<double>(*t);
    }
    if (!exact)
      arg_bytes = a.buffer >= 0 && static_cast<size_t>(a.buffer) < df.buffers.size()
                      ? static_cast<double>(df.buffers[a.buffer].bytes)
                      : 0.0;
    distinct += arg_bytes;
  }
  return distinct;
}

}  // namespace

std::optional<KernelPrediction> predict_kernel(const Dataflow& df, const Kernel& k, const GpuArch& arch,
                                               std::string* why) {
  KernelPrediction p;
  const double blocks = static_cast<double>(k.grid[0]) * static_cast<double>(k.grid[1]) * static_cast<double>(k.grid[2]);
  const int64_t threads_per_block = k.block[0] * k.block[1] * k.block[2];
  if (blocks < 1 || threads_per_block < 1) {
    if (why) *why = "an empty launch";
    return std::nullopt;
  }
  p.dram_us = distinct_bytes(df, k) / (arch.dram_gbps * 1e3);
  // Operations not counted from the code: the launch floor and its bytes from DRAM, a lower bound
  // (source says so).
  std::string uncounted;
  if (!k.ops) uncounted = "its operations were not counted (no device.cu analyzed)";
  else if (k.ops->status == KernelOps::Status::Unknown) uncounted = "its operations could not be counted from its code";
  else if (!k.ops->load_bytes || !k.ops->store_bytes)
    uncounted = "its global-memory accesses were not counted (" + k.ops->bytes_reason + ")";
  if (!uncounted.empty()) {
    p.source = "floor";
    p.limiter = p.dram_us > arch.launch_us * 0.05 ? "dram" : "launch";
    p.us = arch.launch_us + p.dram_us;
    if (why) *why = uncounted + ": the launch floor and its bytes only";
    return p;
  }
  p.source = "code";
  const KernelOps& ops = *k.ops;
  const int64_t warps_per_block = (threads_per_block + 31) / 32;
  const double threads = blocks * static_cast<double>(threads_per_block);
  p.threads_per_warp = static_cast<double>(threads_per_block) / static_cast<double>(warps_per_block);

  // Occupancy: resident blocks per SM, from its threads, its block slots and shared memory.
  int by_threads = static_cast<int>(arch.max_threads_per_sm / (warps_per_block * 32));
  p.blocks_per_sm = std::min(arch.max_blocks_per_sm, by_threads);
  p.occupancy_limit = by_threads < arch.max_blocks_per_sm ? "threads" : "blocks";
  if (k.dynamic_shared_memory > 0) {
    int by_shared = static_cast<int>(arch.shared_per_sm / k.dynamic_shared_memory);
    if (by_shared < p.blocks_per_sm) p.blocks_per_sm = by_shared, p.occupancy_limit = "shared memory";
  }
  p.blocks_per_sm = std::max(p.blocks_per_sm, 1);
  p.waves = static_cast<int64_t>(std::ceil(blocks / (static_cast<double>(arch.sms) * p.blocks_per_sm)));

  // One thread's work, on average over the grid.
  double issue_ops = 0, chain_ops = 0, executed = 0;
  for (int kind = 0; kind < KernelOps::kKinds; ++kind) {
    uint64_t n = 0;
    for (uint64_t c : ops.counts[kind]) n += c;
    issue_ops += kIssue[kind] * static_cast<double>(n);
    chain_ops += kChain[kind] * static_cast<double>(n);
    executed += static_cast<double>(n);
  }
  p.ops_per_thread = executed / threads;
  p.loads_per_thread = static_cast<double>(*ops.load_bytes) / kWord / threads;
  const double stores_per_thread = static_cast<double>(*ops.store_bytes) / kWord / threads;

  // Latency: a thread's loads wait at L2's latency, each round of loads the operations that
  // consume it (a loop of `acc += a[i] * b[i]`: one round per iteration); its operations wait on
  // each other at the ALU's latency. Every resident warp waits alike, so a wave takes one chain.
  // Rounds of loads: a round per consuming operation (a loop of `acc += a[i] * b[i]`: one per
  // iteration), 4 iterations in flight at once as nvcc unrolls them, except that loads cannot move
  // across a barrier: a kernel that loads between two barriers on every iteration (TVM's shared
  // memory staging) waits for each round (barriers / 2 such intervals).
  p.barriers_per_thread = static_cast<double>(ops.barriers) / threads;
  const double rounds =
      p.loads_per_thread > 0 ? std::max(1.0, std::min(p.loads_per_thread, p.ops_per_thread)) : 0.0;
  const double exposed = rounds > 0 ? std::max({1.0, rounds / kUnroll, std::min(rounds, p.barriers_per_thread / 2)}) : 0.0;
  p.exposed_rounds = exposed;
  const double chain_cycles = exposed * arch.l2_latency_cycles + chain_ops / threads * arch.alu_latency_cycles +
                              p.barriers_per_thread * kBarrierCycles;
  const double cycles_per_us = arch.clock_ghz * 1e3;
  p.latency_us = static_cast<double>(p.waves) * chain_cycles / cycles_per_us;

  // Issue: every warp instruction of the grid over the SMs' schedulers (a partial warp issues as a
  // whole one).
  const double instr_per_thread = issue_ops / threads + (p.loads_per_thread + stores_per_thread) * (1 + kAddressInstr) +
                                  kThreadInstr;
  const double warp_instr = blocks * static_cast<double>(warps_per_block) * instr_per_thread;
  p.issue_us = warp_instr / (static_cast<double>(arch.sms) * arch.schedulers_per_sm) / cycles_per_us;

  // Bandwidth: the distinct bytes its arguments touch from DRAM (footprints, else whole buffers),
  // and every access through L2 in 32-byte sectors: a warp of fewer than 8 threads moves a sector
  // for each thread's word.
  const double accessed = static_cast<double>(*ops.load_bytes + *ops.store_bytes);
  const double amplification = p.threads_per_warp >= kSector / kWord ? 1.0 : kSector / (kWord * p.threads_per_warp);
  p.l2_us = accessed * amplification / (arch.l2_gbps * 1e3);

  double body = p.latency_us;
  p.limiter = "latency";
  for (auto [term, name] : {std::pair{p.issue_us, "issue"}, {p.dram_us, "dram"}, {p.l2_us, "l2"}})
    if (term > body) body = term, p.limiter = name;
  if (body < arch.launch_us * 0.05) p.limiter = "launch";
  p.us = arch.launch_us + body;
  return p;
}

double predict_gemm_us(double flops, double bytes, double fp32_tflops, const GpuArch& arch) {
  // cuBLAS's FP32 GEMMs reach about 70% of the FP32 peak at sizes that fill the GPU (NVIDIA's
  // cuBLAS performance figures); smaller ones are bounded by their bytes or the launch.
  const double compute = fp32_tflops > 0 ? flops / (fp32_tflops * 0.7 * 1e6) : 0;
  const double memory = bytes / (arch.dram_gbps * 1e3);
  return arch.launch_us + std::max(compute, memory);
}

namespace {
constexpr const char* kProfileSchema = "kdflow-gpu-profile/1";
}  // namespace

std::string gpu_profile_json(const GpuArch& a, const std::vector<std::pair<std::string, double>>& measurements) {
  nlohmann::ordered_json j;
  j["schema"] = kProfileSchema;
  j["id"] = a.id;
  j["sms"] = a.sms;
  j["clock_ghz"] = a.clock_ghz;
  j["max_threads_per_sm"] = a.max_threads_per_sm;
  j["max_blocks_per_sm"] = a.max_blocks_per_sm;
  j["shared_per_sm"] = a.shared_per_sm;
  j["schedulers_per_sm"] = a.schedulers_per_sm;
  j["dram_gbps"] = a.dram_gbps;
  j["l2_gbps"] = a.l2_gbps;
  j["l2_latency_cycles"] = a.l2_latency_cycles;
  j["alu_latency_cycles"] = a.alu_latency_cycles;
  j["launch_us"] = a.launch_us;
  j["source"] = a.source;
  nlohmann::ordered_json m = nlohmann::ordered_json::object();
  for (const auto& [k, v] : measurements) m[k] = v;
  j["measurements"] = std::move(m);
  return j.dump(2) + "\n";
}

Expected<GpuArch> parse_gpu_profile(const std::string& text, const std::string& file) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return file_error(file, "not a JSON object (a kdflow calibrate profile)");
  if (!j.contains("schema") || j["schema"] != kProfileSchema)
    return Error{fmt::format("{}:/schema: error: expected \"{}\" (what kdflow calibrate writes)", file, kProfileSchema),
                 ExitCode::DataError};
  GpuArch a;
  std::string bad;
  auto number = [&](const char* key, double lo, double hi) -> double {
    if (!bad.empty()) return 0;
    auto it = j.find(key);
    if (it == j.end() || !it->is_number() || !(it->get<double>() >= lo && it->get<double>() <= hi)) {
      bad = fmt::format("{}:/{}: error: expected a number in [{:g}, {:g}]", file, key, lo, hi);
      return 0;
    }
    return it->get<double>();
  };
  if (!j.contains("id") || !j["id"].is_string() || j["id"].get<std::string>().empty())
    return Error{file + ":/id: error: expected the device's name (a string: h100 ...)", ExitCode::DataError};
  a.id = j["id"].get<std::string>();
  a.sms = static_cast<int>(number("sms", 1, 4096));
  a.clock_ghz = number("clock_ghz", 0.1, 10);
  a.max_threads_per_sm = static_cast<int>(number("max_threads_per_sm", 32, 65536));
  a.max_blocks_per_sm = static_cast<int>(number("max_blocks_per_sm", 1, 1024));
  a.shared_per_sm = static_cast<int64_t>(number("shared_per_sm", 0, 1 << 30));
  a.schedulers_per_sm = static_cast<int>(number("schedulers_per_sm", 1, 64));
  a.dram_gbps = number("dram_gbps", 1, 1e6);
  a.l2_gbps = number("l2_gbps", 1, 1e7);
  a.l2_latency_cycles = number("l2_latency_cycles", 1, 1e5);
  a.alu_latency_cycles = number("alu_latency_cycles", 0.1, 1e3);
  a.launch_us = number("launch_us", 0, 1e6);
  if (!bad.empty()) return Error{bad, ExitCode::DataError};
  a.source = j.contains("source") && j["source"].is_string() ? j["source"].get<std::string>() : "a device profile";
  a.source += " (" + file + ")";
  return a;
}

}  // namespace kdflow
