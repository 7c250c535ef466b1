// collectives.cpp — see collectives.h.
#include "collectives.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>

namespace kdflow {
namespace {

float half_to_float(uint16_t h) {
  const uint32_t sign = (h >> 15) & 1, e = (h >> 10) & 31, m = h & 1023;
  float v = e == 0 ? std::ldexp(static_cast<float>(m), -24)
            : e == 31 ? (m ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity())
                      : std::ldexp(static_cast<float>(m + 1024), static_cast<int>(e) - 25);
  return sign ? -v : v;
}

uint16_t float_to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000;
  const uint32_t abs = x & 0x7FFFFFFF;
  if (abs > 0x7F800000) return static_cast<uint16_t>(sign | 0x7E00);  // NaN
  if (abs >= 0x477FF000) return static_cast<uint16_t>(sign | 0x7C00);  // rounds to infinity
  if (abs < 0x38800000) {  // subnormal half (or zero): round to nearest even multiple of 2^-24
    const float a = std::fabs(f) * 16777216.0f;  // units of 2^-24
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(std::nearbyint(a)));
  }
  const uint32_t e = ((abs >> 23) - 112) << 10, m = abs & 0x7FFFFF;
  uint32_t h = e | (m >> 13);
  const uint32_t rest = m & 0x1FFF;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) ++h;  // to nearest, ties to even
  return static_cast<uint16_t>(sign | h);
}

float bf16_to_float(uint16_t b) {
  const uint32_t x = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

uint16_t float_to_bf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7FFFFFFF) > 0x7F800000) return static_cast<uint16_t>((x >> 16) | 0x40);
  x += 0x7FFF + ((x >> 16) & 1);
  return static_cast<uint16_t>(x >> 16);
}

template <class T, class Load, class Store>
void reduce_as(const std::string& op, const std::vector<const std::string*>& in, std::string* out, size_t width,
               Load load, Store store) {
  const size_t n = out->size() / width;
  for (size_t i = 0; i < n; ++i) {
    T acc = load(in[0]->data() + i * width);
    for (size_t r = 1; r < in.size(); ++r) {
      const T v = load(in[r]->data() + i * width);
      if (op == "sum" || op == "avg") acc = acc + v;
      else if (op == "prod") acc = acc * v;
      else if (op == "min") acc = std::min(acc, v);
      else acc = std::max(acc, v);
    }
    if (op == "avg") acc = static_cast<T>(acc / static_cast<T>(in.size()));
    store(out->data() + i * width, acc);
  }
}

template <class T>
T load_raw(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}
template <class T>
void store_raw(char* p, T v) {
  std::memcpy(p, &v, sizeof(T));
}

template <class T>
void reduce_native(const std::string& op, const std::vector<const std::string*>& in, std::string* out) {
  reduce_as<T>(op, in, out, sizeof(T), load_raw<T>, store_raw<T>);
}

std::string turn_text(const CollectiveTurn& t) {
  if (!t.what) return fmt::format("library call {}", t.call);
  return fmt::format("library call {} ({}{} of {} {} elements)", t.call, t.what->kind,
                     t.what->reduce_op.empty() ? "" : " " + t.what->reduce_op, t.what->elements, t.what->dtype);
}

}  // namespace

bool reduce_arrays(const std::string& dtype, const std::string& op, const std::vector<const std::string*>& in,
                   std::string* out) {
  if (in.empty()) return false;
  out->assign(in[0]->size(), '\0');
  if (dtype == "float32") reduce_native<float>(op, in, out);
  else if (dtype == "float64") reduce_native<double>(op, in, out);
  else if (dtype == "int32") reduce_native<int32_t>(op, in, out);
  else if (dtype == "int64") reduce_native<int64_t>(op, in, out);
  else if (dtype == "uint8") reduce_native<uint8_t>(op, in, out);
  else if (dtype == "int8") reduce_native<int8_t>(op, in, out);
  else if (dtype == "float16")
    reduce_as<float>(op, in, out, 2, [](const char* p) { return half_to_float(load_raw<uint16_t>(p)); },
                     [](char* p, float v) { store_raw<uint16_t>(p, float_to_half(v)); });
  else if (dtype == "bfloat16")
    reduce_as<float>(op, in, out, 2, [](const char* p) { return bf16_to_float(load_raw<uint16_t>(p)); },
                     [](char* p, float v) { store_raw<uint16_t>(p, float_to_bf16(v)); });
  else
    return false;
  return true;
}

Status CollectiveHub::compute() {
  const CollectiveTurn& t0 = turns_[0];
  for (int r = 1; r < ranks_; ++r) {
    const CollectiveTurn& t = turns_[static_cast<size_t>(r)];
    const bool same = t.call == t0.call && t.what && t0.what && t.what->kind == t0.what->kind &&
                      t.what->reduce_op == t0.what->reduce_op && t.what->dtype == t0.what->dtype &&
                      t.what->elements == t0.what->elements;
    if (!same)
      return Error{fmt::format("the ranks disagree: rank 0 reached {} but rank {} reached {}", turn_text(t0), r,
                               turn_text(t)),
                   ExitCode::DataError};
  }
  const Collective& c = *t0.what;
  const std::string& k = c.kind;
  results_.assign(static_cast<size_t>(ranks_), std::string());
  auto want_recv = [&](int r, uint64_t bytes) -> Status {
    const CollectiveTurn& t = turns_[static_cast<size_t>(r)];
    if (t.recv_bytes != bytes)
      return Error{fmt::format("{}: rank {} receives into {} bytes, but the collective delivers {}", turn_text(t), r,
                               t.recv_bytes, bytes),
                   ExitCode::DataError};
    return Status::ok();
  };
  auto sent = [&](int r) {
    const CollectiveTurn& t = turns_[static_cast<size_t>(r)];
    return t.on_device ? t.send_bytes : t.send.size();
  };
  auto want_send = [&](int r) -> Status {
    const CollectiveTurn& t = turns_[static_cast<size_t>(r)];
    if (sent(r) != c.bytes)
      return Error{fmt::format("{}: rank {} sends {} bytes, not the {} the flow states", turn_text(t), r, sent(r),
                               c.bytes),
                   ExitCode::DataError};
    return Status::ok();
  };
  // On the devices (NCCL): the sizes every rank declares, checked as the host's exchange
  // checks what it is handed; no data passes through the hub.
  const bool device_kind = k == "allreduce" || k == "allgather" || k == "broadcast_from_worker0" ||
                           k == "scatter_from_worker0" || k == "gather_to_worker0";
  if (t0.on_device && device_kind) {
    const uint64_t n = static_cast<uint64_t>(ranks_);
    if (k == "scatter_from_worker0" && c.bytes % n != 0)
      return Error{fmt::format("{}: {} bytes do not split evenly over {} ranks", turn_text(t0), c.bytes, ranks_),
                   ExitCode::DataError};
    const uint64_t delivered = k == "allreduce" || k == "broadcast_from_worker0" ? c.bytes
                               : k == "scatter_from_worker0"                      ? c.bytes / n
                                                                                  : c.bytes * n;
    for (int r = 0; r < ranks_; ++r) {
      const bool sends = k == "allreduce" || k == "allgather" || k == "gather_to_worker0" || r == 0;
      if (sends)
        if (Status s = want_send(r); !s) return s;
      if (k == "gather_to_worker0" && r > 0) continue;
      if (Status s = want_recv(r, delivered); !s) return s;
    }
    return Status::ok();
  }
  if (k == "allreduce") {
    std::vector<const std::string*> in;
    for (int r = 0; r < ranks_; ++r) {
      if (Status s = want_send(r); !s) return s;
      in.push_back(&turns_[static_cast<size_t>(r)].send);
    }
    std::string sum;
    if (!reduce_arrays(c.dtype, c.reduce_op, in, &sum))
      return Error{fmt::format("{}: replay cannot reduce {} values", turn_text(t0), c.dtype), ExitCode::Unavailable};
    for (int r = 0; r < ranks_; ++r) {
      if (Status s = want_recv(r, sum.size()); !s) return s;
      results_[static_cast<size_t>(r)] = sum;
    }
    return Status::ok();
  }
  if (k == "allgather" || k == "gather_to_worker0") {
    std::string all;
    for (int r = 0; r < ranks_; ++r) {
      if (Status s = want_send(r); !s) return s;
      all += turns_[static_cast<size_t>(r)].send;
    }
    for (int r = 0; r < ranks_; ++r) {
      if (k == "gather_to_worker0" && r > 0) continue;
      if (Status s = want_recv(r, all.size()); !s) return s;
      results_[static_cast<size_t>(r)] = all;
    }
    return Status::ok();
  }
  if (k == "broadcast_from_worker0" || k == "scatter_from_worker0") {
    if (Status s = want_send(0); !s) return s;
    const std::string& root = turns_[0].send;
    const uint64_t piece = k == "broadcast_from_worker0" ? root.size() : root.size() / static_cast<uint64_t>(ranks_);
    if (k == "scatter_from_worker0" && root.size() % static_cast<uint64_t>(ranks_) != 0)
      return Error{fmt::format("{}: {} bytes do not split evenly over {} ranks", turn_text(t0), root.size(), ranks_),
                   ExitCode::DataError};
    for (int r = 0; r < ranks_; ++r) {
      if (Status s = want_recv(r, piece); !s) return s;
      results_[static_cast<size_t>(r)] =
          k == "broadcast_from_worker0" ? root : root.substr(static_cast<size_t>(piece) * static_cast<size_t>(r), piece);
    }
    return Status::ok();
  }
  return Error{fmt::format("{}: replay does not run runtime.disco.{} (point-to-point and group transfers)", turn_text(t0),
                           k),
               ExitCode::Unavailable};
}

Status CollectiveHub::exchange(int rank, CollectiveTurn turn, std::string* recv) {
  std::unique_lock<std::mutex> lock(m_);
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(time_limit_s_ > 0 ? time_limit_s_ : 1e9));
  auto wait_until = [&](auto pred) {
    while (!pred()) {
      if (!failure_.empty()) return false;
      if (cv_.wait_until(lock, deadline) == std::cv_status::timeout && !pred() && failure_.empty()) {
        failure_ = fmt::format("rank {} waited {:g} s (--time-limit) at {} for the other ranks", rank, time_limit_s_,
                               turn_text(turn));
        cv_.notify_all();
        return false;
      }
    }
    return true;
  };
  // The previous collective's results must all be taken before a new one starts.
  if (!wait_until([&] { return left_ == 0; })) return Error{failure_, ExitCode::DataError};
  const uint64_t gen = generation_;
  turns_[static_cast<size_t>(rank)] = std::move(turn);
  if (++arrived_ == ranks_) {
    arrived_ = 0;
    if (Status s = compute(); !s) {
      if (failure_.empty()) failure_ = s.error().message;
      cv_.notify_all();
      return s.error();
    }
    left_ = ranks_;
    ++generation_;
    cv_.notify_all();
  } else if (!wait_until([&] { return generation_ != gen; })) {
    return Error{failure_, ExitCode::DataError};
  }
  // This collective completed: the result is taken even if a rank stopped since (it finished).
  if (!results_[static_cast<size_t>(rank)].empty()) *recv = std::move(results_[static_cast<size_t>(rank)]);
  if (--left_ == 0) cv_.notify_all();
  return Status::ok();
}

void CollectiveHub::abort(int rank, const std::string& why) {
  std::lock_guard<std::mutex> lock(m_);
  if (failure_.empty()) failure_ = fmt::format("rank {} stopped: {}", rank, why);
  cv_.notify_all();
}

uint64_t CollectiveHub::completed() const {
  std::lock_guard<std::mutex> lock(m_);
  return generation_;
}

}  // namespace kdflow
