// profile_csv.cpp — the CSV reader's edge cases, the Nsight Compute / Nsight Systems
// layouts, and the join of the forum's ncu export to mlp_v08's graph (read from its golden
// JSON, so this runs without clang).
#include <string>

#include <catch2/catch.hpp>

#include "kdflow/emit/emit.h"
#include "kdflow/ir/dataflow_json.h"
#include "kdflow/formats/profile_csv.h"
#include "test_util.h"

using namespace kdflow;
using kdflow::test::slurp;
using kdflow::test::source_dir;

namespace {

CsvTable csv(const std::string& text) {
  auto t = parse_csv(text, "p.csv");
  if (!t) FAIL(t.error().message);
  return *t;
}

std::string csv_error(const std::string& text) {
  auto t = parse_csv(text, "p.csv");
  REQUIRE_FALSE(t);
  CHECK(t.error().code == ExitCode::DataError);
  CHECK(t.error().message.find('\n') == std::string::npos);
  return t.error().message;
}

std::string profile_error(const std::string& text) {
  auto p = read_profile_csv(text, "p.csv");
  REQUIRE_FALSE(p);
  CHECK(p.error().message.find('\n') == std::string::npos);
  return p.error().message;
}

Dataflow golden(const std::string& model) {
  const std::string path = source_dir() + "/test/golden/" + model + ".json";
  auto df = parse_dataflow_json(slurp(path), path);
  REQUIRE(df);
  return *df;
}

}  // namespace

TEST_CASE("CSV: quoted fields hold commas, doubled quotes and line breaks", "[csv]") {
  CsvTable t = csv("a,b,c\n\"x, y\",\"say \"\"hi\"\"\",\"two\nlines\"\n1,,3\n");
  REQUIRE(t.header.size() == 3);
  REQUIRE(t.rows.size() == 2);
  CHECK(t.rows[0].fields[0].text == "x, y");
  CHECK(t.rows[0].fields[1].text == "say \"hi\"");
  CHECK(t.rows[0].fields[2].text == "two\nlines");
  CHECK(t.rows[1].line == 4);  // the quoted line break counts
  CHECK(t.rows[1].fields[1].text.empty());
  CHECK(t.rows[1].fields[2].col == 4);
  CHECK(t.column("b") == 1);
  CHECK(t.column("nope") == -1);
}

TEST_CASE("CSV: CRLF, a lone CR, a BOM, blank lines, no final line break", "[csv]") {
  CsvTable t = csv("\xEF\xBB\xBF" "a,b\r\n\r\n1,2\r3,\"4\r\n5\"\r\n\n6,7");
  CHECK(t.header[0].text == "a");
  CHECK(t.header[0].col == 4);  // byte columns: the BOM counts
  REQUIRE(t.rows.size() == 3);
  CHECK(t.rows[0].fields[1].text == "2");
  CHECK(t.rows[0].line == 3);
  CHECK(t.rows[1].line == 4);
  CHECK(t.rows[1].fields[1].text == "4\r\n5");
  CHECK(t.rows[2].fields[0].text == "6");
  CHECK(t.rows[2].line == 7);
  // Trailing empty field, and a header-only file.
  CHECK(csv("a,b\n1,\n").rows[0].fields[1].text.empty());
  CHECK(csv("a,b\n").rows.empty());
}

TEST_CASE("CSV: ncu's ==PROF== lines before the header are skipped", "[csv]") {
  CsvTable t = csv("==PROF== Connected to process 1\n==WARNING== something\n\"ID\",\"Kernel Name\"\n\"0\",\"k\"\n");
  CHECK(t.column("Kernel Name") == 1);
  REQUIRE(t.rows.size() == 1);
  CHECK(t.rows[0].line == 4);
}

TEST_CASE("CSV: malformed input names line and column", "[csv]") {
  CHECK(csv_error("a,b\n\"open,1\n") == "p.csv:2:1: error: unterminated quoted field (the quote opened here never closes)");
  CHECK(csv_error("a,b\n\"x\"y,1\n") ==
        "p.csv:2:4: error: unexpected 'y' after a closing quote (expected ',' or a line end)");
  CHECK(csv_error("a,b\nx\"y,1\n") ==
        "p.csv:2:2: error: a '\"' inside an unquoted field (quote the whole field and double the quote)");
  CHECK(csv_error("a,b\n1,2\n1,2,3\n") == "p.csv:3:5: error: this row has 3 fields, the header (line 1) has 2");
  CHECK(csv_error("a,b\n1\n") == "p.csv:2:1: error: this row has 1 fields, the header (line 1) has 2");
  CHECK(csv_error("") == "p.csv:1:1: error: no header row: the file is empty");
  CHECK(csv_error("\n\n") == "p.csv:3:1: error: no header row: the file is empty");
  std::string wide(kMaxCsvColumns + 1, ',');
  CHECK(csv_error(wide).find("more than 4096 fields") != std::string::npos);
}

TEST_CASE("ncu export: rows grouped by launch ID, metrics picked up", "[csv][profile]") {
  const std::string text =
      "\"ID\",\"Kernel Name\",\"Block Size\",\"Grid Size\",\"Metric Name\",\"Metric Unit\",\"Metric Value\"\r\n"
      "\"0\",\"k_a\",\"(64, 1, 1)\",\"(10, 1, 1)\",\"Duration\",\"usecond\",\"1,234.5\"\r\n"
      "\"0\",\"k_a\",\"(64, 1, 1)\",\"(10, 1, 1)\",\"Dynamic Shared Memory Per Block\",\"Kbyte/block\",\"2\"\r\n"
      "\"1\",\"void k_b(float*)\",\"(32,1,1)\",\"(1,2,3)\",\"Registers Per Thread\",\"register/thread\",\"n/a\"\r\n";
  auto p = read_profile_csv(text, "p.csv");
  REQUIRE(p);
  CHECK(p->tool == ProfileTool::NsightCompute);
  CHECK(p->rows == 3);
  REQUIRE(p->launches.size() == 2);
  const ProfiledLaunch& a = p->launches[0];
  CHECK(a.id == "0");
  CHECK(a.rows == 2);
  CHECK(a.line == 2);
  CHECK(*a.block == std::array<int64_t, 3>{64, 1, 1});
  CHECK(*a.grid == std::array<int64_t, 3>{10, 1, 1});
  CHECK(*a.duration_ns == Approx(1234500.0));
  CHECK(*a.dynamic_shared_memory == 2000);
  CHECK(p->launches[1].name == "void k_b(float*)");
  CHECK(*p->launches[1].grid == std::array<int64_t, 3>{1, 2, 3});
  CHECK_FALSE(p->launches[1].duration_ns);
}

TEST_CASE("ncu export errors name the field", "[csv][profile]") {
  CHECK(profile_error("a,b\n1,2\n") ==
        "p.csv:1:1: error: no 'Kernel Name' column (Nsight Compute) and no 'Name' column (Nsight Systems): is this an "
        "ncu --csv or nsys stats --format csv export?");
  CHECK(profile_error("ID,Kernel Name,Block Size\n0,k,\"(64, 1)\"\n") ==
        "p.csv:2:5: error: 'Block Size' is not \"(x, y, z)\": \"(64, 1)\"");
  CHECK(profile_error("ID,Kernel Name,Grid Size\n0,k,\"(-1, 1, 1)\"\n").find("p.csv:2:5:") == 0);
  CHECK(profile_error("ID,Kernel Name\n0,k\n1,j\n0,j\n") ==
        "p.csv:4:3: error: launch ID 0 is 'j' here but 'k' on line 2");
  CHECK(profile_error("ID,Kernel Name\n0,\n") == "p.csv:2:3: error: empty kernel name");
  // ncu --page raw: a units row under the header is skipped.
  auto raw = read_profile_csv("ID,Kernel Name,Grid Size\n,,\n0,k,\"(1, 1, 1)\"\n", "p.csv");
  REQUIRE(raw);
  CHECK(raw->skipped_rows == 1);
  CHECK(raw->launches.size() == 1);
}

TEST_CASE("nsys export: one row per launch, memcpy rows skipped, Instances expanded", "[csv][profile]") {
  const std::string trace =
      "Start (ns),Duration (ns),CorrId,GrdX,GrdY,GrdZ,BlkX,BlkY,BlkZ,Name\n"
      "100,2048,1,,,,,,,[CUDA memcpy Host-to-Device]\n"
      "200,512,2,10,1,1,64,1,1,k_a\n"
      "300,256,3,1,1,1,32,1,1,k_b\n";
  auto p = read_profile_csv(trace, "t.csv");
  REQUIRE(p);
  CHECK(p->tool == ProfileTool::NsightSystems);
  CHECK(p->skipped_rows == 1);
  REQUIRE(p->launches.size() == 2);
  CHECK(p->launches[0].name == "k_a");
  CHECK(p->launches[0].id.empty());
  CHECK(*p->launches[0].grid == std::array<int64_t, 3>{10, 1, 1});
  CHECK(*p->launches[0].block == std::array<int64_t, 3>{64, 1, 1});
  CHECK(*p->launches[0].duration_ns == Approx(512.0));
  CHECK(profile_error("GrdX,GrdY,GrdZ,Name\n1,x,1,k\n") == "p.csv:2:3: error: 'GrdY' is not a count: \"x\"");

  auto sum = read_profile_csv("Time (%),Instances,Name\n90.0,3,k_a\n10.0,1,k_b\n", "s.csv");
  REQUIRE(sum);
  REQUIRE(sum->launches.size() == 4);
  CHECK(sum->launches[2].name == "k_a");
  CHECK(sum->launches[3].name == "k_b");
  CHECK(profile_error("Instances,Name\n0,k\n") == "p.csv:2:1: error: 'Instances' is not a count from 1 to 1000000: \"0\"");
  CHECK(profile_error("Instances,Name\n999999,k\n2,k\n") == "p.csv:3:3: error: more than 1000000 kernel launches");
}

TEST_CASE("TVM's two kernel naming schemes map onto each other", "[profile]") {
  CHECK(other_tvm_kernel_name("f_kernel0") == "f_kernel");
  CHECK(other_tvm_kernel_name("f_kernel") == "f_kernel0");
  CHECK(other_tvm_kernel_name("f_kernel1") == "f_kernel_1");
  CHECK(other_tvm_kernel_name("f_kernel_12") == "f_kernel12");
  CHECK(other_tvm_kernel_name("f_kernel_x") == "");
  CHECK(other_tvm_kernel_name("f_kernel01") == "");
  CHECK(other_tvm_kernel_name("something") == "");
}

TEST_CASE("the forum's ncu export joins to mlp_v08: every row has its node, block sizes differ", "[profile]") {
  const std::string path = source_dir() + "/test/fixtures/ncu_forum_export.csv";
  auto p = read_profile_csv(slurp(path), path);
  REQUIRE(p);
  REQUIRE(p->launches.size() == 6);
  const Dataflow df = golden("mlp_v08");
  const ProfileJoin j = join_profile(df, *p);
  REQUIRE(j.matches.size() == 6);
  CHECK(j.missing.empty());
  CHECK(j.unknown.empty());
  CHECK(j.runs == 1);
  const int nodes[] = {3, 6, 9, 12, 13, 13};
  const char* blocks[] = {"(20,1,1)", "(20,1,1)", "(50,1,1)", "(250,1,1)"};
  for (int i = 0; i < 6; ++i) {
    INFO("launch " << i);
    const ProfileMatch& m = j.matches[i];
    CHECK(m.kernel == i);
    CHECK(df.kernels[m.kernel].node == nodes[i]);
    CHECK(m.run == 0);
    if (i < 4) {
      REQUIRE(m.mismatches.size() == 1);
      CHECK(m.mismatches[0].what == "block");
      CHECK(m.mismatches[0].profiled == blocks[i]);
      CHECK(m.mismatches[0].graph == "(64,1,1)");
    } else {
      CHECK(m.mismatches.empty());  // log_softmax: (1,1,1) x (32,1,1), 0 bytes of shared memory
    }
  }
}

TEST_CASE("the join: repeated runs, kernels missing, unknown kernels, the other naming scheme", "[profile]") {
  const Dataflow df = golden("mlp");  // TVM 0.14 names: ..._kernel, ..._kernel_1
  Profile p;
  auto launch = [&](const std::string& name, unsigned line) {
    ProfiledLaunch l;
    l.name = name;
    l.line = line;
    p.launches.push_back(l);
  };
  launch("tvmgen_default_fused_nn_log_softmax_kernel", 2);
  launch("tvmgen_default_fused_nn_log_softmax_kernel_1", 3);
  launch("tvmgen_default_fused_nn_log_softmax_kernel", 4);
  launch("void tvmgen_default_fused_nn_log_softmax_kernel_1(float*, float*, float*)", 5);
  launch("tvmgen_default_fused_nn_dense_add_kernel0", 6);
  launch("some_other_kernel", 7);
  launch("some_other_kernel", 8);
  const ProfileJoin j = join_profile(df, p);
  REQUIRE(j.matches.size() == 7);
  CHECK(j.matches[0].kernel == 4);
  CHECK(j.matches[1].kernel == 5);
  CHECK(j.matches[2].kernel == 4);
  CHECK(j.matches[2].run == 1);
  CHECK(j.matches[3].kernel == 5);  // "void name(args)" matches by its base name
  CHECK(j.matches[3].run == 1);
  // Another TVM's name for this model's kernel joins it, the name reported as a difference.
  CHECK(j.matches[4].kernel == 3);
  REQUIRE(j.matches[4].mismatches.size() == 1);
  CHECK(j.matches[4].mismatches[0].what == "name");
  CHECK(j.matches[5].kernel == -1);
  CHECK(j.runs == 2);
  CHECK(j.missing == std::vector<int>{0, 1, 2});
  REQUIRE(j.unknown.size() == 1);
  CHECK(j.unknown[0].name == "some_other_kernel");
  CHECK(j.unknown[0].launches == 2);
  CHECK(j.unknown[0].first_line == 7);
  CHECK(j.unknown[0].other_scheme_kernel == -1);
}

// Hand-written, one construct each: what `ncu --csv ./app > out.csv` puts around the CSV (the
// program's own lines before the header, ncu's == lines before and between rows). A real
// export of that shape is test/fixtures/ncu_h200_ffi_mlp_compiled.csv (test/pipeline/show.cpp).
TEST_CASE("Nsight exports: the program's output before the header and ncu's lines between rows are skipped",
          "[csv][profile]") {
  const std::string rows =
      "\"ID\",\"Kernel Name\",\"Metric Name\",\"Metric Unit\",\"Metric Value\"\n"
      "\"0\",\"k0\",\"gpu__time_duration.sum\",\"ns\",\"3,680\"\n"
      "==WARNING== a message between rows\n"
      "\"1\",\"k1\",\"gpu__time_duration.sum\",\"ns\",\"4,832\"\n";
  auto p = read_profile_csv("==PROF== Connected to process 975\n"
                            "kernel times in us (median and min of 1 runs), grouped by graph node\n"
                            "timing: \"quoted, with a comma\n"
                            "==PROF== Disconnected from process 975\n" + rows,
                            "p.csv");
  REQUIRE(p);
  CHECK(p->tool == ProfileTool::NsightCompute);
  REQUIRE(p->launches.size() == 2);
  CHECK(p->launches[0].name == "k0");
  CHECK(p->launches[1].duration_ns == Approx(4832));
  CHECK(p->launches[1].line == 8);  // lines keep counting from the top of the file
  // Without a line naming a kernel column the first line is the header, and the error says so.
  CHECK(profile_error("some output, of a program\n1,2\n").find("no 'Kernel Name' column") != std::string::npos);
  // parse_csv itself (the cost dataset's reader) skips only == lines.
  CHECK(csv("a,b\n==PROF== x\n1,2\n").rows.size() == 1);
}
