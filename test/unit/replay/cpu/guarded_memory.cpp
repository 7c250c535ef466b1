// Unit tests: guarded replay buffers and the fault reporter (lib/replay/cpu/guarded_memory.h).
// Each fault is provoked in a forked child (its stderr piped back, its exit status read):
// the child's line and exit code are the assertions. The "kernels" here are hand-written
// C++ loops standing in for compiled kernel code.
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <algorithm>
#include <atomic>
#include <cstring>
#include <functional>
#include <string>
#include <thread>

#include "replay/cpu/guarded_memory.h"
#include "test_util.h"

using namespace kdflow;
using namespace kdflow::cpu;

namespace {

using kdflow::test::Child;
using kdflow::test::run_child;

/// A launch of kernel 3 'fused_dense' (launch 7) with argument 0 → buffer 10 (unknown
/// footprint) and argument 1 → buffer 11 with the given footprint.
LaunchContext dense_launch(LaunchArgument::Footprint fp1 = LaunchArgument::Footprint::Unknown) {
  LaunchContext ctx;
  ctx.where = "flow.json:/launches/7";
  ctx.kernel = "fused_dense";
  ctx.kernel_id = 3;
  ctx.launch_index = 7;
  LaunchArgument a0;
  a0.index = 0;
  a0.name = "T_dense";
  a0.buffer_id = 10;
  LaunchArgument a1;
  a1.index = 1;
  a1.name = "p0";
  a1.buffer_id = 11;
  a1.footprint = fp1;
  a1.footprint_hi = 1024;
  LaunchArgument scalar;
  scalar.index = 2;
  scalar.name = "n";
  ctx.args = {a0, a1, scalar};
  return ctx;
}

void must(const Status& s) {
  if (!s) {
    const char* m = s.error().message.c_str();
    (void)!write(2, m, strlen(m));
    _exit(99);
  }
}

float* must(Expected<void*> p) {
  if (!p) {
    const char* m = p.error().message.c_str();
    (void)!write(2, m, strlen(m));
    _exit(99);
  }
  return static_cast<float*>(*p);
}

}  // namespace

TEST_CASE("guarded buffers end at their guard page, stay aligned and are zeroed", "[cpu][guard]") {
  GuardedMemory mem(8);
  const uint64_t page = GuardedMemory::page_size();
  auto p = mem.allocate(10, "T_dense", 1024, 64);
  REQUIRE(p);
  auto* d = static_cast<unsigned char*>(*p);
  const GuardedBuffer& b = mem.buffer(0);
  CHECK(reinterpret_cast<uintptr_t>(d) % 64 == 0);
  CHECK(b.tail_slack == 0);
  CHECK((reinterpret_cast<uintptr_t>(d) + 1024) % page == 0);  // the next byte is the guard page
  for (int i = 0; i < 1024; ++i) REQUIRE(d[i] == 0);

  // 3 floats at 64-byte alignment: 52 bytes of poisoned slack before the guard.
  auto q = mem.allocate(11, "small", 12, 64);
  REQUIRE(q);
  CHECK(mem.buffer(1).tail_slack == 52);
  CHECK(reinterpret_cast<uintptr_t>(*q) % 64 == 0);
  // Element alignment (4) instead: no slack, the 13th byte is the guard.
  auto r = mem.allocate(12, "exact", 12, 4);
  REQUIRE(r);
  CHECK(mem.buffer(2).tail_slack == 0);
  CHECK((reinterpret_cast<uintptr_t>(*r) + 12) % page == 0);
  // GuardSide::Start: the first byte is at the front guard.
  auto s = mem.allocate(13, "start", 100, 64, GuardSide::Start);
  REQUIRE(s);
  CHECK(reinterpret_cast<uintptr_t>(*s) % page == 0);
  CHECK(mem.buffer(3).head_slack == 0);

  auto in = mem.locate(d + 5);
  REQUIRE(in);
  CHECK(in->buffer_id == 10);
  CHECK(in->offset == 5);
  CHECK_FALSE(in->in_guard);
  auto past = mem.locate(d + 1024);
  REQUIRE(past);
  CHECK(past->in_guard);
  CHECK(past->offset == 1024);
  auto before = mem.locate(static_cast<unsigned char*>(*s) - 1);
  REQUIRE(before);
  CHECK(before->buffer_id == 13);
  CHECK(before->offset == -1);
  CHECK(before->in_guard);
  int on_stack = 0;
  CHECK_FALSE(mem.locate(&on_stack));
  CHECK(mem.slot_of(12) == 2);
  CHECK(mem.slot_of(99) == -1);
}

TEST_CASE("bad allocations are errors, not crashes", "[cpu][guard]") {
  GuardedMemory mem(1);
  CHECK_FALSE(mem.allocate(1, "a", 16, 3));                               // not a power of two
  CHECK_FALSE(mem.allocate(1, "a", 16, GuardedMemory::page_size() * 2));  // beyond a page
  auto huge = mem.allocate(1, "a", UINT64_MAX - 2, 64);                   // overflows
  REQUIRE_FALSE(huge);
  CHECK(huge.error().message.find("overflows") != std::string::npos);
  CHECK(huge.error().code == ExitCode::Software);
  REQUIRE(mem.allocate(1, "a", 0, 64));  // empty buffer: fine
  auto full = mem.allocate(2, "b", 4, 64);
  REQUIRE_FALSE(full);
  CHECK(full.error().message ==
        "kdflow replay: error: guarded allocation of buffer 2 'b' (4 bytes): the registry is full (1 buffers)");
}

TEST_CASE("an overrun by one element faults at once with one line naming kernel, launch, argument, buffer, offset",
          "[cpu][guard]") {
  Child c = run_child([] {
    GuardedMemory mem(4);
    float* out = must(mem.allocate(10, "T_dense", 256 * sizeof(float), 64));
    must(mem.allocate(11, "p0", 1024, 64));
    must(arm_fault_reporter(&mem));
    PreparedLaunch launch(dense_launch());
    CurrentLaunchScope scope(&launch);
    volatile float* v = out;
    for (int i = 0; i <= 256; ++i) v[i] = 1.0f;  // one element too far
  });
  CHECK(c.exit_code == kGuardKernelDefectExit);
  CHECK(c.err ==
        "flow.json:/launches/7: error: guard: kernel 3 'fused_dense' (launch 7) wrote byte 1024 of buffer 10 "
        "'T_dense' (1024 bytes), 0 bytes past its end, through argument 0 'T_dense' (byte 1024 from its pointer): "
        "a defect of the kernel (its static footprint is unknown; this is the dynamic check)\n");
}

TEST_CASE("a read past the end is reported as a read", "[cpu][guard]") {
  Child c = run_child([] {
    GuardedMemory mem(4);
    float* in = must(mem.allocate(11, "p0", 1024, 64));
    must(arm_fault_reporter(&mem));
    PreparedLaunch launch(dense_launch());
    CurrentLaunchScope scope(&launch);
    volatile float* v = in;
    float sum = 0;
    for (int i = 0; i < 260; ++i) sum += v[i];
    std::printf("%f", sum);
  });
  CHECK(c.exit_code == kGuardKernelDefectExit);
#if defined(__x86_64__)
  CHECK(c.err.find(" read byte 1024 of buffer 11 'p0' (1024 bytes), 0 bytes past its end, through argument 1 'p0' ") !=
        std::string::npos);
#endif
}

TEST_CASE("an underrun faults in the guard before the buffer (GuardSide::Start)", "[cpu][guard]") {
  Child c = run_child([] {
    GuardedMemory mem(4);
    float* out = must(mem.allocate(10, "T_dense", 64, 64, GuardSide::Start));
    must(arm_fault_reporter(&mem));
    PreparedLaunch launch(dense_launch());
    CurrentLaunchScope scope(&launch);
    volatile float* v = out;
    for (int i = 15; i >= -1; --i) v[i] = 2.0f;  // one element before the start
  });
  CHECK(c.exit_code == kGuardKernelDefectExit);
  CHECK(c.err.find("kernel 3 'fused_dense' (launch 7) wrote byte -4 of buffer 10 'T_dense' (64 bytes), 4 bytes "
                   "before its start, through argument 0 'T_dense' (byte -4 from its pointer)") != std::string::npos);
}

TEST_CASE("a small underrun with GuardSide::End lands in the poisoned slack and is found after the launch",
          "[cpu][guard]") {
  GuardedMemory mem(2);
  auto p = mem.allocate(10, "T_dense", 1024, 64);  // End: head slack = page - 1024
  REQUIRE(p);
  REQUIRE(mem.buffer(0).head_slack > 0);
  CHECK_FALSE(mem.check_poison());
  static_cast<float*>(*p)[-1] = 3.0f;  // inside the head slack: mapped, no fault
  auto hit = mem.check_poison();
  REQUIRE(hit);
  CHECK(hit->buffer_id == 10);
  CHECK(hit->offset == -4);  // the lowest changed byte: 3.0f is 00 00 40 40 in memory
  PreparedLaunch launch(dense_launch());
  auto loc = mem.locate(static_cast<unsigned char*>(*p) + hit->offset);
  REQUIRE(loc);
  CHECK(loc->in_slack);
  CHECK(launch.describe(mem, *loc, 1) ==
        "flow.json:/launches/7: error: guard: kernel 3 'fused_dense' (launch 7) wrote byte -4 of buffer 10 'T_dense' "
        "(1024 bytes), 4 bytes before its start (in the poisoned slack, found after the launch), through argument 0 "
        "'T_dense' (byte -4 from its pointer): a defect of the kernel (its static footprint is unknown; this is the "
        "dynamic check)");
  CHECK(launch.exit_code_for(*loc) == kGuardKernelDefectExit);
  mem.repoison();
  CHECK_FALSE(mem.check_poison());
}

TEST_CASE("a fault in a worker thread is reported (per-thread launch, alternate stack)", "[cpu][guard]") {
  Child c = run_child([] {
    GuardedMemory mem(4);
    must(mem.allocate(10, "T_dense", 1024, 64));
    float* in = must(mem.allocate(11, "p0", 1024, 64));
    must(arm_fault_reporter(&mem));
    PreparedLaunch launch(dense_launch());
    std::thread worker([&] {
      must(prepare_thread_for_faults());
      set_thread_launch(&launch);
      volatile float* v = in;
      v[256 + 3] = 1.0f;
    });
    worker.join();
  });
  CHECK(c.exit_code == kGuardKernelDefectExit);
  CHECK(c.err.find("kernel 3 'fused_dense' (launch 7) wrote byte 1036 of buffer 11 'p0' (1024 bytes), 12 bytes past "
                   "its end, through argument 1 'p0' (byte 1036 from its pointer)") != std::string::npos);
}

TEST_CASE("threads faulting at once still give one line", "[cpu][guard]") {
  Child c = run_child([] {
    GuardedMemory mem(4);
    float* a = must(mem.allocate(10, "T_dense", 1024, 64));
    float* b = must(mem.allocate(11, "p0", 1024, 64));
    must(arm_fault_reporter(&mem));
    PreparedLaunch launch(dense_launch());
    CurrentLaunchScope scope(&launch);
    std::atomic<int> ready{0};
    auto run = [&](float* p) {
      must(prepare_thread_for_faults());
      ready.fetch_add(1);
      while (ready.load() < 4) {
      }
      volatile float* v = p;
      v[256] = 1.0f;
    };
    std::thread t1(run, a), t2(run, b), t3(run, a), t4(run, b);
    t1.join();
    t2.join();
    t3.join();
    t4.join();
  });
  CHECK(c.exit_code == kGuardKernelDefectExit);
  CHECK(std::count(c.err.begin(), c.err.end(), '\n') == 1);
  CHECK(c.err.find("0 bytes past its end") != std::string::npos);
}

TEST_CASE("a fault through an argument whose exact footprint proved it in bounds is a kdflow bug", "[cpu][guard]") {
  Child c = run_child([] {
    GuardedMemory mem(4);
    float* in = must(mem.allocate(11, "p0", 1024, 64));
    must(arm_fault_reporter(&mem));
    PreparedLaunch launch(dense_launch(LaunchArgument::Footprint::Exact));
    CurrentLaunchScope scope(&launch);
    volatile float* v = in;
    v[256] = 1.0f;
  });
  CHECK(c.exit_code == kGuardKdflowBugExit);
  CHECK(c.err.find("through argument 1 'p0' (byte 1024 from its pointer): this is a kdflow bug, not the kernel's: "
                   "the static footprint [0, 1024) (exact) proved this argument in bounds (please report it)\n") !=
        std::string::npos);
}

TEST_CASE("accesses inside every buffer run without a report", "[cpu][guard]") {
  Child c = run_child([] {
    GuardedMemory mem(4);
    float* a = must(mem.allocate(10, "T_dense", 1000 * sizeof(float), 64));
    float* b = must(mem.allocate(11, "p0", 3 * sizeof(float), 64));
    float* s = must(mem.allocate(12, "start", 17 * sizeof(float), 16, GuardSide::Start));
    must(arm_fault_reporter(&mem));
    PreparedLaunch launch(dense_launch());
    CurrentLaunchScope scope(&launch);
    std::thread worker([&] {
      must(prepare_thread_for_faults());
      for (int i = 0; i < 1000; ++i) a[i] = static_cast<float>(i);
    });
    worker.join();
    for (int i = 0; i < 3; ++i) b[i] = a[i] + a[999 - i];
    for (int i = 0; i < 17; ++i) s[i] = b[i % 3];
    if (mem.check_poison()) _exit(3);
  });
  CHECK(c.exit_code == 0);
  CHECK(c.err.empty());
}

namespace {

/// A write to an unmapped page during a launch, in a child whose block is set by `set_block`.
Child wild_write_in(void (*set_block)()) {
  return run_child([set_block] {
    GuardedMemory mem(1);
    must(mem.allocate(10, "T_dense", 64, 64));
    must(arm_fault_reporter(&mem));
    void* gone = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    munmap(gone, 4096);
    PreparedLaunch launch(dense_launch());
    CurrentLaunchScope scope(&launch);
    set_block();
    *static_cast<volatile int*>(gone) = 1;
  });
}

}  // namespace

TEST_CASE("a fault in a batch of one-thread blocks names the batch's blocks", "[cpu][guard]") {
  // A kernel compiled for batches of blocks (region_fission.h) runs 56 blocks of a row per call:
  // the fault cannot tell which one, so the line names them all.
  Child c = wild_write_in([] { set_thread_block(0, 3, 1, 56, 1); });
  CHECK(c.exit_code == kWildFaultExit);
  CHECK(c.err.find(" in one of blocks (0..55,3,1), outside every replay buffer") != std::string::npos);
  Child one = wild_write_in([] { set_thread_block(2, 3, 1); });
  CHECK(one.err.find(" in block (2,3,1), outside every replay buffer") != std::string::npos);
}

TEST_CASE("a fault outside every buffer during a launch names the kernel (exit 70)", "[cpu][guard]") {
  Child c = run_child([] {
    GuardedMemory mem(1);
    must(mem.allocate(10, "T_dense", 64, 64));
    must(arm_fault_reporter(&mem));
    void* gone = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    munmap(gone, 4096);
    PreparedLaunch launch(dense_launch());
    CurrentLaunchScope scope(&launch);
    *static_cast<volatile int*>(gone) = 1;
  });
  CHECK(c.exit_code == kWildFaultExit);
  CHECK(c.err.rfind("flow.json:/launches/7: error: kernel 3 'fused_dense' (launch 7) faulted (SIGSEGV) at address 0x",
                    0) == 0);
  CHECK(c.err.find("outside every replay buffer and its guard pages") != std::string::npos);
}

namespace {
// Deep recursion on a small thread stack: overflows into the stack's own guard page, where
// only the alternate signal stack lets the handler run.
int deep(volatile int* depth) {
  volatile char pad[1024];
  pad[0] = static_cast<char>(*depth);
  if (*depth < 0) return 0;  // never: keeps the recursion finite to the compiler
  ++*depth;
  return deep(depth) + pad[0];
}
void* overflow_thread(void* arg) {
  must(prepare_thread_for_faults());
  set_thread_launch(static_cast<const PreparedLaunch*>(arg));
  volatile int depth = 0;
  return reinterpret_cast<void*>(static_cast<intptr_t>(deep(&depth)));
}
}  // namespace

TEST_CASE("a stack overflow on a small (fiber-sized) stack still gets its line", "[cpu][guard]") {
  Child c = run_child([] {
    GuardedMemory mem(1);
    must(mem.allocate(10, "T_dense", 64, 64));
    must(arm_fault_reporter(&mem));
    PreparedLaunch launch(dense_launch());
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 64 * 1024);
    pthread_t t;
    pthread_create(&t, &attr, overflow_thread, &launch);
    pthread_join(t, nullptr);
  });
  CHECK(c.exit_code == kWildFaultExit);
  CHECK(c.err.find("kernel 3 'fused_dense' (launch 7) faulted (SIGSEGV)") != std::string::npos);
}

namespace {
void previous_handler(int, siginfo_t*, void*) {
  const char m[] = "previous handler\n";
  (void)!write(2, m, sizeof m - 1);
  _exit(42);
}
}  // namespace

TEST_CASE("faults that are not the reporter's go to the previous handler, or the default action", "[cpu][guard]") {
  auto crash_outside = [] {
    void* gone = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    munmap(gone, 4096);
    *static_cast<volatile int*>(gone) = 1;  // no launch running: an ordinary crash
  };
  Child dfl = run_child([&] {
    signal(SIGSEGV, SIG_DFL);  // (the test framework's own handler is inherited otherwise)
    GuardedMemory mem(1);
    must(mem.allocate(10, "T_dense", 64, 64));
    must(arm_fault_reporter(&mem));
    crash_outside();
  });
  CHECK(dfl.signal == SIGSEGV);
  CHECK(dfl.err.empty());
  Child chained = run_child([&] {
    struct sigaction sa {};
    sa.sa_sigaction = previous_handler;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, nullptr);
    GuardedMemory mem(1);
    must(mem.allocate(10, "T_dense", 64, 64));
    must(arm_fault_reporter(&mem));
    crash_outside();
  });
  CHECK(chained.exit_code == 42);
  CHECK(chained.err == "previous handler\n");
  // Disarmed: the previous handler is back.
  Child disarmed = run_child([&] {
    struct sigaction sa {};
    sa.sa_sigaction = previous_handler;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, nullptr);
    GuardedMemory mem(1);
    float* p = must(mem.allocate(10, "T_dense", 64, 64));
    must(arm_fault_reporter(&mem));
    disarm_fault_reporter();
    static_cast<volatile float*>(p)[16] = 1.0f;  // the guard page, but nobody reports it
  });
  CHECK(disarmed.exit_code == 42);
}

TEST_CASE("launch_argument turns the IR's footprint into proven / unknown", "[cpu][guard]") {
  Arg buf;
  buf.kind = Arg::Kind::Buffer;
  buf.buffer = 5;
  buf.offset = 64;
  LaunchArgument none = launch_argument(0, "p", buf, 1024);
  CHECK(none.buffer_id == 5u);
  CHECK(none.offset == 64);
  CHECK(none.footprint == LaunchArgument::Footprint::Unknown);  // no footprint at all
  Footprint f;
  f.read = std::array<int64_t, 2>{0, 512};
  f.write = std::array<int64_t, 2>{128, 960};
  buf.footprint = f;
  LaunchArgument exact = launch_argument(1, "p", buf, 1024);
  CHECK(exact.footprint == LaunchArgument::Footprint::Exact);
  CHECK(exact.footprint_lo == 0);
  CHECK(exact.footprint_hi == 960);
  buf.footprint->exact = false;
  CHECK(launch_argument(1, "p", buf, 1024).footprint == LaunchArgument::Footprint::Superset);
  buf.footprint->write = std::array<int64_t, 2>{128, 961};  // 64 + 961 > 1024: out of bounds (--allow-oob)
  CHECK(launch_argument(1, "p", buf, 1024).footprint == LaunchArgument::Footprint::Unknown);
  Footprint unknown;
  unknown.unknown = "data-dependent index";
  buf.footprint = unknown;
  CHECK(launch_argument(1, "p", buf, 1024).footprint == LaunchArgument::Footprint::Unknown);
  Arg scalar;
  scalar.kind = Arg::Kind::Int;
  CHECK_FALSE(launch_argument(2, "n", scalar, 0).buffer_id);
}
