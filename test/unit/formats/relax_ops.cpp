// Relax op names from function names (issue 21): matched against the ops the module calls
// (samples/relax_mlp/relax_input.txt) and Relax's registered names, never split at every '_'.
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>

#include "kdflow/formats/relax_ops.h"
#include "test_util.h"

using namespace kdflow;

namespace {
std::vector<std::string> names(const std::vector<RelayOp>& ops) {
  std::vector<std::string> out;
  for (const RelayOp& o : ops) out.push_back(o.name);
  return out;
}
}  // namespace

TEST_CASE("relax ops: the ops relax_input.txt calls, without struct info, VM or memory built-ins", "[relax_ops]") {
  std::ifstream f(test::sample_dir("relax_mlp") + "/relax_input.txt");
  std::stringstream s;
  s << f.rdbuf();
  CHECK(relax_ops_in_text(s.str()) ==
        std::vector<std::string>{"permute_dims", "matmul", "add", "nn.relu", "nn.log_softmax"});
  CHECK(relax_ops_in_text("x = R.call_tir(cls.f, (a,), out_sinfo=R.Tensor((1,), \"float32\"))\n"
                          "R.vm.alloc_storage(R.shape([4]), R.prim_value(0))\nR.output(gv)")
            .empty());
}

TEST_CASE("relax ops: function names decoded to whole op names", "[relax_ops]") {
  std::vector<std::string> known = {"permute_dims", "matmul", "add", "nn.relu", "nn.log_softmax"};
  CHECK(names(decode_relax_name("fused_matmul1_add1_relu1", known)) ==
        std::vector<std::string>{"matmul", "add", "nn.relu"});
  CHECK(names(decode_relax_name("log_softmax", known)) == std::vector<std::string>{"nn.log_softmax"});
  // Without the module's text: Relax's own names.
  // ("cast" is TOPI's name for astype: not a Relax op, so kept as the piece it is.)
  CHECK(names(decode_relax_name("fused_layer_norm2_cast", {})) == std::vector<std::string>{"nn.layer_norm", "cast"});
  CHECK(names(decode_relax_name("fused_conv2d1_add3", {})) == std::vector<std::string>{"nn.conv2d", "add"});
  // Never invented: an unknown piece stays one piece.
  CHECK(names(decode_relax_name("fused_my_custom_op_add", {})) == std::vector<std::string>{"my_custom_op", "add"});
}
