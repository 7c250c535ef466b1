// session.cpp — a session of a language model as kdflow states it (relax_vm.h RelaxSession):
// the short form prefill:N,decode:M[,...] or a session file (docs/schema.md "Sessions"), each
// forward labelled, prefills longer than prefill_chunk_size split into chunks. Pure parsing:
// run_relax_session (relax_vm.cpp) runs the steps.
#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>

#include "formats/json_read.h"  // detail::quote_input, parse_json_text
#include "kdflow/frontend/relax_vm.h"
#include "kdflow/support/io.h"

namespace kdflow {

namespace {

/// Labels the forwards of a session (RelaxSessionStep::label): "prefill", "prefill chunk K",
/// "decode K"; prefixed "seq S " when the session has several sequences (added or forked);
/// "fork_sequence S" and "popn S" for those steps.
void label_steps(RelaxSession& s) {
  std::set<int64_t> seqs;
  for (const RelaxSessionStep& st : s.steps)
    if (st.kind == RelaxSessionStep::Kind::AddSequence || st.kind == RelaxSessionStep::Kind::ForkSequence)
      seqs.insert(st.seq);
  std::map<int64_t, int64_t> decodes, prefills;
  int64_t batch_decodes = 0;
  std::map<int64_t, int64_t> chunks_left;  // consecutive prefill chunks of a sequence
  for (size_t i = 0; i < s.steps.size(); ++i) {
    RelaxSessionStep& st = s.steps[i];
    const std::string who = seqs.size() > 1 ? fmt::format("seq {} ", st.seq) : "";
    if (st.kind == RelaxSessionStep::Kind::Decode) st.label = fmt::format("{}decode {}", who, decodes[st.seq]++);
    if (st.kind == RelaxSessionStep::Kind::BatchDecode) st.label = fmt::format("batch decode {}", batch_decodes++);
    if (st.kind == RelaxSessionStep::Kind::ForkSequence) st.label = fmt::format("fork_sequence {}", st.seq);
    if (st.kind == RelaxSessionStep::Kind::PopN) st.label = fmt::format("popn {}", st.seq);
    if (st.kind == RelaxSessionStep::Kind::EnableSlidingWindow) st.label = fmt::format("enable_sliding_window {}", st.seq);
    if (st.kind != RelaxSessionStep::Kind::Prefill) continue;
    const int64_t k = prefills[st.seq]++;
    st.label = who + (k == 0 ? std::string("prefill") : fmt::format("prefill {}", k));
  }
}

/// Splits each prefill longer than prefill_chunk_size into chunks, as MLC's engine does.
void chunk_prefills(RelaxSession& s) {
  if (s.prefill_chunk_size <= 0) return;
  std::vector<RelaxSessionStep> out;
  for (const RelaxSessionStep& st : s.steps) {
    if (st.kind != RelaxSessionStep::Kind::Prefill || st.tokens <= s.prefill_chunk_size) {
      out.push_back(st);
      continue;
    }
    int64_t k = 0;
    for (int64_t done = 0; done < st.tokens; done += s.prefill_chunk_size, ++k) {
      RelaxSessionStep c = st;
      c.tokens = std::min(s.prefill_chunk_size, st.tokens - done);
      c.label = fmt::format("{} chunk {}", st.label, k);
      out.push_back(c);
    }
  }
  s.steps = std::move(out);
}

Expected<RelaxSession> parse_session_file(const std::string& path) {
  using detail::json;
  Expected<std::string> text = read_file(path, 16ull << 20);
  if (!text) return text.error();
  Expected<json> doc = detail::parse_json_text(*text, path);
  if (!doc) return doc.error();
  auto bad = [&](const std::string& ptr, const std::string& msg, ExitCode code = ExitCode::DataError) {
    return json_error(path, ptr, msg, code);
  };
  if (!doc->is_object()) return bad("", "a session file is an object with \"steps\" (docs/schema.md)");
  RelaxSession s;
  for (const auto& [key, v] : doc->items())
    if (key != "kv_cache" && key != "steps")
      return bad("/" + key, fmt::format("unknown member {} (a session file has kv_cache and steps)",
                                        detail::quote_input(key)));
  if (const auto it = doc->find("kv_cache"); it != doc->end()) {
    if (!it->is_object()) return bad("/kv_cache", "expected an object");
    for (const auto& [key, v] : it->items()) {
      int64_t x = 0;
      if (key == "support_sliding_window") {
        if (!v.is_boolean() && !(detail::int_in_range(v, 0, 1, &x)))
          return bad("/kv_cache/" + key, fmt::format("expected true, false, 0 or 1, got {}", detail::kind_of(v)));
        s.support_sliding_window = v.is_boolean() ? (v.get<bool>() ? 1 : 0) : x;
        continue;
      }
      int64_t* field = key == "max_batch_size"       ? &s.max_batch_size
                       : key == "max_total_seq_len"  ? &s.max_total_seq_len
                       : key == "prefill_chunk_size" ? &s.prefill_chunk_size
                       : key == "page_size"          ? &s.page_size
                                                     : nullptr;
      if (!field)
        return bad("/kv_cache/" + key, fmt::format("unknown member {} (max_batch_size, max_total_seq_len, "
                                                   "prefill_chunk_size, page_size, support_sliding_window)",
                                                   detail::quote_input(key)));
      if (!detail::int_in_range(v, 1, int64_t(1) << 24, &x))
        return bad("/kv_cache/" + key, fmt::format("expected an integer in [1, 16777216], got {}", detail::kind_of(v)));
      *field = x;
    }
  }
  const auto steps = doc->find("steps");
  if (steps == doc->end() || !steps->is_array() || steps->empty())
    return bad("/steps", "expected a non-empty array of steps");
  if (steps->size() > 100000) return bad("/steps", "more than 100000 steps");
  for (size_t i = 0; i < steps->size(); ++i) {
    const json& j = (*steps)[i];
    const std::string p = fmt::format("/steps/{}", i);
    if (!j.is_object() || !j.contains("op") || !j["op"].is_string())
      return bad(p, "a step is an object with \"op\" (add_sequence, prefill, decode, remove_sequence, "
                    "fork_sequence, popn, enable_sliding_window)");
    const std::string op = j["op"].get<std::string>();
    RelaxSessionStep st;
    if (op == "add_sequence") st.kind = RelaxSessionStep::Kind::AddSequence;
    else if (op == "remove_sequence") st.kind = RelaxSessionStep::Kind::RemoveSequence;
    else if (op == "prefill") st.kind = RelaxSessionStep::Kind::Prefill;
    else if (op == "decode") st.kind = RelaxSessionStep::Kind::Decode;
    else if (op == "fork_sequence") st.kind = RelaxSessionStep::Kind::ForkSequence;
    else if (op == "popn") st.kind = RelaxSessionStep::Kind::PopN;
    else if (op == "enable_sliding_window") st.kind = RelaxSessionStep::Kind::EnableSlidingWindow;
    else
      return bad(p + "/op", fmt::format("unknown op {} (add_sequence, prefill, decode, remove_sequence, "
                                        "fork_sequence, popn, enable_sliding_window)",
                                        detail::quote_input(op)));
    for (const auto& [key, v] : j.items()) {
      const bool fork = st.kind == RelaxSessionStep::Kind::ForkSequence;
      if (key != "op" && key != "seq" && !(key == "tokens" && st.kind == RelaxSessionStep::Kind::Prefill) &&
          !(fork && (key == "parent" || key == "pos")) && !(key == "n" && st.kind == RelaxSessionStep::Kind::PopN) &&
          !((key == "window" || key == "sink") && st.kind == RelaxSessionStep::Kind::EnableSlidingWindow))
        return bad(p + "/" + key, fmt::format("unknown member {} of a {} step", detail::quote_input(key), op));
    }
    if (st.kind == RelaxSessionStep::Kind::ForkSequence) {
      if (!j.contains("parent") || !detail::int_in_range(j["parent"], 0, int64_t(1) << 31, &st.parent))
        return bad(p + "/parent", "expected the sequence forked from, an integer in [0, 2^31]");
      if (j.contains("pos") && !detail::int_in_range(j["pos"], -1, int64_t(1) << 31, &st.pos))
        return bad(p + "/pos", "expected the position forked at, an integer in [-1, 2^31] (-1: the parent's end)");
    }
    if (st.kind == RelaxSessionStep::Kind::PopN &&
        (!j.contains("n") || !detail::int_in_range(j["n"], 0, int64_t(1) << 31, &st.tokens)))
      return bad(p + "/n", "expected the tokens to drop, an integer in [0, 2^31]");
    if (st.kind == RelaxSessionStep::Kind::EnableSlidingWindow) {
      if (!j.contains("window") || !detail::int_in_range(j["window"], 1, int64_t(1) << 24, &st.window))
        return bad(p + "/window", "expected the window in tokens, an integer in [1, 16777216]");
      if (j.contains("sink") && !detail::int_in_range(j["sink"], 0, st.window - 1, &st.sink))
        return bad(p + "/sink", fmt::format("expected the sink tokens, an integer in [0, {}] (below the window)",
                                            st.window - 1));
    }
    if (st.kind == RelaxSessionStep::Kind::Decode && j.contains("seq") && j["seq"].is_array()) {
      // Several sequences decoded in one forward (batch_decode).
      st.kind = RelaxSessionStep::Kind::BatchDecode;
      const json& list = j["seq"];
      if (list.empty() || list.size() > 4096) return bad(p + "/seq", "expected 1 to 4096 sequence ids");
      for (size_t k = 0; k < list.size(); ++k) {
        int64_t id = 0;
        if (!detail::int_in_range(list[k], 0, int64_t(1) << 31, &id))
          return bad(fmt::format("{}/seq/{}", p, k), "expected a sequence id, an integer in [0, 2^31]");
        if (std::find(st.seqs.begin(), st.seqs.end(), id) != st.seqs.end())
          return bad(fmt::format("{}/seq/{}", p, k), fmt::format("sequence {} twice in one forward", id));
        st.seqs.push_back(id);
      }
      s.steps.push_back(st);
      continue;
    }
    if (!j.contains("seq") || !detail::int_in_range(j["seq"], 0, int64_t(1) << 31, &st.seq))
      return bad(p + "/seq", "expected the sequence id, an integer in [0, 2^31] (a decode: or a list of them)");
    if (st.kind == RelaxSessionStep::Kind::Prefill &&
        (!j.contains("tokens") || !detail::int_in_range(j["tokens"], 1, int64_t(1) << 20, &st.tokens)))
      return bad(p + "/tokens", "expected the prefill's tokens, an integer in [1, 1048576]");
    s.steps.push_back(st);
  }
  if (std::none_of(s.steps.begin(), s.steps.end(), [](const RelaxSessionStep& st) {
        return st.kind == RelaxSessionStep::Kind::Prefill || st.kind == RelaxSessionStep::Kind::Decode ||
               st.kind == RelaxSessionStep::Kind::BatchDecode;
      }))
    return bad("/steps", "the session runs no forward: add a prefill or decode step");
  return s;
}

}  // namespace

Expected<RelaxSession> parse_session(const std::string& spec) {
  const bool json_name = spec.size() > 5 && spec.compare(spec.size() - 5, 5, ".json") == 0;
  if (file_exists(spec) || json_name) {
    Expected<RelaxSession> s = parse_session_file(spec);
    if (!s) return s;
    label_steps(*s);
    chunk_prefills(*s);
    return s;
  }
  RelaxSession s;
  int64_t prefill = 0, decode = 0;
  bool have_prefill = false;
  size_t start = 0;
  while (start <= spec.size()) {
    size_t comma = spec.find(',', start);
    std::string item = spec.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    size_t colon = item.find(':');
    int64_t v = -1;
    if (colon != std::string::npos) {
      const std::string num = item.substr(colon + 1);
      if (!num.empty() && num.size() <= 9 && num.find_first_not_of("0123456789") == std::string::npos)
        v = std::stoll(num);
    }
    const std::string key = colon == std::string::npos ? item : item.substr(0, colon);
    if (v < 0 || (key != "prefill" && key != "decode" && key != "page_size" && key != "max_total_seq_len" &&
                  key != "prefill_chunk_size"))
      return Error{fmt::format("error: --session {}: expected prefill:N,decode:M (and optionally page_size:P, "
                               "max_total_seq_len:T, prefill_chunk_size:C), or a session file, got {}",
                               spec, detail::quote_input(item)),
                   ExitCode::Usage};
    if (key == "prefill") prefill = v, have_prefill = true;
    else if (key == "decode") decode = v;
    else if (key == "page_size") s.page_size = v;
    else if (key == "max_total_seq_len") s.max_total_seq_len = v;
    else s.prefill_chunk_size = v;
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (!have_prefill || prefill < 1 || s.page_size < 1 || decode > 100000)
    return Error{fmt::format("error: --session {}: a session starts with prefill:N (N ≥ 1 tokens)", spec),
                 ExitCode::Usage};
  s.steps.push_back(RelaxSessionStep{RelaxSessionStep::Kind::AddSequence, 0, {}, 1, ""});
  s.steps.push_back(RelaxSessionStep{RelaxSessionStep::Kind::Prefill, 0, {}, prefill, ""});
  for (int64_t k = 0; k < decode; ++k) s.steps.push_back(RelaxSessionStep{RelaxSessionStep::Kind::Decode, 0, {}, 1, ""});
  label_steps(s);
  chunk_prefills(s);
  return s;
}

}  // namespace kdflow
