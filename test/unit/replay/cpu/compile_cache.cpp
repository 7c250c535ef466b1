// The CPU back end's compile cache (lib/replay/cpu/compile_cache.h, jit.cpp): the store itself
// (verification, atomic replacement, concurrent writers, the size cap), the JIT loading a
// module from it, and `kdflow replay --backend cpu` across runs: a second run loads what the
// first compiled and its outputs still match, a corrupt or truncated entry is compiled again
// and replaced, --no-cache writes nothing, two replays at once leave a valid entry.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cpu_test_util.h"
#include "replay/cpu/compile_cache.h"
#include "test_util.h"

namespace fs = std::filesystem;
using kdflow::cpu::CacheKey;
using kdflow::cpu::CompileCache;
using kdflow::test::run_kdflow;

namespace {

/// The .kdfc entries in `dir`, sorted.
std::vector<std::string> entries(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->path().extension() == ".kdfc") out.push_back(it->path().string());
  std::sort(out.begin(), out.end());
  return out;
}

size_t files_in(const std::string& dir) {
  size_t n = 0;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) n += it->is_regular_file();
  return n;
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << bytes;
}

/// KDFLOW_CACHE_DIR set for the scope (the kdflow children inherit it), then as it was.
struct CacheDirEnv {
  explicit CacheDirEnv(const std::string& dir) {
    if (const char* was = std::getenv("KDFLOW_CACHE_DIR")) before = was, had = true;
    ::setenv("KDFLOW_CACHE_DIR", dir.c_str(), 1);
  }
  ~CacheDirEnv() {
    if (had) ::setenv("KDFLOW_CACHE_DIR", before.c_str(), 1);
    else ::unsetenv("KDFLOW_CACHE_DIR");
  }
  std::string before;
  bool had = false;
};

std::string sample(const std::string& name) {
  std::string d = kdflow::test::sample_dir(name);
  if (fs::exists(fs::path(d) / "params.bin") || fs::exists(fs::path(d) / "vm_exec.bin")) return d;
  return kdflow::test::shared_sample_dir(name);
}

/// One replay of `dir` on the CPU, outputs to `out`; the result, checked to match its reference.
kdflow::test::RunResult replay(const std::string& dir, const std::string& out, std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {"replay", dir, "--backend", "cpu", "--warmup", "0", "--repeat", "1",
                                   "--output-dir", out};
  args.insert(args.end(), extra.begin(), extra.end());
  auto r = run_kdflow(args);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(std::regex_search(r.out, std::regex(R"(output_0\.npy\s+\S+\s+\S+\s+0/\d+\s+ok)")));
  return r;
}

bool hit(const kdflow::test::RunResult& r) { return r.err.find("loaded from the compile cache (key ") != std::string::npos; }
bool compiled(const kdflow::test::RunResult& r) { return r.err.find("compiled for the host in") != std::string::npos; }

const char* kKernel = R"(
extern "C" __global__ void twice(float* out, const float* in, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = 2.0f * in[i];
}
)";

}  // namespace

TEST_CASE("compile cache: an entry reads back only for its own key and only intact", "[cpu][cache]") {
  std::string dir = kdflow::test::temp_dir() + "/cache";
  CompileCache cache(dir, 1 << 20);
  REQUIRE(cache.usable());
  CacheKey key, other;
  key.add("source", "a").add("tiles", "");
  other.add("source", "a").add("tiles", "k:2x1,");
  CHECK(key.hex() != other.hex());
  // Fields are length-prefixed: moving bytes from one field to the next is another key.
  CHECK(CacheKey().add("a", "xy").add("b", "").hex() != CacheKey().add("a", "x").add("b", "y").hex());
  // kdflow's part of the key: its version and this executable's GNU build id (Debian's
  // toolchain always writes one).
  const std::string build = kdflow::cpu::kdflow_build_id();
  INFO(build);
  CHECK(build.rfind("kdflow ", 0) == 0);
  CHECK(build.find(" build-id ") != std::string::npos);
  std::string why;
  CHECK(!cache.get(key, &why));
  CHECK(why.empty());  // a plain miss
  REQUIRE(cache.put(key, "payload bytes") == "");
  auto got = cache.get(key, &why);
  REQUIRE(got);
  CHECK(*got == "payload bytes");
  CHECK(!cache.get(other, &why));

  const std::string file = cache.path(key);
  const std::string good = kdflow::test::slurp(file);
  SECTION("a changed byte of the payload") {
    std::string bad = good;
    bad.back() ^= 1;
    write_file(file, bad);
    CHECK(!cache.get(key, &why));
    CHECK(why.find("checksum") != std::string::npos);
  }
  SECTION("a truncated entry") {
    write_file(file, good.substr(0, good.size() - 3));
    CHECK(!cache.get(key, &why));
    CHECK(why.find("truncated") != std::string::npos);
    write_file(file, good.substr(0, 20));
    CHECK(!cache.get(key, &why));
    CHECK(why.find("truncated") != std::string::npos);
    write_file(file, "");
    CHECK(!cache.get(key, &why));
  }
  SECTION("another key's entry under this key's name") {
    REQUIRE(cache.put(other, "payload bytes") == "");
    fs::copy_file(cache.path(other), file, fs::copy_options::overwrite_existing);
    CHECK(!cache.get(key, &why));
    CHECK(why.find("another key") != std::string::npos);
  }
  SECTION("not an entry at all") {
    write_file(file, std::string(200, 'x'));
    CHECK(!cache.get(key, &why));
    CHECK(why.find("not a kdflow cache entry") != std::string::npos);
  }
  SECTION("replaced by a put") {
    write_file(file, "garbage");
    REQUIRE(cache.put(key, "new payload") == "");
    got = cache.get(key, &why);
    REQUIRE(got);
    CHECK(*got == "new payload");
  }
}

TEST_CASE("compile cache: concurrent writers of one key leave one valid entry and no temporary file", "[cpu][cache]") {
  std::string dir = kdflow::test::temp_dir();
  CacheKey key;
  key.add("source", "shared");
  std::vector<std::thread> writers;
  for (int t = 0; t < 8; ++t)
    writers.emplace_back([&, t] {
      CompileCache cache(dir, 64 << 20);
      // Large enough that writes interleave; each writer's payload is its own.
      std::string payload(2 << 20, static_cast<char>('a' + t));
      for (int i = 0; i < 5; ++i) cache.put(key, payload);
    });
  // Meanwhile a reader sees a whole payload of one writer, or nothing: never a torn one.
  CompileCache reader(dir, 64 << 20);
  int seen = 0;
  for (int i = 0; i < 200; ++i) {
    std::string why;
    if (auto p = reader.get(key, &why)) {
      ++seen;
      CHECK(p->size() == size_t{2 << 20});
      CHECK(p->find_first_not_of(p->front()) == std::string::npos);
    } else {
      CHECK(why.empty());
    }
  }
  for (std::thread& w : writers) w.join();
  std::string why;
  auto p = reader.get(key, &why);
  REQUIRE(p);
  CHECK(p->size() == size_t{2 << 20});
  CHECK(files_in(dir) == 1);
  INFO("reads that found an entry while writers ran: " << seen);
}

TEST_CASE("compile cache: the folder is trimmed to its cap, least recently used first", "[cpu][cache]") {
  std::string dir = kdflow::test::temp_dir();
  const std::string payload(1000, 'p');
  CompileCache cache(dir, 3500);  // three entries of ~1088 bytes fit, four do not
  std::vector<CacheKey> keys(5);
  for (int i = 0; i < 5; ++i) keys[i].add("n", std::to_string(i));
  for (int i = 0; i < 3; ++i) {
    REQUIRE(cache.put(keys[i], payload) == "");
    ::usleep(20000);  // distinct modification times
  }
  std::string why;
  REQUIRE(cache.get(keys[0], &why));  // used: 1 is now the least recently used
  ::usleep(20000);
  REQUIRE(cache.put(keys[3], payload) == "");
  CHECK(cache.get(keys[0], &why));
  CHECK(!cache.get(keys[1], &why));
  CHECK(cache.get(keys[2], &why));
  CHECK(cache.get(keys[3], &why));
  CHECK(entries(dir).size() == 3);
  // An entry larger than the cap is not stored (and evicts nothing).
  CompileCache tiny(dir, 500);
  CHECK(tiny.put(keys[4], payload).find("larger than the cache's cap") != std::string::npos);
  CHECK(entries(dir).size() == 3);
}

TEST_CASE("compile cache: a folder others may write is not used", "[cpu][cache]") {
  std::string dir = kdflow::test::temp_dir();
  REQUIRE(::chmod(dir.c_str(), 0777) == 0);
  CompileCache cache(dir, 1 << 20);
  CHECK(!cache.usable());
  CHECK(cache.why().find("other users") != std::string::npos);
  CacheKey key;
  key.add("k", "v");
  CHECK(cache.put(key, "x") != "");
  CHECK(files_in(dir) == 0);
}

TEST_CASE("compile cache: a second device loads the module from the cache, other tiles or blocks are another entry",
          "[cpu][cache]") {
  std::string dir = kdflow::test::temp_dir();
  kdflow::cpu::CpuDeviceOptions o;
  o.threads = 2;
  o.cache_dir = dir;
  auto run = [&](const std::map<std::string, kdflow::cpu::BlockTile>& tiles, bool expect_hit,
                 const std::map<std::string, kdflow::cpu::BlockShape>& blocks = {}) {
    auto d = kdflow::cpu::CpuDevice::create(o);
    REQUIRE(d);
    auto m = (*d)->compile_module(kKernel, "hand.cu", {}, tiles, blocks);
    INFO((m ? std::string() : m.error().message));
    REQUIRE(m);
    kdflow::cpu::CpuModuleOrigin origin = (*d)->origin(*m);
    INFO(origin.note);
    CHECK(origin.note.empty());
    CHECK(origin.from_cache == expect_hit);
    CHECK(origin.stored == !expect_hit);
    CHECK(origin.key.size() == 64);
    auto k = (*d)->kernel(*m, "twice");
    REQUIRE(k);
    CHECK(k->plain_loop);  // no barrier: one loop over the block's threads, also as loaded
    CHECK(k->block_loop);
    std::vector<float> in(100), out(100, 0.f);
    for (int i = 0; i < 100; ++i) in[i] = static_cast<float>(i);
    float* po = out.data();
    const float* pi = in.data();
    int n = 100;
    void* args[] = {&po, &pi, &n};
    auto b = blocks.find("twice");
    const std::array<uint32_t, 3> block = b == blocks.end() ? std::array<uint32_t, 3>{32, 1, 1} : b->second;
    REQUIRE((*d)->launch(*k, {(100 + block[0] - 1) / block[0], 1, 1}, block, 0, args));
    for (int i = 0; i < 100; ++i) CHECK(out[i] == 2.0f * i);
    return origin.key;
  };
  std::string first = run({}, false);
  CHECK(entries(dir).size() == 1);
  CHECK(run({}, true) == first);
  // A different compile option (a batch tile, here for a kernel the module does not have, so
  // that the code is the same) is a different entry.
  CHECK(run({{"not_a_kernel_here", {2, 1}}}, false) != first);
  CHECK(entries(dir).size() == 2);
  // The block shape a kernel is compiled for is part of the key.
  const std::string shaped = run({}, false, {{"twice", {32, 1, 1}}});
  CHECK(shaped != first);
  CHECK(run({}, true, {{"twice", {32, 1, 1}}}) == shaped);
  CHECK(run({}, false, {{"twice", {16, 2, 1}}}) != shaped);
  CHECK(entries(dir).size() == 4);
  // Without a folder, no cache at all.
  auto d = kdflow::cpu::CpuDevice::create({2});
  REQUIRE(d);
  auto m = (*d)->compile_module(kKernel, "hand.cu");
  REQUIRE(m);
  CHECK((*d)->origin(*m).key.empty());
  CHECK(!(*d)->origin(*m).from_cache);
}

TEST_CASE("replay --backend cpu: a second run loads every module from the compile cache and still matches",
          "[cpu][cache][cpu-replay]") {
  for (const char* name : {"mlp", "relax_mlp"}) {
    std::string dir = sample(name);
    if (dir.empty()) {
      WARN("skipped: " << name << "'s params are only in ../shared/samples");
      continue;
    }
    std::string cache = kdflow::test::temp_dir() + "/cache";
    CacheDirEnv env(cache);
    std::string out = kdflow::test::temp_dir();
    auto cold = replay(dir, out + "/cold");
    INFO(cold.err);
    CHECK(compiled(cold));
    CHECK(!hit(cold));
    const size_t modules = entries(cache).size();
    CHECK(modules >= 1);
    auto warm = replay(dir, out + "/warm");
    INFO(warm.err);
    CHECK(hit(warm));
    CHECK(!compiled(warm));
    CHECK(entries(cache).size() == modules);
    // The same bytes out, and the same account of how each kernel runs.
    for (const auto& f : fs::directory_iterator(out + "/cold"))
      CHECK(kdflow::test::slurp(f.path().string()) ==
            kdflow::test::slurp(out + "/warm/" + f.path().filename().string()));
    std::regex way(R"(replay: cpu: kernel \S+ runs[^\n]*)");
    auto ways = [&](const std::string& err) {
      std::string all;
      for (std::sregex_iterator it(err.begin(), err.end(), way), end; it != end; ++it) all += it->str() + "\n";
      return all;
    };
    CHECK(ways(cold.err) == ways(warm.err));
  }
}

TEST_CASE("replay --backend cpu: a corrupt or truncated cache entry is compiled again and replaced",
          "[cpu][cache][cpu-replay]") {
  std::string dir = sample("mlp_fp16");  // ships its params: runs on a bare clone
  std::string cache = kdflow::test::temp_dir() + "/cache";
  CacheDirEnv env(cache);
  std::string out = kdflow::test::temp_dir();
  replay(dir, out + "/0");
  auto files = entries(cache);
  REQUIRE(files.size() == 1);
  const std::string good = kdflow::test::slurp(files[0]);
  struct Damage {
    const char* what;
    std::string bytes;
    const char* says;
  };
  std::string flipped = good;
  flipped[flipped.size() / 2] ^= 0x40;  // inside the object code
  std::vector<Damage> damages = {{"a flipped byte", flipped, "checksum does not match"},
                                 {"truncated", good.substr(0, good.size() / 2), "truncated"},
                                 {"empty", "", "truncated"},
                                 {"garbage", std::string(4096, '\xff'), "not a kdflow cache entry"}};
  int i = 0;
  for (const Damage& d : damages) {
    INFO(d.what);
    write_file(files[0], d.bytes);
    auto r = replay(dir, out + "/" + std::to_string(++i));
    INFO(r.err);
    CHECK(compiled(r));
    CHECK(r.err.find("cache entry ignored, compiled again and replaced") != std::string::npos);
    CHECK(r.err.find(d.says) != std::string::npos);
    // Replaced by a whole entry (not byte-equal to the first: region fission's rewrite orders
    // some declarations by address, so two compiles may differ), which the next run loads.
    const std::string now = kdflow::test::slurp(files[0]);
    CHECK(now.size() > 1000);
    CHECK(now != d.bytes);
    CHECK(now.compare(0, 8, "KDFLOWCC") == 0);
    CHECK(hit(replay(dir, out + "/" + std::to_string(++i))));
  }
}

TEST_CASE("replay --backend cpu --no-cache neither writes nor reads the compile cache", "[cpu][cache][cpu-replay]") {
  std::string dir = sample("mlp_fp16");  // ships its params: runs on a bare clone
  std::string cache = kdflow::test::temp_dir() + "/cache";
  CacheDirEnv env(cache);
  std::string out = kdflow::test::temp_dir();
  auto r = replay(dir, out + "/0", {"--no-cache"});
  CHECK(compiled(r));
  CHECK(!fs::exists(cache));
  replay(dir, out + "/1");  // fills it
  REQUIRE(entries(cache).size() == 1);
  const std::string before = kdflow::test::slurp(entries(cache)[0]);
  struct stat st0 {};
  REQUIRE(::stat(entries(cache)[0].c_str(), &st0) == 0);
  ::usleep(20000);
  r = replay(dir, out + "/2", {"--no-cache"});
  CHECK(compiled(r));
  CHECK(!hit(r));
  struct stat st1 {};
  REQUIRE(::stat(entries(cache)[0].c_str(), &st1) == 0);
  CHECK(st1.st_mtim.tv_sec == st0.st_mtim.tv_sec);  // not even touched
  CHECK(st1.st_mtim.tv_nsec == st0.st_mtim.tv_nsec);
  CHECK(files_in(cache) == 1);
}

TEST_CASE("replay --backend cpu: two replays at once into one empty cache leave a valid entry",
          "[cpu][cache][cpu-replay]") {
  std::string dir = sample("mlp_fp16");  // ships its params: runs on a bare clone
  std::string cache = kdflow::test::temp_dir() + "/cache";
  std::string out = kdflow::test::temp_dir();
  std::string cmd;
  for (int i = 0; i < 3; ++i)
    cmd += fmt::format("KDFLOW_CACHE_DIR='{}' '{}' replay '{}' --backend cpu --warmup 0 --repeat 1 -q "
                       "--output-dir '{}/{}' >/dev/null 2>'{}/err{}' & ",
                       cache, KDFLOW_BINARY, dir, out, i, out, i);
  cmd += "wait";
  REQUIRE(std::system(cmd.c_str()) == 0);
  CHECK(entries(cache).size() == 1);
  CHECK(files_in(cache) == 1);  // no temporary file left
  CacheDirEnv env(cache);
  CHECK(hit(replay(dir, out + "/after")));
}
