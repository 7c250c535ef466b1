// fake_nccl.cpp — a stand-in for libnccl.so.2 for the replay tests, on top of the fake CUDA
// driver (test/fake_cuda; both loaded by kdflow through KDFLOW_NCCL_LIBRARY and
// KDFLOW_CUDA_LIBRARY). It implements the entry points replay uses, as strictly as NCCL
// behaves or stricter: where NCCL would hang or corrupt memory, the fake fails the call.
//
//   ncclCommInitAll(comms, n, devlist)  one communicator per rank, rank r on devlist[r]: each a
//       device the fake driver has, no device twice (NCCL: "Duplicate GPU detected").
//   ncclAllReduce / ncclAllGather / ncclBroadcast / ncclSend / ncclRecv (between
//       ncclGroupStart and ncclGroupEnd, a group is one operation)  each checks its
//       communicator (live, not aborted), data type and reduction, the stream (a stream of the
//       communicator's device: the fake driver knows each stream's device) and every buffer:
//       count × the type's size bytes inside one allocation of that device (an allgather's
//       receive buffer holds every rank's count). Then it is queued on the stream (the fake
//       driver's host work: in stream order, and refused as a launch would be).
//   Every rank's k-th operation must be the same as the others' k-th: the same collective,
//       count, data type, reduction and root; a group's sends and receives must pair up (each
//       send of s to d with a receive of d from s of the same count and type). The rank whose
//       call completes the k-th operation of all ranks checks this; a mismatch fails that call
//       (ncclInvalidUsage, the reason from ncclGetLastError) and every later call of any rank.
//       When they agree the fake moves the data in the fake driver's memory, as NCCL would:
//       reductions of float16, bfloat16, float32, float64, int32, int64 and uint8 (sum, prod,
//       max, min, avg), gathers, broadcasts and the group's pairs. It moves them when the last
//       rank makes its call, not when every rank's stream reaches the operation: the fake driver
//       runs stream work at once unless a stream is held behind a gate or captured, which a
//       sharded replay never does with its collectives (a limit of the fake, said here).
//   ncclCommDestroy / ncclCommAbort  the communicator is dead afterwards; once a communicator
//       was aborted, every call on its clique fails.
//
// Log lines go to $KDFLOW_FAKE_CUDA_LOG through the fake driver (the same thread numbers):
//   ncclAllReduce rank=0 seq=3 count=256 dtype=7 op=0 root=-1 send=0x... recv=0x... -> 0
//   nccl-matched seq=3 what=allreduce ranks=2
#include <dlfcn.h>

#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace {

using Result = int;
using CUdeviceptr = unsigned long long;
constexpr Result kSuccess = 0, kInvalidArgument = 4, kInvalidUsage = 5, kSystemError = 2;

/// What the fake driver exports for the fake NCCL (looked up at each use: the engine loaded it).
struct Driver {
  void (*log)(const char*) = nullptr;
  unsigned char* (*host_pointer)(CUdeviceptr, size_t) = nullptr;
  int (*pointer_device)(CUdeviceptr, size_t) = nullptr;
  int (*stream_device)(void*) = nullptr;
  int (*enqueue)(void*, const char*, void (*)(void*), void*) = nullptr;
  int (*device_count)(int*) = nullptr;
};

bool driver(Driver* d) {
  const char* path = std::getenv("KDFLOW_CUDA_LIBRARY");
  if (!path || !*path) return false;
  void* h = ::dlopen(path, RTLD_NOW | RTLD_NOLOAD);
  if (!h) return false;
  d->log = reinterpret_cast<void (*)(const char*)>(::dlsym(h, "kdflow_fake_cuda_log"));
  d->host_pointer =
      reinterpret_cast<unsigned char* (*)(CUdeviceptr, size_t)>(::dlsym(h, "kdflow_fake_cuda_host_pointer"));
  d->pointer_device = reinterpret_cast<int (*)(CUdeviceptr, size_t)>(::dlsym(h, "kdflow_fake_cuda_pointer_device"));
  d->stream_device = reinterpret_cast<int (*)(void*)>(::dlsym(h, "kdflow_fake_cuda_stream_device"));
  d->enqueue =
      reinterpret_cast<int (*)(void*, const char*, void (*)(void*), void*)>(::dlsym(h, "kdflow_fake_cuda_enqueue"));
  d->device_count = reinterpret_cast<int (*)(int*)>(::dlsym(h, "cuDeviceGetCount"));
  ::dlclose(h);  // balances the NOLOAD reference; the engine still holds it
  return d->log && d->host_pointer && d->pointer_device && d->stream_device && d->enqueue && d->device_count;
}

std::recursive_mutex& api_mutex() {
  static std::recursive_mutex m;
  return m;
}

thread_local std::string t_last_error;

void log_line(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void log_line(const char* fmt, ...) {
  char buf[2048];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  Driver d;
  if (driver(&d)) d.log(buf);
}

size_t type_size(int dtype) {
  switch (dtype) {
    case 0:
    case 1:
      return 1;  // int8, uint8
    case 2:
    case 3:
    case 7:
      return 4;  // int32, uint32, float32
    case 4:
    case 5:
    case 8:
      return 8;  // int64, uint64, float64
    case 6:
    case 9:
      return 2;  // float16, bfloat16
    default:
      return 0;
  }
}

/// One rank's operation: a collective, or a group of sends and receives.
struct Op {
  std::string what;  // "allreduce" | "allgather" | "broadcast" | "group"
  size_t count = 0;
  int dtype = -1, op = -1, root = -1;
  CUdeviceptr send = 0, recv = 0;
  struct P2P {
    bool send;
    int peer;
    size_t count;
    int dtype;
    CUdeviceptr buf;
  };
  std::vector<P2P> p2p;  // group
  std::string text() const {
    char b[160];
    if (what == "group")
      std::snprintf(b, sizeof(b), "a group of %zu sends and receives", p2p.size());
    else
      std::snprintf(b, sizeof(b), "%s count=%zu dtype=%d op=%d root=%d", what.c_str(), count, dtype, op, root);
    return b;
  }
};

struct Clique {
  int n = 0;
  std::map<size_t, std::vector<std::unique_ptr<Op>>> pending;  // seq → each rank's op (null: not yet)
  std::string failure;                                         // set once: every later call fails with it
};

struct Comm {
  std::shared_ptr<Clique> clique;
  int rank = 0, device = 0;
  size_t seq = 0;  // operations this rank has made
  bool aborted = false;
};

std::set<Comm*>& live() {
  static std::set<Comm*> s;
  return s;
}

thread_local int t_group_depth = 0;
thread_local Comm* t_group_comm = nullptr;
thread_local std::unique_ptr<Op> t_group;

Result fail(Result r, const std::string& why) {
  t_last_error = why;
  return r;
}

float half_to_float(uint16_t h) {
  uint32_t sign = (h >> 15) & 1, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  float v = exp == 0    ? std::ldexp(static_cast<float>(man), -24)
            : exp == 31 ? (man ? NAN : INFINITY)
                        : std::ldexp(static_cast<float>(man | 0x400), static_cast<int>(exp) - 25);
  return sign ? -v : v;
}
uint16_t float_to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000;
  float a = std::fabs(f);
  if (std::isnan(f)) return static_cast<uint16_t>(sign | 0x7e00);
  if (a >= 65520.0f) return static_cast<uint16_t>(sign | 0x7c00);
  if (a < 6.1035156e-05f) return static_cast<uint16_t>(sign | static_cast<uint32_t>(std::nearbyint(a * 16777216.0f)));
  int e;
  float m = std::frexp(a, &e);  // a = m × 2^e, m in [0.5, 1)
  uint32_t man = static_cast<uint32_t>(std::nearbyint((m * 2.0f - 1.0f) * 1024.0f));
  uint32_t exp = static_cast<uint32_t>(e - 1 + 15);
  if (man == 1024) man = 0, ++exp;
  return static_cast<uint16_t>(sign | (exp << 10) | man);
}

/// Element i of an array of T at p, and back (unaligned: offsets into device memory).
template <typename T>
T load(const unsigned char* p, size_t i) {
  T v;
  std::memcpy(&v, p + sizeof(T) * i, sizeof(T));
  return v;
}
template <typename T>
void store(unsigned char* p, size_t i, T v) {
  std::memcpy(p + sizeof(T) * i, &v, sizeof(T));
}

float bfloat16_to_float(uint16_t h) {
  uint32_t x = uint32_t{h} << 16;
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}
uint16_t float_to_bfloat16(float f) {  // round to nearest even
  uint32_t x;
  std::memcpy(&x, &f, 4);
  x += 0x7fff + ((x >> 16) & 1);
  return static_cast<uint16_t>(x >> 16);
}

// clang-format off
/// Element i of a buffer of `dtype`, as a double; and back.
double get(const unsigned char* p, int dtype, size_t i) {
  switch (dtype) {
    case 0: return load<int8_t>(p, i);
    case 1: return load<uint8_t>(p, i);
    case 2: return load<int32_t>(p, i);
    case 3: return load<uint32_t>(p, i);
    case 4: return static_cast<double>(load<int64_t>(p, i));
    case 5: return static_cast<double>(load<uint64_t>(p, i));
    case 6: return half_to_float(load<uint16_t>(p, i));
    case 7: return load<float>(p, i);
    case 8: return load<double>(p, i);
    case 9: return bfloat16_to_float(load<uint16_t>(p, i));
    default: return 0;
  }
}
void put(unsigned char* p, int dtype, size_t i, double d) {
  switch (dtype) {
    case 0: return store(p, i, static_cast<int8_t>(d));
    case 1: return store(p, i, static_cast<uint8_t>(d));
    case 2: return store(p, i, static_cast<int32_t>(d));
    case 3: return store(p, i, static_cast<uint32_t>(d));
    case 4: return store(p, i, static_cast<int64_t>(d));
    case 5: return store(p, i, static_cast<uint64_t>(d));
    case 6: return store(p, i, float_to_half(static_cast<float>(d)));
    case 7: return store(p, i, static_cast<float>(d));
    case 8: return store(p, i, d);
    case 9: return store(p, i, float_to_bfloat16(static_cast<float>(d)));
    default: return;
  }
}
// clang-format on

/// A group's messages by (sender, receiver): each rank's sends and receives, in call order.
using Messages = std::map<std::pair<int, int>, std::vector<const Op::P2P*>>;
std::pair<Messages, Messages> pair_up(const std::vector<std::unique_ptr<Op>>& ops) {
  Messages sends, recvs;
  for (size_t r = 0; r < ops.size(); ++r)
    for (const Op::P2P& p : ops[r]->p2p)
      (p.send ? sends[{static_cast<int>(r), p.peer}] : recvs[{p.peer, static_cast<int>(r)}]).push_back(&p);
  return {sends, recvs};
}

/// Why the ranks' k-th operations do not agree ("" when they do).
std::string disagreement(const std::vector<std::unique_ptr<Op>>& ops) {
  const Op& a = *ops[0];
  for (size_t r = 1; r < ops.size(); ++r) {
    const Op& b = *ops[r];
    bool same = a.what == b.what &&
                (a.what == "group" || (a.count == b.count && a.dtype == b.dtype && a.op == b.op && a.root == b.root));
    if (!same) return "rank 0 made " + a.text() + " but rank " + std::to_string(r) + " made " + b.text();
  }
  if (a.what != "group") return "";
  // Each send of s to d pairs with one receive of d from s, in order, of the same count and type.
  auto [sends, recvs] = pair_up(ops);
  for (const auto& [key, list] : sends) {
    const auto& other = recvs[key];
    if (other.size() != list.size())
      return "rank " + std::to_string(key.first) + " sends " + std::to_string(list.size()) + " messages to rank " +
             std::to_string(key.second) + ", which receives " + std::to_string(other.size());
    for (size_t i = 0; i < list.size(); ++i)
      if (list[i]->count != other[i]->count || list[i]->dtype != other[i]->dtype)
        return "rank " + std::to_string(key.first) + " sends " + std::to_string(list[i]->count) + " elements to rank " +
               std::to_string(key.second) + ", which receives " + std::to_string(other[i]->count);
  }
  for (const auto& [key, list] : recvs)
    if (sends[key].size() != list.size())
      return "rank " + std::to_string(key.second) + " receives from rank " + std::to_string(key.first) +
             ", which sends it nothing";
  return "";
}

/// Moves the data of the ranks' agreeing k-th operations in the fake driver's memory.
void perform(const Driver& d, const std::vector<std::unique_ptr<Op>>& ops) {
  const Op& a = *ops[0];
  const size_t n = ops.size();
  if (a.what == "group") {
    auto [sends, recvs] = pair_up(ops);
    for (const auto& [key, list] : sends)
      for (size_t i = 0; i < list.size(); ++i) {
        size_t bytes = list[i]->count * type_size(list[i]->dtype);
        unsigned char* from = d.host_pointer(list[i]->buf, bytes);
        unsigned char* to = d.host_pointer(recvs[key][i]->buf, bytes);
        if (from && to && bytes) std::memmove(to, from, bytes);
      }
    return;
  }
  const size_t size = type_size(a.dtype), bytes = a.count * size;
  if (a.what == "broadcast") {
    std::vector<unsigned char> root(bytes);
    if (unsigned char* p = d.host_pointer(ops[static_cast<size_t>(a.root)]->send, bytes))
      std::memcpy(root.data(), p, bytes);
    for (size_t r = 0; r < n; ++r)
      if (unsigned char* p = d.host_pointer(ops[r]->recv, bytes)) std::memcpy(p, root.data(), bytes);
    return;
  }
  if (a.what == "allgather") {
    std::vector<unsigned char> all(bytes * n);
    for (size_t r = 0; r < n; ++r)
      if (unsigned char* p = d.host_pointer(ops[r]->send, bytes)) std::memcpy(all.data() + r * bytes, p, bytes);
    for (size_t r = 0; r < n; ++r)
      if (unsigned char* p = d.host_pointer(ops[r]->recv, bytes * n)) std::memcpy(p, all.data(), all.size());
    return;
  }
  // allreduce: read every rank's send first (a send may be another rank's recv: in place).
  std::vector<double> acc(a.count);
  for (size_t r = 0; r < n; ++r) {
    const unsigned char* p = d.host_pointer(ops[r]->send, bytes);
    for (size_t i = 0; i < a.count; ++i) {
      double v = p ? get(p, a.dtype, i) : 0;
      if (r == 0)
        acc[i] = v;
      else if (a.op == 0 || a.op == 4)
        acc[i] += v;
      else if (a.op == 1)
        acc[i] *= v;
      else if (a.op == 2)
        acc[i] = std::max(acc[i], v);
      else if (a.op == 3)
        acc[i] = std::min(acc[i], v);
    }
  }
  if (a.op == 4)
    for (double& v : acc) v /= static_cast<double>(n);
  for (size_t r = 0; r < n; ++r)
    if (unsigned char* p = d.host_pointer(ops[r]->recv, bytes))
      for (size_t i = 0; i < a.count; ++i) put(p, a.dtype, i, acc[i]);
}

void nothing(void*) {}

/// Common checks of a communicator and stream; "" when they pass.
Result check_comm(Comm* c, void* stream, const Driver& d, const char* api) {
  if (!live().count(c)) return fail(kInvalidArgument, std::string(api) + ": not a live communicator");
  if (c->aborted || !c->clique->failure.empty())
    return fail(kInvalidUsage, std::string(api) + ": the communicator's clique failed earlier: " +
                                   (c->aborted ? std::string("it was aborted") : c->clique->failure));
  int sd = d.stream_device(stream);
  if (sd != c->device)
    return fail(kInvalidUsage, std::string(api) + ": the stream belongs to device " + std::to_string(sd) +
                                   ", the communicator to device " + std::to_string(c->device));
  return kSuccess;
}

Result check_buffer(const Driver& d, const Comm* c, CUdeviceptr p, size_t bytes, const char* api, const char* which) {
  if (bytes == 0) return kSuccess;
  int dev = d.pointer_device(p, bytes);
  if (dev < 0)
    return fail(kInvalidArgument, std::string(api) + ": the " + which + " buffer (" + std::to_string(bytes) +
                                      " bytes) is not inside one device allocation");
  if (dev != c->device)
    return fail(kInvalidArgument, std::string(api) + ": the " + which + " buffer is on device " + std::to_string(dev) +
                                      ", the communicator on device " + std::to_string(c->device));
  return kSuccess;
}

/// Records rank c's next operation; the rank completing an operation checks and performs it.
Result submit(Comm* c, std::unique_ptr<Op> op, void* stream, const Driver& d, const char* api) {
  const size_t seq = c->seq++;
  Clique& q = *c->clique;
  auto& slot = q.pending[seq];
  if (slot.empty()) slot.resize(static_cast<size_t>(q.n));
  std::string text = op->text();
  slot[static_cast<size_t>(c->rank)] = std::move(op);
  Result r = d.enqueue(stream, api, &nothing, nullptr) == 0 ? kSuccess : kSystemError;
  if (r != kSuccess) return fail(r, std::string(api) + ": the fake driver refused to queue it on the stream");
  bool all = true;
  for (const auto& o : slot) all = all && o != nullptr;
  if (all) {
    std::string why = disagreement(slot);
    if (!why.empty()) {
      q.failure = "operation " + std::to_string(seq) + ": " + why;
      log_line("nccl-mismatch seq=%zu %s", seq, why.c_str());
      return fail(kInvalidUsage, std::string(api) + ": the ranks' calls do not match (" + q.failure + ")");
    }
    perform(d, slot);
    log_line("nccl-matched seq=%zu what=%s ranks=%d", seq, slot[0]->what.c_str(), q.n);
    q.pending.erase(seq);
  }
  (void)text;
  return kSuccess;
}

/// A collective call (not inside a group).
Result collective(const char* api, std::unique_ptr<Op> op, Comm* c, void* stream) {
  std::lock_guard<std::recursive_mutex> lock(api_mutex());
  Driver d;
  Result r = driver(&d) ? kSuccess : fail(kSystemError, std::string(api) + ": the fake CUDA driver is not loaded");
  if (r == kSuccess) r = check_comm(c, stream, d, api);
  const size_t size = type_size(op->dtype);
  if (r == kSuccess && size == 0)
    r = fail(kInvalidArgument, std::string(api) + ": data type " + std::to_string(op->dtype));
  if (r == kSuccess && op->what == "allreduce" && (op->op < 0 || op->op > 4))
    r = fail(kInvalidArgument, std::string(api) + ": reduction " + std::to_string(op->op));
  if (r == kSuccess && t_group_depth > 0)
    r = fail(kInvalidUsage, std::string(api) + ": inside ncclGroupStart (the fake groups sends and receives only)");
  const int n = r == kSuccess ? c->clique->n : 1;
  if (r == kSuccess && op->what == "broadcast" && (op->root < 0 || op->root >= n))
    r = fail(kInvalidArgument, std::string(api) + ": root " + std::to_string(op->root));
  if (r == kSuccess) {
    const size_t bytes = op->count * size;
    const bool sends = op->what != "broadcast" || c->rank == op->root;
    if (sends) r = check_buffer(d, c, op->send, bytes, api, "send");
    if (r == kSuccess)
      r = check_buffer(d, c, op->recv, op->what == "allgather" ? bytes * static_cast<size_t>(n) : bytes, api,
                       "receive");
  }
  char head[256];
  std::snprintf(head, sizeof(head), "%s rank=%d seq=%zu count=%zu dtype=%d op=%d root=%d send=0x%llx recv=0x%llx", api,
                r == kSuccess || live().count(c) ? c->rank : -1, live().count(c) ? c->seq : 0, op->count, op->dtype,
                op->op, op->root, op->send, op->recv);
  if (r == kSuccess) r = submit(c, std::move(op), stream, d, api);
  log_line("%s -> %d%s%s", head, r, r ? " error=" : "", r ? t_last_error.c_str() : "");
  return r;
}

/// A send or receive: inside a group it joins the group, else it is a group of its own.
Result p2p(const char* api, bool send, CUdeviceptr buf, size_t count, int dtype, int peer, Comm* c, void* stream) {
  std::lock_guard<std::recursive_mutex> lock(api_mutex());
  Driver d;
  Result r = driver(&d) ? kSuccess : fail(kSystemError, std::string(api) + ": the fake CUDA driver is not loaded");
  if (r == kSuccess) r = check_comm(c, stream, d, api);
  if (r == kSuccess && type_size(dtype) == 0)
    r = fail(kInvalidArgument, std::string(api) + ": data type " + std::to_string(dtype));
  if (r == kSuccess && (peer < 0 || peer >= c->clique->n))
    r = fail(kInvalidArgument, std::string(api) + ": peer " + std::to_string(peer));
  if (r == kSuccess) r = check_buffer(d, c, buf, count * type_size(dtype), api, send ? "send" : "receive");
  if (r == kSuccess && t_group_depth > 0 && t_group_comm && t_group_comm != c)
    r = fail(kInvalidUsage, std::string(api) + ": a group of one thread spans two communicators (the fake models one)");
  log_line("%s rank=%d peer=%d count=%zu dtype=%d buf=0x%llx group=%d -> %d%s%s", api, r == kSuccess ? c->rank : -1,
           peer, count, dtype, buf, t_group_depth, r, r ? " error=" : "", r ? t_last_error.c_str() : "");
  if (r != kSuccess) return r;
  Op::P2P item{send, peer, count, dtype, buf};
  if (t_group_depth > 0) {
    if (!t_group) {
      t_group = std::make_unique<Op>();
      t_group->what = "group";
    }
    t_group_comm = c;
    t_group->p2p.push_back(item);
    return kSuccess;
  }
  auto op = std::make_unique<Op>();
  op->what = "group";
  op->p2p.push_back(item);
  return submit(c, std::move(op), stream, d, api);
}

thread_local void* t_group_stream = nullptr;

}  // namespace

extern "C" {

struct ncclComm;

Result ncclGetVersion(int* version) {
  if (!version) return kInvalidArgument;
  *version = 22304;  // 2.23.4
  return kSuccess;
}

const char* ncclGetErrorString(Result r) {
  switch (r) {
    case 0:
      return "no error";
    case 2:
      return "unhandled system error";
    case 4:
      return "invalid argument";
    case 5:
      return "invalid usage";
    default:
      return "unknown result";
  }
}

const char* ncclGetLastError(ncclComm*) { return t_last_error.c_str(); }

Result ncclCommInitAll(ncclComm** comms, int ndev, const int* devlist) {
  std::lock_guard<std::recursive_mutex> lock(api_mutex());
  Driver d;
  Result r = driver(&d) ? kSuccess : fail(kSystemError, "ncclCommInitAll: the fake CUDA driver is not loaded");
  int count = 0;
  if (r == kSuccess && (!comms || ndev < 1)) r = fail(kInvalidArgument, "ncclCommInitAll: no communicators asked for");
  if (r == kSuccess && d.device_count(&count) != 0) r = fail(kSystemError, "ncclCommInitAll: cuDeviceGetCount failed");
  std::set<int> seen;
  for (int i = 0; r == kSuccess && i < ndev; ++i) {
    int dev = devlist ? devlist[i] : i;
    if (dev < 0 || dev >= count)
      r = fail(kInvalidArgument, "ncclCommInitAll: device " + std::to_string(dev) + " of " + std::to_string(count));
    else if (!seen.insert(dev).second)
      r = fail(kInvalidUsage, "ncclCommInitAll: Duplicate GPU detected: device " + std::to_string(dev) + " twice");
  }
  if (r == kSuccess) {
    auto clique = std::make_shared<Clique>();
    clique->n = ndev;
    for (int i = 0; i < ndev; ++i) {
      Comm* c = new Comm{clique, i, devlist ? devlist[i] : i};
      live().insert(c);
      comms[i] = reinterpret_cast<ncclComm*>(c);
    }
  }
  log_line("ncclCommInitAll ranks=%d -> %d%s%s", ndev, r, r ? " error=" : "", r ? t_last_error.c_str() : "");
  return r;
}

Result ncclCommDestroy(ncclComm* comm) {
  std::lock_guard<std::recursive_mutex> lock(api_mutex());
  Comm* c = reinterpret_cast<Comm*>(comm);
  Result r = live().erase(c) ? kSuccess : fail(kInvalidArgument, "ncclCommDestroy: not a live communicator");
  log_line("ncclCommDestroy rank=%d -> %d", r == kSuccess ? c->rank : -1, r);
  if (r == kSuccess) delete c;
  return r;
}

Result ncclCommAbort(ncclComm* comm) {
  std::lock_guard<std::recursive_mutex> lock(api_mutex());
  Comm* c = reinterpret_cast<Comm*>(comm);
  Result r = live().erase(c) ? kSuccess : fail(kInvalidArgument, "ncclCommAbort: not a live communicator");
  if (r == kSuccess) {
    if (c->clique->failure.empty())
      c->clique->failure = "rank " + std::to_string(c->rank) + "'s communicator was aborted";
    log_line("ncclCommAbort rank=%d -> 0", c->rank);
    delete c;
  } else {
    log_line("ncclCommAbort -> %d", r);
  }
  return r;
}

Result ncclAllReduce(const void* send, void* recv, size_t count, int dtype, int op, ncclComm* comm, void* stream) {
  auto o = std::make_unique<Op>();
  o->what = "allreduce", o->count = count, o->dtype = dtype, o->op = op;
  o->send = reinterpret_cast<CUdeviceptr>(send), o->recv = reinterpret_cast<CUdeviceptr>(recv);
  return collective("ncclAllReduce", std::move(o), reinterpret_cast<Comm*>(comm), stream);
}

Result ncclAllGather(const void* send, void* recv, size_t count, int dtype, ncclComm* comm, void* stream) {
  auto o = std::make_unique<Op>();
  o->what = "allgather", o->count = count, o->dtype = dtype;
  o->send = reinterpret_cast<CUdeviceptr>(send), o->recv = reinterpret_cast<CUdeviceptr>(recv);
  return collective("ncclAllGather", std::move(o), reinterpret_cast<Comm*>(comm), stream);
}

Result ncclBroadcast(const void* send, void* recv, size_t count, int dtype, int root, ncclComm* comm, void* stream) {
  auto o = std::make_unique<Op>();
  o->what = "broadcast", o->count = count, o->dtype = dtype, o->root = root;
  o->send = reinterpret_cast<CUdeviceptr>(send), o->recv = reinterpret_cast<CUdeviceptr>(recv);
  return collective("ncclBroadcast", std::move(o), reinterpret_cast<Comm*>(comm), stream);
}

Result ncclSend(const void* send, size_t count, int dtype, int peer, ncclComm* comm, void* stream) {
  if (t_group_depth > 0) t_group_stream = stream;
  return p2p("ncclSend", true, reinterpret_cast<CUdeviceptr>(send), count, dtype, peer, reinterpret_cast<Comm*>(comm),
             stream);
}

Result ncclRecv(void* recv, size_t count, int dtype, int peer, ncclComm* comm, void* stream) {
  if (t_group_depth > 0) t_group_stream = stream;
  return p2p("ncclRecv", false, reinterpret_cast<CUdeviceptr>(recv), count, dtype, peer, reinterpret_cast<Comm*>(comm),
             stream);
}

Result ncclGroupStart() {
  std::lock_guard<std::recursive_mutex> lock(api_mutex());
  ++t_group_depth;
  log_line("ncclGroupStart depth=%d -> 0", t_group_depth);
  return kSuccess;
}

Result ncclGroupEnd() {
  std::lock_guard<std::recursive_mutex> lock(api_mutex());
  if (t_group_depth == 0) {
    log_line("ncclGroupEnd -> %d error=no_group", kInvalidUsage);
    return fail(kInvalidUsage, "ncclGroupEnd without ncclGroupStart");
  }
  Result r = kSuccess;
  if (--t_group_depth == 0 && t_group) {
    Driver d;
    Comm* c = t_group_comm;
    r = driver(&d) ? kSuccess : fail(kSystemError, "ncclGroupEnd: the fake CUDA driver is not loaded");
    if (r == kSuccess) r = check_comm(c, t_group_stream, d, "ncclGroupEnd");
    if (r == kSuccess) r = submit(c, std::move(t_group), t_group_stream, d, "ncclGroupEnd");
    t_group.reset();
    t_group_comm = nullptr;
  }
  log_line("ncclGroupEnd depth=%d -> %d%s%s", t_group_depth, r, r ? " error=" : "", r ? t_last_error.c_str() : "");
  return r;
}

}  // extern "C"
