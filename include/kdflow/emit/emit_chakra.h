// emit_chakra.h — the flow as MLCommons Chakra execution traces for ASTRA-sim and other
// simulators: one trace per rank, each length-delimited protobuf messages (GlobalMetadata, then
// one node per kernel launch and library call; a collective becomes communication nodes).
// Renders the IR and a CostReport; reads and writes no files. docs/chakra.md is the spec.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kdflow/analysis/costs.h"
#include "kdflow/ir/dataflow.h"
#include "kdflow/support/diag.h"

namespace kdflow {

/// True when this build can write Chakra traces (protobuf was found at build time).
bool chakra_available();

/// The traces, one per rank (`df.ranks` of them; one for a flow that is not sharded).
///
/// Time: each compute node's time is the measured time when `costs` has one, else the time
/// predicted from its code on its device (time_model.h; `roofline_durations`: the roofline bound
/// instead), else none (1 ns) — `duration_source` says which. ASTRA-sim reads it two
/// ways, both kept faithful (docs/chakra.md "Time"): with `"roofline-enabled": 1` and
/// `local-mem-bw` = chakra_local_mem_bw_gbps(costs) in the system file, from `num_ops` and
/// `tensor_size`, chosen so that the roofline time is the node's time to the nanosecond; with the
/// roofline off, from `duration_micros`, whole microseconds rounded so that every prefix of the
/// launch order keeps the sum of the exact times (error diffusion: a 0.3 µs kernel is 0 or 1).
///
/// Collectives (LibraryCall::collective) on more than one rank: allreduce and allgather are
/// COMM_COLL_NODEs; the rooted and point-to-point kinds are COMM_SEND_NODE / COMM_RECV_NODE pairs
/// (docs/chakra.md "Collectives"). Data dependencies are the RAW edges, control dependencies the
/// WAR/WAW edges and, on each rank, the program order of its communications.
/// Unavailable (exit 69) in a build without protobuf.
Expected<std::vector<std::string>> emit_chakra(const Dataflow& df, const CostReport& costs, const std::string& model,
                                               bool roofline_durations = false);

/// The DRAM bandwidth (GB/s, whole) the traces' num_ops / tensor_size encode time with: the
/// roofline device's (`costs.device`), H100's without one. ASTRA-sim's system file must state it
/// as `local-mem-bw` for the roofline times to be the kernels' times.
uint64_t chakra_local_mem_bw_gbps(const CostReport& costs);

/// Where rank `rank`'s trace goes for `-o output`: `output` itself for a flow of one rank;
/// otherwise ASTRA-sim's naming, `P.<rank>.et` with P the output without its `.et`
/// (--workload-configuration=P reads P.0.et ... P.<ranks-1>.et).
std::string chakra_rank_path(const std::string& output, int rank, int ranks);

}  // namespace kdflow
