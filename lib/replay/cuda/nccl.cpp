// nccl.cpp — loads NCCL at run time and makes one replay's communicators. See nccl.h.
#include "nccl.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <cstdlib>

namespace kdflow::nccl {

std::string Library::describe(ncclResult_t r, ncclComm_t comm) const {
  static const char* const names[] = {"ncclSuccess",       "ncclUnhandledCudaError", "ncclSystemError",
                                      "ncclInternalError", "ncclInvalidArgument",    "ncclInvalidUsage",
                                      "ncclRemoteError",   "ncclInProgress"};
  std::string name = r >= 0 && r < 8 ? names[r] : "NCCL result";
  std::string text = fmt::format("{} ({})", name, r);
  if (ncclGetErrorString)
    if (const char* s = ncclGetErrorString(r); s && *s) text += fmt::format(": {}", s);
  if (ncclGetLastError)
    if (const char* s = ncclGetLastError(comm); s && *s) text += fmt::format(" ({})", s);
  return text;
}

Expected<Library> load_nccl(const std::string& override_path) {
  Library l;
  std::string name = override_path;
  if (name.empty())
    if (const char* env = std::getenv("KDFLOW_NCCL_LIBRARY"); env && *env) name = env;
  if (name.empty()) name = "libnccl.so.2";
  l.handle = ::dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!l.handle) {
    const char* why = ::dlerror();
    return file_error(name,
                      fmt::format("cannot load NCCL ({}); install Debian's libnccl2 or PyPI's nvidia-nccl-cu13, or "
                                  "set KDFLOW_NCCL_LIBRARY",
                                  why ? why : "dlopen failed"),
                      ExitCode::Unavailable);
  }
  l.library = name;
  struct Entry {
    const char* symbol;
    bool required;
    void** slot;
  } entries[] = {
      {"ncclGetVersion", true, reinterpret_cast<void**>(&l.ncclGetVersion)},
      {"ncclCommInitAll", true, reinterpret_cast<void**>(&l.ncclCommInitAll)},
      {"ncclCommDestroy", true, reinterpret_cast<void**>(&l.ncclCommDestroy)},
      {"ncclCommAbort", true, reinterpret_cast<void**>(&l.ncclCommAbort)},
      {"ncclAllReduce", true, reinterpret_cast<void**>(&l.ncclAllReduce)},
      {"ncclAllGather", true, reinterpret_cast<void**>(&l.ncclAllGather)},
      {"ncclBroadcast", true, reinterpret_cast<void**>(&l.ncclBroadcast)},
      {"ncclSend", true, reinterpret_cast<void**>(&l.ncclSend)},
      {"ncclRecv", true, reinterpret_cast<void**>(&l.ncclRecv)},
      {"ncclGroupStart", true, reinterpret_cast<void**>(&l.ncclGroupStart)},
      {"ncclGroupEnd", true, reinterpret_cast<void**>(&l.ncclGroupEnd)},
      {"ncclGetErrorString", true, reinterpret_cast<void**>(&l.ncclGetErrorString)},
      {"ncclGetLastError", false, reinterpret_cast<void**>(&l.ncclGetLastError)},
  };
  for (Entry& e : entries) {
    *e.slot = ::dlsym(l.handle, e.symbol);
    if (!*e.slot && e.required)
      return file_error(l.library, fmt::format("NCCL has no {} (a library before 2.7, which replay needs)", e.symbol),
                        ExitCode::Unavailable);
  }
  if (l.ncclGetVersion(&l.version) != ncclSuccess) l.version = 0;
  return l;
}

int nccl_dtype(const std::string& d) {
  if (d == "int8") return 0;
  if (d == "uint8" || d == "bool") return 1;
  if (d == "int32") return 2;
  if (d == "uint32") return 3;
  if (d == "int64") return 4;
  if (d == "uint64") return 5;
  if (d == "float16") return 6;
  if (d == "float32") return 7;
  if (d == "float64") return 8;
  if (d == "bfloat16") return 9;
  return -1;
}

int nccl_op(const std::string& op) {
  if (op == "sum") return 0;
  if (op == "prod") return 1;
  if (op == "max") return 2;
  if (op == "min") return 3;
  if (op == "avg") return 4;
  return -1;
}

Expected<std::shared_ptr<Communicators>> Communicators::make(Library lib, int ranks, int first_device) {
  std::shared_ptr<Communicators> c(new Communicators());
  c->lib_ = std::move(lib);
  c->comms_.assign(static_cast<size_t>(ranks), nullptr);
  std::vector<int> devices;
  for (int r = 0; r < ranks; ++r) devices.push_back(first_device + r);
  if (ncclResult_t r = c->lib_.ncclCommInitAll(c->comms_.data(), ranks, devices.data()); r != ncclSuccess) {
    c->comms_.assign(static_cast<size_t>(ranks), nullptr);
    return file_error(c->lib_.library,
                      fmt::format("ncclCommInitAll of {} ranks on GPUs {} to {} failed: {}", ranks, first_device,
                                  first_device + ranks - 1, c->lib_.describe(r)),
                      ExitCode::Unavailable);
  }
  return c;
}

void Communicators::abort() {
  std::call_once(aborted_once_, [this] {
    aborted_ = true;
    for (ncclComm_t comm : comms_)
      if (comm) lib_.ncclCommAbort(comm);
  });
}

Communicators::~Communicators() {
  if (aborted_) return;
  for (ncclComm_t comm : comms_)
    if (comm) lib_.ncclCommDestroy(comm);
}

}  // namespace kdflow::nccl
