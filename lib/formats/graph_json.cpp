// graph_json.cpp — reads and validates TVM's graph executor JSON into kdflow::Graph.
//
// TVM's own loader trusts its input; this one checks everything a later stage relies
// on (list lengths, entry references, shapes, byte sizes) and reports the first
// problem as one line naming the file and the JSON pointer of the offending value.
#include "kdflow/formats/graph_json.h"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <set>

#include "json_read.h"

namespace kdflow {
namespace {

using detail::int_in_range;
using detail::json;
using detail::kind_of;
using detail::member;
using detail::ptr_at;
using detail::quote_input;

/// One of the per-entry lists under "attrs": its key, its required type tag, and
/// whether it must be present.
struct AttrList {
  const char* key;
  const char* tag;
  bool required;
};

constexpr AttrList kShape{"shape", "list_shape", true};
constexpr AttrList kDltype{"dltype", "list_str", true};
constexpr AttrList kStorageId{"storage_id", "list_int", true};
constexpr AttrList kDeviceIndex{"device_index", "list_int", false};
constexpr AttrList kStorageScope{"storage_scope", "list_str", false};

class GraphReader {
 public:
  GraphReader(const std::string& file, const GraphLimits& limits) : file_(file), limits_(limits) { graph_.file = file; }

  Expected<Graph> read(const json& root) {
    if (!root.is_object()) return err("", "expected a JSON object at the top level, got " + kind_of(root));
    if (Status s = read_nodes(root); !s) return s.error();
    if (Status s = read_node_row_ptr(root); !s) return s.error();
    if (Status s = read_arg_nodes(root); !s) return s.error();
    if (Status s = read_heads(root); !s) return s.error();
    if (Status s = read_attrs(root); !s) return s.error();
    return std::move(graph_);
  }

 private:
  Error err(const std::string& ptr, const std::string& msg) const { return json_error(file_, ptr, msg); }

  /// root[key], which must exist and be an array.
  Expected<const json*> required_array(const json& obj, const char* key, const std::string& ptr) {
    const json* v = member(obj, key);
    if (!v) return err(ptr, fmt::format("missing required member \"{}\"", key));
    if (!v->is_array()) return err(ptr_at(ptr, key), "expected an array, got " + kind_of(*v));
    return v;
  }

  // ---- nodes ------------------------------------------------------------------------

  Status read_nodes(const json& root) {
    auto nodes = required_array(root, "nodes", "");
    if (!nodes) return nodes.error();
    const json& list = **nodes;
    size_t max_nodes = std::min<size_t>(limits_.max_nodes, INT_MAX - 1);
    if (list.size() > max_nodes)
      return err("/nodes", fmt::format("graph has {} nodes, more than the limit of {}", list.size(), max_nodes));
    graph_.nodes.reserve(list.size());
    for (size_t i = 0; i < list.size(); ++i) {
      GraphNode node;
      if (Status s = read_node(list[i], static_cast<int>(i), &node); !s) return s;
      graph_.nodes.push_back(std::move(node));
    }
    return Status::ok();
  }

  Status read_node(const json& v, int nid, GraphNode* node) {
    std::string ptr = ptr_at("/nodes", static_cast<size_t>(nid));
    if (!v.is_object()) return err(ptr, "expected a node object, got " + kind_of(v));
    for (const char* key : {"op", "name"}) {
      const json* s = member(v, key);
      if (!s) return err(ptr, fmt::format("missing required member \"{}\"", key));
      if (!s->is_string()) return err(ptr_at(ptr, key), "expected a string, got " + kind_of(*s));
    }
    node->op = v["op"].get<std::string>();
    node->name = v["name"].get<std::string>();
    if (node->op != "null" && node->op != "tvm_op")
      return err(ptr_at(ptr, "op"), "unknown op " + quote_input(node->op) + " (expected \"null\" or \"tvm_op\")");
    // TVM accepts both spellings of the attribute map.
    for (const char* key : {"attrs", "attr"}) {
      if (const json* a = member(v, key)) {
        if (Status s = read_node_attrs(*a, ptr_at(ptr, key), node); !s) return s;
      }
    }
    auto inputs = required_array(v, "inputs", ptr);
    if (!inputs) return inputs.error();
    if (Status s = read_inputs(**inputs, nid, ptr + "/inputs", node); !s) return s;
    return check_node_attrs(v, nid, ptr, node);
  }

  /// Copies every attr as a string (TVM writes them all as strings; anything else
  /// is kept as its JSON text).
  Status read_node_attrs(const json& a, const std::string& ptr, GraphNode* node) {
    if (!a.is_object()) return err(ptr, "expected an object, got " + kind_of(a));
    for (auto it = a.begin(); it != a.end(); ++it)
      node->attrs[it.key()] = it.value().is_string() ? it.value().get<std::string>() : it.value().dump();
    return Status::ok();
  }

  Status read_inputs(const json& list, int nid, const std::string& ptr, GraphNode* node) {
    if (node->op == "null" && !list.empty()) return err(ptr, "a \"null\" node must have no inputs");
    node->inputs.reserve(list.size());
    for (size_t i = 0; i < list.size(); ++i) {
      NodeEntryRef ref;
      if (Status s = read_entry_ref(list[i], ptr_at(ptr, i), nid, "input", &ref); !s) return s;
      node->inputs.push_back(ref);
    }
    node->num_inputs = static_cast<int>(node->inputs.size());
    return Status::ok();
  }

  /// func_name, num_inputs and num_outputs, once attrs and inputs are known.
  Status check_node_attrs(const json& v, int nid, const std::string& ptr, GraphNode* node) {
    std::string attrs_ptr = ptr + (member(v, "attrs") || !member(v, "attr") ? "/attrs" : "/attr");
    auto find = [&](const char* key) -> const std::string* {
      auto it = node->attrs.find(key);
      return it == node->attrs.end() ? nullptr : &it->second;
    };
    if (const std::string* n = find("num_inputs")) {
      int64_t count = 0;
      if (!detail::parse_digits(*n, INT_MAX, &count))
        return err(attrs_ptr + "/num_inputs", "expected a count in decimal digits, got " + quote_input(*n));
      if (count != node->num_inputs)
        return err(attrs_ptr + "/num_inputs",
                   fmt::format("num_inputs is {} but the node has {} inputs", count, node->num_inputs));
    }
    if (node->op == "null") {
      node->num_outputs = 1;
      return Status::ok();
    }
    if (const std::string* n = find("num_outputs")) {
      int64_t count = 0;
      if (!detail::parse_digits(*n, INT_MAX, &count))
        return err(attrs_ptr + "/num_outputs", "expected a count in decimal digits, got " + quote_input(*n));
      node->num_outputs = static_cast<int>(count);
    }
    const std::string* fn = find("func_name");
    if (!fn) return err(attrs_ptr, "a \"tvm_op\" node needs attrs.func_name");
    if (fn->empty()) return err(attrs_ptr + "/func_name", "func_name is empty");
    node->func_name = *fn;
    return Status::ok();
  }

  /// `[node, index]` or `[node, index, version]`; `node` must be below `node_limit`
  /// (the referring node for inputs, the node count for heads).
  Status read_entry_ref(const json& v, const std::string& ptr, int node_limit, const char* what, NodeEntryRef* ref) {
    if (!v.is_array() || v.size() < 2 || v.size() > 3)
      return err(ptr, "expected [node, index] or [node, index, version], got " +
                          (v.is_array() ? fmt::format("an array of {} elements", v.size()) : kind_of(v)));
    int64_t vals[3] = {0, 0, 0};
    for (size_t k = 0; k < v.size(); ++k)
      if (!int_in_range(v[k], 0, INT_MAX, &vals[k]))
        return err(ptr_at(ptr, k), "expected a non-negative integer, got " + describe_int(v[k]));
    if (vals[0] >= node_limit) {
      if (std::string(what) == "input")
        return err(ptr, fmt::format("input refers to node {}, which is not earlier than node {}", vals[0], node_limit));
      return err(ptr, fmt::format("{} refers to node {}, but the graph has {} nodes", what, vals[0], node_limit));
    }
    const GraphNode& src = graph_.nodes[static_cast<size_t>(vals[0])];
    if (vals[1] >= src.num_outputs)
      return err(ptr, fmt::format("{} refers to output {} of node {}, which has {} output(s)", what, vals[1], vals[0],
                                  src.num_outputs));
    ref->node = static_cast<int>(vals[0]);
    ref->index = static_cast<int>(vals[1]);
    ref->version = static_cast<int>(vals[2]);
    return Status::ok();
  }

  static std::string describe_int(const json& v) {
    if (v.is_number_integer()) return v.dump();
    return kind_of(v);
  }

  // ---- node_row_ptr, arg_nodes, heads -----------------------------------------------

  Status read_node_row_ptr(const json& root) {
    auto rows = required_array(root, "node_row_ptr", "");
    if (!rows) return rows.error();
    const json& list = **rows;
    size_t n = graph_.nodes.size();
    if (list.size() != n + 1)
      return err("/node_row_ptr",
                 fmt::format("has {} entries, expected {} (one per node, plus one)", list.size(), n + 1));
    graph_.node_row_ptr.reserve(list.size());
    for (size_t i = 0; i < list.size(); ++i) {
      int64_t x = 0;
      std::string ptr = ptr_at("/node_row_ptr", i);
      if (!int_in_range(list[i], 0, INT_MAX, &x))
        return err(ptr, "expected a non-negative integer, got " + describe_int(list[i]));
      if (i == 0 && x != 0) return err(ptr, fmt::format("is {}, expected 0", x));
      if (i > 0) {
        int64_t prev = graph_.node_row_ptr.back();
        if (x < prev) return err(ptr, fmt::format("is {}, less than the previous entry {}", x, prev));
        int outs = graph_.nodes[i - 1].num_outputs;
        if (x - prev != outs)
          return err(ptr, fmt::format("is {}, expected {} (node {} has {} output(s))", x, prev + outs, i - 1, outs));
      }
      graph_.node_row_ptr.push_back(static_cast<int>(x));
    }
    return Status::ok();
  }

  Status read_arg_nodes(const json& root) {
    auto args = required_array(root, "arg_nodes", "");
    if (!args) return args.error();
    const json& list = **args;
    std::set<int64_t> seen;
    for (size_t i = 0; i < list.size(); ++i) {
      int64_t id = 0;
      std::string ptr = ptr_at("/arg_nodes", i);
      if (!int_in_range(list[i], 0, INT_MAX, &id))
        return err(ptr, "expected a non-negative integer, got " + describe_int(list[i]));
      if (static_cast<size_t>(id) >= graph_.nodes.size())
        return err(ptr, fmt::format("refers to node {}, but the graph has {} nodes", id, graph_.nodes.size()));
      const GraphNode& node = graph_.nodes[static_cast<size_t>(id)];
      if (node.op != "null")
        return err(ptr, fmt::format("refers to node {} ({}), which is a {} node, not \"null\"", id,
                                    quote_input(node.name), quote_input(node.op)));
      if (!seen.insert(id).second) return err(ptr, fmt::format("node {} is listed twice", id));
      graph_.arg_nodes.push_back(static_cast<int>(id));
    }
    return Status::ok();
  }

  Status read_heads(const json& root) {
    auto heads = required_array(root, "heads", "");
    if (!heads) return heads.error();
    const json& list = **heads;
    int n = static_cast<int>(graph_.nodes.size());
    for (size_t i = 0; i < list.size(); ++i) {
      NodeEntryRef ref;
      if (Status s = read_entry_ref(list[i], ptr_at("/heads", i), n, "head", &ref); !s) return s;
      graph_.heads.push_back(ref);
    }
    return Status::ok();
  }

  // ---- attrs: per-entry lists ---------------------------------------------------------

  /// attrs[spec.key] = [tag, list] with list of the entry count; nullptr when optional
  /// and absent.
  Expected<const json*> attr_list(const json& attrs, const AttrList& spec, size_t count) {
    std::string ptr = ptr_at("/attrs", spec.key);
    const json* v = member(attrs, spec.key);
    if (!v) {
      if (spec.required) return err("/attrs", fmt::format("missing required member \"{}\"", spec.key));
      return static_cast<const json*>(nullptr);
    }
    if (!v->is_array() || v->size() != 2)
      return err(ptr, fmt::format("expected [\"{}\", [...]], got ", spec.tag) +
                          (v->is_array() ? fmt::format("an array of {} elements", v->size()) : kind_of(*v)));
    const json& tag = (*v)[0];
    if (!tag.is_string() || tag.get<std::string>() != spec.tag)
      return err(ptr + "/0", fmt::format("expected the type tag \"{}\", got ", spec.tag) +
                                 (tag.is_string() ? quote_input(tag.get<std::string>()) : kind_of(tag)));
    const json& list = (*v)[1];
    if (!list.is_array()) return err(ptr + "/1", "expected an array, got " + kind_of(list));
    if (list.size() != count)
      return err(ptr + "/1",
                 fmt::format("has {} entries, expected {} (node_row_ptr's last entry)", list.size(), count));
    return &list;
  }

  Status read_attrs(const json& root) {
    const json* attrs = member(root, "attrs");
    if (!attrs) return err("", "missing required member \"attrs\"");
    if (!attrs->is_object()) return err("/attrs", "expected an object, got " + kind_of(*attrs));
    size_t count = static_cast<size_t>(graph_.node_row_ptr.back());
    const json* lists[5] = {};
    const AttrList* specs[5] = {&kShape, &kDltype, &kStorageId, &kDeviceIndex, &kStorageScope};
    for (int k = 0; k < 5; ++k) {
      auto l = attr_list(*attrs, *specs[k], count);
      if (!l) return l.error();
      lists[k] = *l;
    }
    // Only now is the entry count known to be backed by that many JSON values.
    graph_.entries.resize(count);
    size_t nid = 0;
    for (size_t eid = 0; eid < count; ++eid) {
      while (static_cast<size_t>(graph_.node_row_ptr[nid + 1]) <= eid) ++nid;
      GraphEntry& e = graph_.entries[eid];
      e.node = static_cast<int>(nid);
      e.index = static_cast<int>(eid - static_cast<size_t>(graph_.node_row_ptr[nid]));
      if (Status s = read_dtype((*lists[1])[eid], ptr_at("/attrs/dltype/1", eid), &e); !s) return s;
      if (Status s = read_shape((*lists[0])[eid], ptr_at("/attrs/shape/1", eid), &e); !s) return s;
      std::string sid_ptr = ptr_at("/attrs/storage_id/1", eid);
      if (!int_in_range((*lists[2])[eid], 0, INT64_MAX, &e.storage_id))
        return err(sid_ptr, "expected a non-negative storage id, got " + describe_int((*lists[2])[eid]));
      if (lists[3]) {
        int64_t dev = 0;
        if (!int_in_range((*lists[3])[eid], 0, INT_MAX, &dev))
          return err(ptr_at("/attrs/device_index/1", eid),
                     "expected a non-negative device type, got " + describe_int((*lists[3])[eid]));
        e.device_type = static_cast<int>(dev);
      }
      if (lists[4]) {
        const json& scope = (*lists[4])[eid];
        if (!scope.is_string())
          return err(ptr_at("/attrs/storage_scope/1", eid), "expected a string, got " + kind_of(scope));
        e.storage_scope = scope.get<std::string>();
      }
    }
    return Status::ok();
  }

  Status read_dtype(const json& v, const std::string& ptr, GraphEntry* e) {
    if (!v.is_string()) return err(ptr, "expected a dtype string, got " + kind_of(v));
    e->dtype = v.get<std::string>();
    auto t = parse_dtype(e->dtype);
    if (!t) return err(ptr, "unknown dtype " + quote_input(e->dtype));
    e->type = *t;
    return Status::ok();
  }

  /// Shape (dimensions ≥ 0, at most max_ndim) and the entry's byte size, which is
  /// computed with overflow checks and capped at limits.max_entry_bytes. Needs e->type.
  Status read_shape(const json& v, const std::string& ptr, GraphEntry* e) {
    if (!v.is_array()) return err(ptr, "expected a shape (an array of dimensions), got " + kind_of(v));
    if (v.size() > limits_.max_ndim)
      return err(ptr, fmt::format("shape has {} dimensions, more than the limit of {}", v.size(), limits_.max_ndim));
    e->shape.reserve(v.size());
    bool has_zero = false;
    for (size_t d = 0; d < v.size(); ++d) {
      int64_t dim = 0;
      if (!int_in_range(v[d], 0, INT64_MAX, &dim)) {
        if (v[d].is_number_integer() && !v[d].is_number_unsigned())
          return err(ptr_at(ptr, d), fmt::format("dimension {} is negative", v[d].get<int64_t>()));
        return err(ptr_at(ptr, d), "expected a non-negative integer dimension, got " + describe_int(v[d]));
      }
      has_zero |= dim == 0;
      e->shape.push_back(dim);
    }
    uint64_t bytes = dtype_element_bytes(e->type);
    if (has_zero) bytes = 0;
    for (size_t d = 0; d < e->shape.size() && bytes != 0; ++d) {
      if (!checked_mul(bytes, static_cast<uint64_t>(e->shape[d]), &bytes))
        return err(ptr, "entry's byte size (element bytes times all dimensions) overflows 64 bits");
    }
    if (bytes > limits_.max_entry_bytes)
      return err(ptr,
                 fmt::format("entry is {} bytes, more than the limit of {} bytes", bytes, limits_.max_entry_bytes));
    e->bytes = bytes;
    return Status::ok();
  }

  const std::string& file_;
  const GraphLimits& limits_;
  Graph graph_;
};

}  // namespace

uint64_t Graph::storage_bytes(int64_t storage_id) const {
  uint64_t max_bytes = 0;
  for (const GraphEntry& e : entries)
    if (e.storage_id == storage_id) max_bytes = std::max(max_bytes, e.bytes);
  if (max_bytes > UINT64_MAX - 3) return UINT64_MAX & ~uint64_t{3};  // only with a huge custom limit
  return (max_bytes + 3) / 4 * 4;
}

Expected<Graph> parse_graph_json(std::string_view text, const std::string& file, const GraphLimits& limits) {
  auto root = detail::parse_json_text(text, file);
  if (!root) return root.error();
  try {
    return GraphReader(file, limits).read(*root);
  } catch (const std::bad_alloc&) {
    return file_error(file, "out of memory while reading the graph", ExitCode::Software);
  } catch (const std::exception& e) {
    // Not expected: every access above is type-checked first.
    return file_error(file, std::string("internal error: ") + e.what(), ExitCode::Software);
  }
}

}  // namespace kdflow
