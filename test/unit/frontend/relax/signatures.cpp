// TVM's function signatures in tvm-ffi host C (lib/frontend/relax/signatures.cpp), on
// hand-written strings of the form TVM 0.26 prints (labelled: not a real host.c; the real
// ones are checked through ffi_batch_mlp in test/pipeline/ffi.cpp).
#include <catch2/catch.hpp>

#include "frontend/relax/signatures.h"

using namespace kdflow::detail;

TEST_CASE("signatures: parameters, symbolic and literal dimensions, T.int64 casts dropped", "[signatures]") {
  const std::string host =
      R"x(  const char* parts[6] = {"Expected ", "4", " when calling:\n  `", )x"
      R"x("f(x: Tensor([n, T.int64(100)], float32), w: Tensor([T.int64(100), m * T.int64(2)], float16), k: T.int64)")x"
      R"x(, "`"};)x";
  auto sig = find_signature(host, "f");
  REQUIRE(sig);
  REQUIRE(sig->size() == 3);
  CHECK((*sig)[0].name == "x");
  CHECK((*sig)[0].tensor);
  CHECK((*sig)[0].dims == std::vector<std::string>{"n", "100"});
  CHECK((*sig)[0].dtype == "float32");
  CHECK((*sig)[1].dims == std::vector<std::string>{"100", "m * 2"});
  CHECK((*sig)[1].dtype == "float16");
  CHECK_FALSE((*sig)[2].tensor);
  CHECK(is_literal_dim("100"));
  CHECK_FALSE(is_literal_dim("n"));
  CHECK_FALSE(is_literal_dim("m * 2"));
  // Not there, or not a signature: nothing.
  CHECK_FALSE(find_signature(host, "g"));
  CHECK_FALSE(find_signature(R"x("f(x Tensor)")x", "f"));                // a parameter without a type
  CHECK_FALSE(find_signature(R"x("f(x: Tensor([n], float32)")x", "f"));   // no closing parenthesis
}

TEST_CASE("signatures: a call's dimension names, where the call agrees with the signature", "[signatures]") {
  auto sig = find_signature(
      "\"f(lv3: Tensor([n, T.int64(400)], float32), w: Tensor([T.int64(400), T.int64(1000)], float32), "
      "out: Tensor([n, T.int64(1000)], float32))\"",
      "f");
  REQUIRE(sig);
  auto names = call_dimension_names(*sig, {{8, 400}, {400, 1000}, {8, 1000}});
  REQUIRE(names);
  CHECK(*names == std::vector<std::vector<std::string>>{{"n", ""}, {"", ""}, {"n", ""}});
  CHECK_FALSE(call_dimension_names(*sig, {{8, 400}, {400, 1000}, {3, 1000}}));  // n is 8 and 3
  CHECK_FALSE(call_dimension_names(*sig, {{8, 401}, {400, 1000}, {8, 1000}}));  // a literal differs
  CHECK_FALSE(call_dimension_names(*sig, {{8, 400}, {400, 1000}}));             // another arity
  CHECK_FALSE(call_dimension_names(*sig, {{8, 400}, {400, 1000}, {8}}));        // another rank
}

TEST_CASE("signatures: the one-pass index finds what a search of host.c finds", "[signatures]") {
  // Hand-written text (not a real host.c): names that are prefixes of others, a quote that
  // closes a literal before a call, a name with '(' and one longer than the index keeps.
  const std::string long_name(600, 'a');
  const std::string host = R"x(x = "ab"; f("abc(q: T.int64)"); "ab(p: T.int64)"; "ab(r: T.int64)"; ")x" + long_name +
                           R"x((s: T.int64)"; "g(h(t: T.int64)"; "" (u: T.int64)"; "(v: T.int64)";)x";
  const SignatureIndex index(host);
  for (const std::string& f : {std::string("ab"), std::string("abc"), std::string("a"), std::string("b"),
                               std::string(""), std::string("g(h"), std::string("\" "), long_name, std::string("zz")}) {
    INFO(f);
    CHECK(index.find(f) == host.find("\"" + f + "("));
    auto a = find_signature(host, f), b = find_signature(host, f, &index);
    REQUIRE(a.has_value() == b.has_value());
    if (a) {
      REQUIRE(a->size() == b->size());
      for (size_t i = 0; i < a->size(); ++i) CHECK((*a)[i].name == (*b)[i].name);
    }
  }
  CHECK(find_signature(host, "ab", &index)->at(0).name == "p");
  CHECK(find_signature(host, long_name, &index)->at(0).name == "s");
}
