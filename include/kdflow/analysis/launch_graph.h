// launch_graph.h — the kernel launches as a DAG: df.dependencies (RAW/WAR/WAW on the same
// memory) transitively reduced, the longest dependency chain and, given per-kernel times,
// the critical path. IR in, plain facts out; no driver, no printing.
#pragma once

#include <cstddef>
#include <vector>

#include "kdflow/ir/dataflow.h"

namespace kdflow {

/// Kernel-to-kernel dependencies as a DAG over kernel ids (kernels are numbered in launch
/// order, so every edge goes from a smaller to a larger id). Library calls are not part
/// of it (their dependencies are skipped; replay refuses models that make them).
struct LaunchGraph {
  size_t kernels = 0;
  /// kernel id → the kernels it must wait for after transitive reduction (ascending).
  /// An edge u→v is kept iff v depends on u and no other path leads from u to v.
  std::vector<std::vector<int>> preds;
  size_t dependency_pairs = 0;  ///< distinct (from, to) kernel pairs in df.dependencies
  size_t edges = 0;             ///< edges after reduction
  /// The longest chain of dependent launches (in launches), and one such chain.
  int longest_chain = 0;
  std::vector<int> longest_path;
};

/// Builds the reduced DAG from df.dependencies. O(kernels² / 64) memory.
LaunchGraph launch_graph(const Dataflow& df);

/// Every step the model runs — kernels, library calls and host copies — as one DAG, in run
/// order: the library calls with after_kernel -1, kernel 0, the calls after kernel 0, kernel
/// 1, ...; a host copy (df.host_copies, the KV cache's auxiliary arrays of an LLM session)
/// before the first kernel or call of a later graph node, as replay's eager runs do it.
/// Edges are df.dependencies (library-call endpoints included) and, for each host copy, every
/// earlier step that touches the memory it writes (its storage, or its buffer where it has
/// none) and every later one, transitively reduced over all steps, so a kernel → kernel edge
/// implied through a library call or a copy is dropped too.
struct StepGraph {
  struct Step {
    bool library_call = false;
    bool host_copy = false;  ///< a host copy (never also a library call)
    int id = 0;              ///< kernel id, library call id, or index in df.host_copies
  };
  std::vector<Step> steps;
  std::vector<std::vector<int>> preds;  ///< step index → step indices it must wait for (ascending)
  size_t dependency_pairs = 0;          ///< distinct (from, to) step pairs in df.dependencies
  size_t edges = 0;                     ///< after reduction
};
StepGraph step_graph(const Dataflow& df);

/// The path through `g` whose kernel times (kernel id → µs) add up to the most: the best
/// any amount of concurrency could do. Kernels missing from `kernel_us` count 0.
struct CriticalPath {
  double time_us = 0;
  std::vector<int> kernels;  ///< in launch order
};
CriticalPath critical_path(const LaunchGraph& g, const std::vector<double>& kernel_us);

}  // namespace kdflow

namespace kdflow {

/// A contiguous run of launches (kernel ids first..last, inclusive) cut out of the model:
/// what it must be given and what it produces.
struct LaunchSlice {
  std::vector<int> kernels;  ///< first..last
  /// Buffers some kernel of the slice reads (read, readwrite or unknown access) before any
  /// kernel of the slice writes them, ascending: what must be loaded before it runs.
  std::vector<int> live_ins;
  /// For each live-in (same order): the last kernel before the slice that writes it, or -1
  /// (a param or input, or never written).
  std::vector<int> live_in_writer;
  std::vector<int> writes;  ///< buffers the slice writes, ascending
};
LaunchSlice slice_launches(const Dataflow& df, int first_kernel, int last_kernel);

}  // namespace kdflow
