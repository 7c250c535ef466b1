// nccl.h — the NCCL entry points a sharded replay needs, loaded at run time (dlopen; never
// linked, no NCCL headers at build time; types as nccl.h declares them), and the communicators
// of one replay: one per rank, rank r on GPU first + r, made in one call (ncclCommInitAll) before
// any rank's thread starts, so a rank that fails early cannot leave the others blocked in
// communicator set-up.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kdflow/support/diag.h"

namespace kdflow::nccl {

struct ncclComm;
using ncclComm_t = ncclComm*;
using ncclResult_t = int;
using cudaStream_t = void*;  // a CUstream

inline constexpr ncclResult_t ncclSuccess = 0;

struct Library {
  std::string library;  ///< what was dlopen()ed
  void* handle = nullptr;
  int version = 0;  ///< ncclGetVersion: 22304 is 2.23.4
  ncclResult_t (*ncclGetVersion)(int* version) = nullptr;
  ncclResult_t (*ncclCommInitAll)(ncclComm_t* comms, int ndev, const int* devlist) = nullptr;
  ncclResult_t (*ncclCommDestroy)(ncclComm_t comm) = nullptr;
  ncclResult_t (*ncclCommAbort)(ncclComm_t comm) = nullptr;
  ncclResult_t (*ncclAllReduce)(const void* send, void* recv, size_t count, int dtype, int op, ncclComm_t comm,
                                cudaStream_t stream) = nullptr;
  ncclResult_t (*ncclAllGather)(const void* send, void* recv, size_t count, int dtype, ncclComm_t comm,
                                cudaStream_t stream) = nullptr;
  ncclResult_t (*ncclBroadcast)(const void* send, void* recv, size_t count, int dtype, int root, ncclComm_t comm,
                                cudaStream_t stream) = nullptr;
  ncclResult_t (*ncclSend)(const void* send, size_t count, int dtype, int peer, ncclComm_t comm,
                           cudaStream_t stream) = nullptr;
  ncclResult_t (*ncclRecv)(void* recv, size_t count, int dtype, int peer, ncclComm_t comm,
                           cudaStream_t stream) = nullptr;
  ncclResult_t (*ncclGroupStart)() = nullptr;
  ncclResult_t (*ncclGroupEnd)() = nullptr;
  const char* (*ncclGetErrorString)(ncclResult_t r) = nullptr;
  const char* (*ncclGetLastError)(ncclComm_t comm) = nullptr;  // optional (2.13+)

  /// "ncclInvalidUsage (5): invalid usage" for `r`, with NCCL's last error where it has one.
  std::string describe(ncclResult_t r, ncclComm_t comm = nullptr) const;
};

/// $KDFLOW_NCCL_LIBRARY when `override_path` is empty and it is set, else libnccl.so.2
/// (Debian's libnccl2, or PyPI's nvidia-nccl-cu13 on the loader path). None, or a library
/// without an entry point replay needs → ExitCode::Unavailable, one line.
Expected<Library> load_nccl(const std::string& override_path);

/// NCCL's data type for a TVM dtype ("float32" → ncclFloat32); -1 for one NCCL has not.
int nccl_dtype(const std::string& dtype);
/// NCCL's reduction for disco's reduce kind ("sum" → ncclSum, ..., "avg" → ncclAvg); -1 none.
int nccl_op(const std::string& reduce_op);

/// The communicators of one sharded replay, shared by the ranks' back ends.
class Communicators {
 public:
  /// One communicator per rank, rank r on device first_device + r (ncclCommInitAll).
  static Expected<std::shared_ptr<Communicators>> make(Library lib, int ranks, int first_device);
  ~Communicators();
  Communicators(const Communicators&) = delete;
  Communicators& operator=(const Communicators&) = delete;

  const Library& lib() const { return lib_; }
  ncclComm_t comm(int rank) const { return comms_[static_cast<size_t>(rank)]; }
  int ranks() const { return static_cast<int>(comms_.size()); }
  /// A rank failed: every communicator aborted (ncclCommAbort), so that the ranks waiting in a
  /// collective on their GPUs stop. Once; the destructor then destroys nothing.
  void abort();

 private:
  Communicators() = default;
  Library lib_;
  std::vector<ncclComm_t> comms_;
  std::once_flag aborted_once_;
  bool aborted_ = false;
};

}  // namespace kdflow::nccl
