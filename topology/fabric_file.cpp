#include "topology/fabric_file.h"

#include <fmt/format.h>

#include <algorithm>
#include <boost/graph/breadth_first_search.hpp>
#include <boost/graph/filtered_graph.hpp>
#include <boost/graph/graphml.hpp>
#include <boost/graph/graphviz.hpp>
#include <boost/property_map/function_property_map.hpp>
#include <boost/property_tree/detail/file_parser_error.hpp>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <regex>
#include <sstream>
#include <tuple>
#include <unordered_map>

#include "sim/core/error.h"
#include "sim/core/limits.h"
#include "sim/core/parse.h"
#include "topology/boost_graph.h"
#include "topology/clos.h"

namespace trainsim::topo {
namespace {

// What the Boost readers fill: every attribute as text, converted and checked here so that a bad
// value is reported with its line and attribute.
struct FileNode {
  std::string id, kind, server, tier;
};
struct FileCable {
  std::string gbps, latency_ns, latency_back_ns;
};

struct Parsed {
  std::vector<FileNode> nodes;  // in the readers' vertex order
  // Where each node is declared (GraphML `<node>`, GraphViz the statement giving its
  // attributes) and the attributes given there; defaults (`node [...]`, GraphML `<default>`)
  // are not in the list.
  struct Declared {
    int line = 0;
    std::vector<std::string> attributes;
  };
  std::unordered_map<std::string, Declared> declared;
  struct Cable {
    std::size_t a = 0, b = 0;
    FileCable attrs;
  };
  std::vector<Cable> cables;
};

template <class Directed>
using FileGraph = boost::adjacency_list<boost::vecS, boost::vecS, Directed, FileNode, FileCable>;

int line_at(std::string_view text, std::size_t offset) {
  return 1 + static_cast<int>(std::count(
                 text.begin(),
                 text.begin() + static_cast<std::ptrdiff_t>(std::min(offset, text.size())), '\n'));
}

std::string regex_escape(const std::string& s) {
  static const std::regex special(R"([.^$|()\[\]{}*+?\\])");
  return std::regex_replace(s, special, R"(\$&)");
}

// ---- pre-scans -------------------------------------------------------------------------------
// Linear scans of the text before the Boost readers see it. They enforce the nesting limit (the
// readers recurse once per level and overflow the stack at ~30,000 levels), read the GraphML
// ids the readers drop, and refuse what the readers would silently accept (a repeated node id is
// merged, an edge to an undefined node creates one). No std::regex runs over unbounded spans of
// the file here: libstdc++'s regex recurses per repeated character.

struct GraphMlScan {
  struct Node {
    std::string id;
    int line = 0;
  };
  struct Edge {
    std::string source, target;
    int line = 0;
  };
  struct Key {
    std::string id, for_, name;  // `for`, `attr.name` ("" when not given)
    int line = 0;
    bool has_type = false;     // attr.type given (GraphML's default is string)
    bool has_default = false;  // a <default> child: Boost gives it to every node or edge
    std::size_t name_end = 0;  // offset just past `<key`, where a missing attr.type goes
  };
  struct Data {
    std::string key;
    int line = 0;
    char owner = 'g';         // 'n' node, 'e' edge, 'g' graph or document
    std::size_t element = 0;  // index in nodes or edges
  };
  std::vector<Node> nodes;  // document order, outside comments
  std::vector<Edge> edges;
  std::vector<Key> keys;
  std::vector<Data> data;
  bool undirected = false;  // edgedefault="undirected" on a <graph>
};

// The value of attribute `name` in the tag text `tag` (between `<` and `>`), if present.
std::optional<std::string> xml_attribute(std::string_view tag, std::string_view name) {
  std::size_t i = 0;
  while (i < tag.size()) {
    // Attribute name.
    while (i < tag.size() && (std::isspace(static_cast<unsigned char>(tag[i])) || tag[i] == '/'))
      ++i;
    const std::size_t start = i;
    while (i < tag.size() && tag[i] != '=' && !std::isspace(static_cast<unsigned char>(tag[i])) &&
           tag[i] != '/')
      ++i;
    const std::string_view attr = tag.substr(start, i - start);
    while (i < tag.size() && std::isspace(static_cast<unsigned char>(tag[i]))) ++i;
    if (i >= tag.size() || tag[i] != '=') {
      if (i == start) ++i;
      continue;
    }
    ++i;
    while (i < tag.size() && std::isspace(static_cast<unsigned char>(tag[i]))) ++i;
    if (i >= tag.size()) break;
    const char quote = tag[i];
    if (quote != '"' && quote != '\'') continue;
    const std::size_t end = tag.find(quote, i + 1);
    if (end == std::string_view::npos) break;
    if (attr == name) return std::string(tag.substr(i + 1, end - i - 1));
    i = end + 1;
  }
  return std::nullopt;
}

GraphMlScan scan_graphml(std::string_view text, const std::string& name) {
  GraphMlScan out;
  int line = 1;
  int depth = 0;
  const auto advance_to = [&](std::size_t& i, std::size_t end) {
    for (; i < end && i < text.size(); ++i) {
      if (text[i] == '\n') ++line;
    }
  };
  const auto skip_past = [&](std::size_t& i, std::string_view closing) {
    const std::size_t end = text.find(closing, i);
    advance_to(i, end == std::string_view::npos ? text.size() : end + closing.size());
  };
  // The node, edge or graph each <data> belongs to: the innermost one open.
  std::vector<std::pair<char, std::size_t>> owners;
  bool in_key = false;
  std::size_t i = 0;
  while (i < text.size()) {
    if (text[i] != '<') {
      if (text[i] == '\n') ++line;
      ++i;
      continue;
    }
    const std::string_view rest = text.substr(i);
    const std::size_t tag_start = i;
    if (rest.starts_with("<!--")) {
      skip_past(i, "-->");
      continue;
    }
    if (rest.starts_with("<![CDATA[")) {
      skip_past(i, "]]>");
      continue;
    }
    if (rest.starts_with("<?")) {
      skip_past(i, "?>");
      continue;
    }
    if (rest.starts_with("<!")) {
      skip_past(i, ">");
      continue;
    }
    // A tag: up to the `>` outside quoted attribute values.
    const int tag_line = line;
    std::size_t end = i + 1;
    char quote = 0;
    for (; end < text.size(); ++end) {
      const char c = text[end];
      if (quote != 0) {
        if (c == quote) quote = 0;
      } else if (c == '"' || c == '\'') {
        quote = c;
      } else if (c == '>') {
        break;
      }
    }
    const std::string_view tag = text.substr(i + 1, std::min(end, text.size()) - i - 1);
    advance_to(i, end + 1);
    if (tag.starts_with("/")) {
      --depth;
      const std::string_view closing = tag.substr(1, tag.find_first_of(" \t\r\n>", 1) - 1);
      if (!owners.empty() && ((closing == "node" && owners.back().first == 'n') ||
                              (closing == "edge" && owners.back().first == 'e') ||
                              (closing == "graph" && owners.back().first == 'g'))) {
        owners.pop_back();
      }
      if (closing == "key") in_key = false;
      continue;
    }
    const bool self_closing = tag.ends_with("/");
    if (!self_closing && ++depth > limits::kMaxNestingDepth) {
      throw_input(fmt::format("elements nest more than {} levels deep", limits::kMaxNestingDepth),
                  {name, tag_line, ""}, "see docs/reliability.md");
    }
    std::size_t n = 0;
    while (n < tag.size() && !std::isspace(static_cast<unsigned char>(tag[n])) && tag[n] != '/')
      ++n;
    const std::string_view element = tag.substr(0, n);
    const std::string_view attrs = tag.substr(n);
    if (element == "node") {
      const auto id = xml_attribute(attrs, "id");
      out.nodes.push_back({id.value_or(""), tag_line});
      if (!self_closing) owners.emplace_back('n', out.nodes.size() - 1);
    } else if (element == "edge") {
      out.edges.push_back({xml_attribute(attrs, "source").value_or(""),
                           xml_attribute(attrs, "target").value_or(""), tag_line});
      if (!self_closing) owners.emplace_back('e', out.edges.size() - 1);
    } else if (element == "graph") {
      out.undirected = out.undirected || xml_attribute(attrs, "edgedefault") == "undirected";
      if (!self_closing) owners.emplace_back('g', 0);
    } else if (element == "key") {
      out.keys.push_back({xml_attribute(attrs, "id").value_or(""),
                          xml_attribute(attrs, "for").value_or(""),
                          xml_attribute(attrs, "attr.name").value_or(""), tag_line,
                          xml_attribute(attrs, "attr.type").has_value(), false,
                          tag_start + 1 + n});
      in_key = !self_closing;
    } else if (element == "default" && in_key && !out.keys.empty()) {
      out.keys.back().has_default = true;
    } else if (element == "data") {
      GraphMlScan::Data d{xml_attribute(attrs, "key").value_or(""), tag_line, 'g', 0};
      if (!owners.empty()) std::tie(d.owner, d.element) = owners.back();
      out.data.push_back(std::move(d));
    }
  }
  return out;
}

// Checks the ids: every node has a unique id, every edge joins declared nodes.
void check_graphml_ids(const GraphMlScan& scan, const std::string& name) {
  std::unordered_map<std::string, int> seen;
  for (const GraphMlScan::Node& n : scan.nodes) {
    if (n.id.empty()) throw_input("a <node> without an id", {name, n.line, "id"});
    const auto [it, fresh] = seen.emplace(n.id, n.line);
    if (!fresh) {
      throw_input(fmt::format("node id `{}` is declared twice", clip_name(n.id)),
                  {name, n.line, "id"}, fmt::format("first declared on line {}", it->second));
    }
  }
  for (const GraphMlScan::Edge& e : scan.edges) {
    for (const auto& [end, attr] : {std::pair{&e.source, "source"}, std::pair{&e.target, "target"}}) {
      if (end->empty()) throw_input(fmt::format("an <edge> without a {}", attr), {name, e.line, attr});
      if (!seen.count(*end)) {
        throw_input(fmt::format("edge {} `{}` is not a declared node", attr, clip_name(*end)),
                    {name, e.line, attr}, "declare it with <node id=\"...\">");
      }
    }
  }
}

// GraphViz: the text with comments blanked (newlines kept), after checking the `{` nesting.
std::string scan_graphviz(std::string_view text, const std::string& name) {
  std::string clean(text);
  int line = 1, depth = 0;
  std::size_t i = 0;
  const auto blank = [&](std::size_t from, std::size_t to) {
    for (std::size_t k = from; k < to && k < clean.size(); ++k) {
      if (clean[k] == '\n') {
        ++line;
      } else {
        clean[k] = ' ';
      }
    }
  };
  bool line_start = true;
  while (i < text.size()) {
    const char c = text[i];
    if (c == '"') {
      std::size_t end = i + 1;
      while (end < text.size() && text[end] != '"') end += text[end] == '\\' ? 2 : 1;
      for (std::size_t k = i; k < end && k < text.size(); ++k) line += text[k] == '\n';
      i = std::min(end + 1, text.size());
      line_start = false;
      continue;
    }
    if (c == '/' && i + 1 < text.size() && text[i + 1] == '/') {
      const std::size_t end = text.find('\n', i);
      blank(i, end == std::string_view::npos ? text.size() : end);
      i = end == std::string_view::npos ? text.size() : end;
      continue;
    }
    if (c == '#' && line_start) {
      const std::size_t end = text.find('\n', i);
      blank(i, end == std::string_view::npos ? text.size() : end);
      i = end == std::string_view::npos ? text.size() : end;
      continue;
    }
    if (c == '/' && i + 1 < text.size() && text[i + 1] == '*') {
      const std::size_t end = text.find("*/", i + 2);
      const std::size_t stop = end == std::string_view::npos ? text.size() : end + 2;
      blank(i, stop);
      i = stop;
      continue;
    }
    if (c == '{' || c == '[') {
      if (++depth > limits::kMaxNestingDepth) {
        throw_input(fmt::format("blocks nest more than {} levels deep", limits::kMaxNestingDepth),
                    {name, line, ""}, "see docs/reliability.md");
      }
    } else if (c == '}' || c == ']') {
      --depth;
    }
    if (c == '\n') {
      ++line;
      line_start = true;
    } else if (!std::isspace(static_cast<unsigned char>(c))) {
      line_start = false;
    }
    ++i;
  }
  return clean;
}

// ---- attributes -------------------------------------------------------------------------------
// The attributes a fabric file may give, by the element they describe. Anything else is refused:
// a misspelt name (`latency=` for `latency_ns`) would otherwise be dropped without a word.

enum class AttrOwner { kNode, kEdge, kGraph };

const std::vector<std::string>& node_attributes() {
  static const std::vector<std::string> names{"kind", "server", "tier"};
  return names;
}
const std::vector<std::string>& edge_attributes() {
  static const std::vector<std::string> names{"gbps", "latency_ns", "latency_back_ns"};
  return names;
}

bool listed(const std::vector<std::string>& names, const std::string& s) {
  return std::find(names.begin(), names.end(), s) != names.end();
}

// Edit distance, for "did you mean"; names longer than any attribute's are no typo of one.
std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

std::string attribute_hint(const std::string& wrong, AttrOwner owner) {
  const std::string known = "nodes take kind, server, tier; edges take gbps, latency_ns, "
                            "latency_back_ns (docs/topology.md)";
  if (owner == AttrOwner::kGraph || wrong.size() > 32) return known;
  std::string best;
  std::size_t best_score = 0;
  for (const std::string& n : owner == AttrOwner::kNode ? node_attributes() : edge_attributes()) {
    const std::size_t d = edit_distance(wrong, n);
    // A prefix counts as close too (`latency` for `latency_ns`).
    const std::size_t score = n.rfind(wrong, 0) == 0 && wrong.size() >= 3 ? 1 : d;
    if (score <= std::max<std::size_t>(2, n.size() / 3) && (best.empty() || score < best_score)) {
      best = n;
      best_score = score;
    }
  }
  if (best.empty()) return known;
  return "did you mean `" + best + "`? N" + known.substr(1);
}

// Throws unless `attr` is one a node (or an edge) takes; the graph takes none.
void check_attribute_name(const std::string& attr, AttrOwner owner, const std::string& what,
                          const ErrorContext& at) {
  const bool node = listed(node_attributes(), attr);
  const bool edge = listed(edge_attributes(), attr);
  if ((owner == AttrOwner::kNode && node) || (owner == AttrOwner::kEdge && edge)) return;
  if (owner == AttrOwner::kGraph) {
    throw_input(fmt::format("{}: `{}` is not a graph attribute trainsim reads (it reads none)",
                            what, clip_name(attr)),
                at, attribute_hint(attr, owner));
  }
  if (node || edge) {
    throw_input(fmt::format("{}: `{}` is {} attribute, not {}'s", what, attr,
                            node ? "a node" : "an edge (cable)",
                            owner == AttrOwner::kNode ? "a node" : "an edge"),
                at, attribute_hint(attr, owner));
  }
  throw_input(fmt::format("{}: unknown attribute `{}`", what, clip_name(attr)), at,
              attribute_hint(attr, owner));
}

// ---- GraphViz statements ------------------------------------------------------------------------
// Boost's GraphViz reader takes an unquoted value by DOT's token rules, so `gbps=4e2` reads as
// `gbps=4` followed by an attribute `e2`, and `gbps=400abc` as 400; it keeps the last of a
// repeated attribute and ignores names it was not asked for; `strict` merges parallel edges; a
// node given attributes twice is one node with the attributes merged. A scan of the statements
// (the text with comments blanked) refuses all of that before Boost reads the file, and quotes
// every unquoted value, so that Boost hands over the whole text and the checked conversion sees
// it all. The scan is linear and keeps its own stack of braces (nesting is bounded before it).

struct DotToken {
  enum Kind { kEnd, kId, kPunct, kEdgeOp, kOther } kind = kEnd;
  std::string text;  // an id's text (a quoted one without its quotes), or the punctuation
  std::size_t begin = 0, end = 0;
  int line = 1;
  bool plain = false;  // an id that is neither quoted nor an HTML string
};

class DotLexer {
 public:
  explicit DotLexer(const std::string& text) : text_(text) {}

  DotToken next() {
    skip_space();
    DotToken t;
    t.begin = i_;
    t.line = line_;
    if (i_ >= text_.size()) return t;
    const char c = text_[i_];
    const auto id_char = [](char x) {
      return std::isalnum(static_cast<unsigned char>(x)) || x == '_' ||
             static_cast<unsigned char>(x) >= 0x80;
    };
    if (c == '"') {
      quoted(t);
    } else if (c == '<') {
      html(t);
    } else if (c == '-' && i_ + 1 < text_.size() && (text_[i_ + 1] == '-' || text_[i_ + 1] == '>')) {
      t.kind = DotToken::kEdgeOp;
      i_ += 2;
    } else if (std::strchr("{}[];,=:", c) != nullptr) {
      t.kind = DotToken::kPunct;
      ++i_;
    } else if (std::isdigit(static_cast<unsigned char>(c)) || c == '.' || c == '-') {
      // A numeral: [-]?(.[0-9]+ | [0-9]+(.[0-9]*)?)
      std::size_t k = i_ + (c == '-' ? 1 : 0);
      while (k < text_.size() && (std::isdigit(static_cast<unsigned char>(text_[k])) || text_[k] == '.'))
        ++k;
      t.kind = k > i_ + (c == '-' ? 1 : 0) ? DotToken::kId : DotToken::kOther;
      t.plain = true;
      i_ = std::max(k, i_ + 1);
    } else if (id_char(c)) {
      while (i_ < text_.size() && id_char(text_[i_])) ++i_;
      t.kind = DotToken::kId;
      t.plain = true;
    } else {
      t.kind = DotToken::kOther;
      ++i_;
    }
    t.end = i_;
    if (t.kind != DotToken::kId || t.plain) t.text = text_.substr(t.begin, t.end - t.begin);
    return t;
  }

  // An attribute's value, after its `=`: a quoted or HTML string, or else everything up to
  // white space or one of , ; [ ] { } = " (DOT would cut `4e2` after the 4).
  DotToken value() {
    skip_space();
    if (i_ < text_.size() && (text_[i_] == '"' || text_[i_] == '<')) return next();
    DotToken t;
    t.begin = i_;
    t.line = line_;
    while (i_ < text_.size() && !std::isspace(static_cast<unsigned char>(text_[i_])) &&
           std::strchr(",;[]{}=\"\\", text_[i_]) == nullptr)
      ++i_;
    t.end = i_;
    t.kind = t.end > t.begin ? DotToken::kId : DotToken::kOther;
    t.plain = true;
    t.text = text_.substr(t.begin, t.end - t.begin);
    return t;
  }

  DotToken peek() {
    const std::size_t i = i_;
    const int line = line_;
    DotToken t = next();
    i_ = i;
    line_ = line;
    return t;
  }

 private:
  void skip_space() {
    while (i_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[i_]))) {
      if (text_[i_] == '\n') ++line_;
      ++i_;
    }
  }
  void quoted(DotToken& t) {
    std::size_t k = i_ + 1;
    while (k < text_.size() && text_[k] != '"') {
      if (text_[k] == '\\' && k + 1 < text_.size()) {
        if (text_[k + 1] == '\n') ++line_;
        t.text += text_[k + 1];
        k += 2;
        continue;
      }
      if (text_[k] == '\n') ++line_;
      t.text += text_[k++];
    }
    t.kind = k < text_.size() ? DotToken::kId : DotToken::kOther;
    i_ = std::min(k + 1, text_.size());
  }
  void html(DotToken& t) {
    int depth = 0;
    std::size_t k = i_;
    for (; k < text_.size(); ++k) {
      if (text_[k] == '<') ++depth;
      if (text_[k] == '>' && --depth == 0) break;
      if (text_[k] == '\n') ++line_;
    }
    t.kind = k < text_.size() ? DotToken::kId : DotToken::kOther;
    if (k < text_.size()) t.text = text_.substr(i_ + 1, k - i_ - 1);
    i_ = std::min(k + 1, text_.size());
  }

  const std::string& text_;
  std::size_t i_ = 0;
  int line_ = 1;
};

struct DotScan {
  std::string text;  // to give Boost: comments blanked, unquoted attribute values quoted
  std::unordered_map<std::string, Parsed::Declared> declared;  // by node id
  bool understood = true;  // false: a construct the scan does not follow (Boost's reader decides)
};

bool keyword(const DotToken& t, std::string_view word) {
  if (t.kind != DotToken::kId || !t.plain || t.text.size() != word.size()) return false;
  for (std::size_t k = 0; k < word.size(); ++k) {
    if (std::tolower(static_cast<unsigned char>(t.text[k])) != word[k]) return false;
  }
  return true;
}

DotScan scan_dot_statements(const std::string& clean, const std::string& name) {
  DotScan out;
  DotLexer lex(clean);
  std::vector<std::pair<std::size_t, std::size_t>> unquoted;  // value spans to quote
  const auto give_up = [&] {
    out.understood = false;
    out.text = clean;
    return out;
  };
  DotToken t = lex.next();
  if (keyword(t, "strict")) {
    throw_input("a `strict` graph merges parallel edges, and every edge of a fabric file is one "
                "cable",
                {name, t.line, "strict"},
                "remove `strict`; parallel cables are separate edges");
  }
  if (!keyword(t, "graph") && !keyword(t, "digraph")) return give_up();
  t = lex.next();
  if (t.kind == DotToken::kId) t = lex.next();
  if (t.kind != DotToken::kPunct || t.text != "{") return give_up();

  enum class Kind { kNone, kNode, kEdge, kSubgraph, kNodeDefault, kEdgeDefault, kGraphDefault };
  struct Statement {
    Kind kind = Kind::kNone;
    std::string id;    // a node statement's node; an edge statement's first operand
    std::string last;  // an edge statement's last operand
    int line = 0;
    bool has_attributes = false;
    bool expect_operand = false;  // after an edge operator
    std::map<std::string, int> attributes;  // name -> line, within this statement
  };
  std::vector<Statement> open(1);  // one statement per brace level
  const auto finish = [&](Statement& s) {
    if (s.kind == Kind::kNode && s.has_attributes) {
      Parsed::Declared d{s.line, {}};
      for (const auto& [attr, line] : s.attributes) d.attributes.push_back(attr);
      const auto [it, fresh] = out.declared.emplace(s.id, std::move(d));
      if (!fresh) {
        throw_input(fmt::format("node `{}` is declared twice (lines {} and {})", clip_name(s.id),
                                it->second.line, s.line),
                    {name, s.line, clip_name(s.id)}, "give a node's attributes in one statement");
      }
    }
    s = Statement{};
  };
  const auto what_of = [](const Statement& s) {
    switch (s.kind) {
      case Kind::kNode:
        return fmt::format("node `{}`", clip_name(s.id));
      case Kind::kEdge:
        return fmt::format("cable {} - {}", s.id.empty() ? "{...}" : clip_name(s.id),
                           s.last.empty() ? "{...}" : clip_name(s.last));
      case Kind::kNodeDefault:
        return std::string("`node` defaults");
      case Kind::kEdgeDefault:
        return std::string("`edge` defaults");
      default:
        return std::string("graph");
    }
  };
  while (true) {
    t = lex.next();
    if (t.kind == DotToken::kEnd || t.kind == DotToken::kOther) return give_up();
    Statement& s = open.back();
    if (t.kind == DotToken::kPunct && t.text == ";") {
      if (s.expect_operand) return give_up();
      finish(s);
    } else if (t.kind == DotToken::kPunct && t.text == "{") {
      if (s.kind == Kind::kNone) {
        s.kind = Kind::kSubgraph;
        s.line = t.line;
      } else if (!(s.kind == Kind::kEdge && s.expect_operand) &&
                 !(s.kind == Kind::kSubgraph && !s.has_attributes)) {
        return give_up();
      }
      s.expect_operand = false;
      if (open.size() > static_cast<std::size_t>(limits::kMaxNestingDepth) + 1) return give_up();
      open.emplace_back();
    } else if (t.kind == DotToken::kPunct && t.text == "}") {
      if (s.expect_operand) return give_up();
      finish(s);
      open.pop_back();
      if (open.empty()) break;  // the graph's closing brace
    } else if (t.kind == DotToken::kEdgeOp) {
      if (s.expect_operand || (s.kind != Kind::kNode && s.kind != Kind::kEdge &&
                               s.kind != Kind::kSubgraph) ||
          s.has_attributes) {
        return give_up();
      }
      s.kind = Kind::kEdge;
      s.expect_operand = true;
      s.last.clear();
    } else if (t.kind == DotToken::kPunct && t.text == "[") {
      AttrOwner owner;
      switch (s.kind) {
        case Kind::kNode:
        case Kind::kNodeDefault:
          owner = AttrOwner::kNode;
          break;
        case Kind::kEdge:
        case Kind::kEdgeDefault:
          owner = AttrOwner::kEdge;
          break;
        case Kind::kGraphDefault:
          owner = AttrOwner::kGraph;
          break;
        default:
          return give_up();
      }
      if (s.expect_operand) return give_up();
      while (true) {
        DotToken a = lex.next();
        if (a.kind == DotToken::kPunct && a.text == "]") break;
        if (a.kind == DotToken::kPunct && (a.text == "," || a.text == ";")) continue;
        if (a.kind != DotToken::kId) return give_up();
        const ErrorContext at{name, a.line, clip_name(a.text)};
        check_attribute_name(a.text, owner, what_of(s), at);
        const auto [it, fresh] = s.attributes.emplace(a.text, a.line);
        if (!fresh) {
          throw_input(fmt::format("{}: attribute `{}` is given twice", what_of(s), a.text), at,
                      it->second == a.line
                          ? std::string("give it once")
                          : fmt::format("first given on line {}; give it once", it->second));
        }
        if (lex.peek().kind == DotToken::kPunct && lex.peek().text == "=") {
          lex.next();
          const DotToken v = lex.value();
          if (v.kind != DotToken::kId) return give_up();
          if (v.plain) unquoted.emplace_back(v.begin, v.end);
        }
      }
      s.has_attributes = true;
    } else if (t.kind == DotToken::kId) {
      // A new statement starts here unless the one open waits for an edge's next operand.
      if (s.kind != Kind::kNone && !s.expect_operand) finish(s);
      Statement& cur = open.back();
      const bool operand = cur.kind == Kind::kEdge && cur.expect_operand;
      if (!operand && keyword(t, "node")) {
        cur.kind = Kind::kNodeDefault;
      } else if (!operand && keyword(t, "edge")) {
        cur.kind = Kind::kEdgeDefault;
      } else if (!operand && keyword(t, "graph")) {
        cur.kind = Kind::kGraphDefault;
      } else if (keyword(t, "subgraph")) {
        if (!operand) cur.kind = Kind::kSubgraph;
        cur.expect_operand = false;
        if (lex.peek().kind == DotToken::kId) lex.next();
        if (lex.peek().kind != DotToken::kPunct || lex.peek().text != "{") return give_up();
        // The `{` that follows opens the body; mark the statement as a subgraph operand.
        const DotToken brace = lex.next();
        (void)brace;
        if (open.size() > static_cast<std::size_t>(limits::kMaxNestingDepth) + 1) return give_up();
        open.emplace_back();
      } else if (!operand && lex.peek().kind == DotToken::kPunct && lex.peek().text == "=") {
        // `ID = ID`: an attribute of the graph.
        check_attribute_name(t.text, AttrOwner::kGraph, "graph", {name, t.line, clip_name(t.text)});
        return give_up();  // not reached: the graph takes no attribute
      } else {
        if (operand) {
          cur.expect_operand = false;
          cur.last = t.text;
        } else {
          cur.kind = Kind::kNode;
          cur.id = t.text;
          cur.line = t.line;
        }
        // A port: `:port` or `:port:compass`.
        for (int k = 0; k < 2 && lex.peek().kind == DotToken::kPunct && lex.peek().text == ":";
             ++k) {
          lex.next();
          if (lex.next().kind != DotToken::kId) return give_up();
        }
      }
    } else {
      return give_up();  // `=`, `,` or `:` out of place
    }
  }
  // Quote the unquoted values (spans in file order; no newline is added, so lines stay).
  out.text.reserve(clean.size() + 2 * unquoted.size());
  std::size_t from = 0;
  for (const auto& [b, e] : unquoted) {
    out.text.append(clean, from, b - from);
    out.text += '"';
    out.text.append(clean, b, e - b);
    out.text += '"';
    from = e;
  }
  out.text.append(clean, from, std::string::npos);
  return out;
}

// GraphML's keys and data: every <data> names a declared <key>, whose attr.name is an attribute
// of the element the data is in (a <default> makes a key apply to every node or edge); no
// element gives one attribute twice. Boost's reader would drop the unknown names, keep the last
// of a repeated one, and stop at an undeclared key with "unrecognized type "" for key".
// Returns what each node declares, by id.
std::unordered_map<std::string, Parsed::Declared> check_graphml_data(const GraphMlScan& scan,
                                                                     const std::string& name) {
  std::unordered_map<std::string, const GraphMlScan::Key*> keys;
  for (const GraphMlScan::Key& k : scan.keys) {
    const ErrorContext at{name, k.line, "key"};
    if (k.id.empty()) throw_input("a <key> without an id", at);
    const auto [it, fresh] = keys.emplace(k.id, &k);
    if (!fresh) {
      throw_input(fmt::format("key id `{}` is declared twice", clip_name(k.id)), at,
                  fmt::format("first declared on line {}", it->second->line));
    }
    static const char* const kFors[] = {"node", "edge", "graph", "all", "graphml",
                                        "hyperedge", "port", "endpoint"};
    if (std::find(std::begin(kFors), std::end(kFors), k.for_) == std::end(kFors)) {
      throw_input(fmt::format("key `{}`: for=\"{}\" is not a GraphML element", clip_name(k.id),
                              clip_name(k.for_)),
                  at, "for=\"node\" or for=\"edge\"");
    }
    if (k.has_default) {
      const std::string what = fmt::format("key `{}` (a default)", clip_name(k.id));
      const ErrorContext at_name{name, k.line, clip_name(k.name)};
      if (k.for_ == "node") {
        check_attribute_name(k.name, AttrOwner::kNode, what, at_name);
      } else if (k.for_ == "edge") {
        check_attribute_name(k.name, AttrOwner::kEdge, what, at_name);
      } else if (!listed(node_attributes(), k.name) && !listed(edge_attributes(), k.name)) {
        check_attribute_name(k.name, AttrOwner::kGraph, what, at_name);
      }
    }
  }
  std::unordered_map<std::string, Parsed::Declared> declared;
  for (const GraphMlScan::Node& n : scan.nodes) declared[n.id].line = n.line;
  std::map<std::tuple<char, std::size_t, std::string>, int> given;  // (owner, element, attr) -> line
  for (const GraphMlScan::Data& d : scan.data) {
    const auto it = keys.find(d.key);
    if (it == keys.end()) {
      throw_input(fmt::format("<data key=\"{}\"> names no declared <key>", clip_name(d.key)),
                  {name, d.line, clip_name(d.key)},
                  fmt::format("declare it before the graph, e.g. <key id=\"{}\" for=\"edge\" "
                              "attr.name=\"latency_ns\" attr.type=\"double\"/>",
                              clip_name(d.key)));
    }
    const GraphMlScan::Key& k = *it->second;
    const AttrOwner owner = d.owner == 'n'   ? AttrOwner::kNode
                            : d.owner == 'e' ? AttrOwner::kEdge
                                             : AttrOwner::kGraph;
    std::string what = "graph";
    if (d.owner == 'n') what = fmt::format("node `{}`", clip_name(scan.nodes[d.element].id));
    if (d.owner == 'e') {
      what = fmt::format("cable {} - {}", clip_name(scan.edges[d.element].source),
                         clip_name(scan.edges[d.element].target));
    }
    const ErrorContext at{name, d.line, k.name.empty() ? clip_name(k.id) : clip_name(k.name)};
    if (k.name.empty()) {
      throw_input(fmt::format("{}: key `{}` has no attr.name", what, clip_name(k.id)), at,
                  fmt::format("name the attribute on line {}: attr.name=\"...\"; {}", k.line,
                              attribute_hint("", owner)));
    }
    check_attribute_name(k.name, owner, what, at);
    const bool wrong_for = (k.for_ == "node" && d.owner != 'n') ||
                           (k.for_ == "edge" && d.owner != 'e') ||
                           (k.for_ == "graph" && d.owner != 'g');
    if (wrong_for) {
      throw_input(fmt::format("{}: key `{}` is declared for={} (line {})", what, clip_name(k.id),
                              k.for_, k.line),
                  at, fmt::format("declare it for=\"{}\"", d.owner == 'n' ? "node" : "edge"));
    }
    const auto [g, fresh] = given.emplace(std::tuple{d.owner, d.element, k.name}, d.line);
    if (!fresh) {
      throw_input(fmt::format("{}: attribute `{}` is given twice", what, k.name), at,
                  g->second == d.line ? std::string("give it once")
                                      : fmt::format("first given on line {}; give it once",
                                                    g->second));
    }
    if (d.owner == 'n') declared[scan.nodes[d.element].id].attributes.push_back(k.name);
  }
  return declared;
}

// The line where a node is declared: GraphML `<node id="X"`, GraphViz the statement giving its
// attributes, else the first line naming X.
int node_line(const std::string& text, const Parsed& p, const std::string& id) {
  const auto it = p.declared.find(id);
  if (it != p.declared.end() && it->second.line > 0) return it->second.line;
  const std::string pattern =
      "(^|[^A-Za-z0-9_.\"])\"?" + regex_escape(id) + "\"?($|[^A-Za-z0-9_.\"])";
  std::smatch m;
  if (std::regex_search(text, m, std::regex(pattern))) {
    // The match starts with the character before the name (a newline, for a name that starts
    // its line): the name itself is after group 1.
    return line_at(text, static_cast<std::size_t>(m.position(0) + m.length(1)));
  }
  return 0;
}

// The line of the cable a-b: GraphML `<edge` with that source and target, GraphViz a line
// naming a, an edge operator, then b.
int cable_line(const std::string& text, FabricFormat format, const std::string& a,
               const std::string& b) {
  std::vector<std::string> patterns;
  if (format == FabricFormat::kGraphMl) {
    for (const GraphMlScan::Edge& e : scan_graphml(text, "").edges) {
      if ((e.source == a && e.target == b) || (e.source == b && e.target == a)) return e.line;
    }
    return 0;
  } else {
    for (const auto& [x, y] : {std::pair{a, b}, std::pair{b, a}}) {
      patterns.push_back("\"?\\b" + regex_escape(x) + "\\b\"?[ \\t]*-[->][ \\t]*\"?\\b" +
                         regex_escape(y) + "\\b");
    }
  }
  for (const std::string& p : patterns) {
    std::smatch m;
    if (std::regex_search(text, m, std::regex(p))) {
      return line_at(text, static_cast<std::size_t>(m.position()));
    }
  }
  return 0;
}

// Boost's GraphViz reader adds nodes in the order of their names, not of the file. Nodes are put
// back in the order they first appear in the text (GPU numbers follow it), by a scan of the
// file's identifiers and quoted strings.
void in_file_order(const std::string& text, Parsed& p) {
  std::unordered_map<std::string, std::size_t> first;
  const auto is_id = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' ||
           static_cast<unsigned char>(c) >= 0x80;
  };
  for (std::size_t i = 0; i < text.size();) {
    std::size_t end = i;
    std::string token;
    if (text[i] == '"') {
      end = i + 1;
      while (end < text.size() && text[end] != '"') end += text[end] == '\\' ? 2 : 1;
      token = text.substr(i + 1, std::min(end, text.size()) - i - 1);
      ++end;
    } else if (is_id(text[i])) {
      while (end < text.size() && is_id(text[end])) ++end;
      token = text.substr(i, end - i);
    } else {
      ++i;
      continue;
    }
    first.emplace(std::move(token), i);
    i = end;
  }
  const std::size_t n = p.nodes.size();
  std::vector<std::size_t> order(n);
  for (std::size_t v = 0; v < n; ++v) order[v] = v;
  const auto where = [&](std::size_t v) {
    const auto it = first.find(p.nodes[v].id);
    return it == first.end() ? text.size() : it->second;
  };
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return where(a) < where(b); });
  std::vector<std::size_t> position(n);
  std::vector<FileNode> nodes(n);
  for (std::size_t i = 0; i < n; ++i) {
    position[order[i]] = i;
    nodes[i] = std::move(p.nodes[order[i]]);
  }
  p.nodes = std::move(nodes);
  for (Parsed::Cable& c : p.cables) {
    c.a = position[c.a];
    c.b = position[c.b];
  }
}

// `attr.type="..."` replaced by `attr.type="string"`, by a linear scan.
std::string all_types_string(const std::string& text) {
  static constexpr std::string_view kAttr = "attr.type";
  std::string out;
  out.reserve(text.size());
  std::size_t i = 0;
  while (true) {
    const std::size_t at = text.find(kAttr, i);
    if (at == std::string::npos) break;
    std::size_t k = at + kAttr.size();
    while (k < text.size() && std::isspace(static_cast<unsigned char>(text[k]))) ++k;
    if (k < text.size() && text[k] == '=') {
      ++k;
      while (k < text.size() && std::isspace(static_cast<unsigned char>(text[k]))) ++k;
      if (k < text.size() && text[k] == '"') {
        const std::size_t close = text.find('"', k + 1);
        if (close != std::string::npos) {
          out.append(text, i, at - i);
          // Keep the line count: newlines inside the replaced span are kept.
          out += R"(attr.type="string")";
          for (std::size_t c = at; c <= close; ++c) {
            if (text[c] == '\n') out += '\n';
          }
          i = close + 1;
          continue;
        }
      }
    }
    out.append(text, i, k - i);
    i = k;
  }
  out.append(text, i, std::string::npos);
  return out;
}

template <class Directed>
Parsed read_with_boost(const std::string& text, FabricFormat format, const std::string& name,
                       const GraphMlScan* graphml) {
  FileGraph<Directed> g;
  // The scans before refuse every attribute not read here; a name that still reaches Boost is
  // refused too (with no line), never dropped.
  std::optional<std::string> unread;
  boost::dynamic_properties dp(
      [&unread](const std::string& attr, const boost::any&,
                const boost::any&) -> boost::shared_ptr<boost::dynamic_property_map> {
        if (!unread) unread = attr;
        return {};
      });
  dp.property("kind", boost::get(&FileNode::kind, g));
  dp.property("server", boost::get(&FileNode::server, g));
  dp.property("tier", boost::get(&FileNode::tier, g));
  dp.property("gbps", boost::get(&FileCable::gbps, g));
  dp.property("latency_ns", boost::get(&FileCable::latency_ns, g));
  dp.property("latency_back_ns", boost::get(&FileCable::latency_back_ns, g));
  if (format == FabricFormat::kGraphViz) {
    dp.property("node_id", boost::get(&FileNode::id, g));
    boost::read_graphviz(text, g, dp, "node_id");
  } else {
    // Every key is read as text (attr.type="int" would make Boost convert it, and report a bad
    // value without saying where); a key without attr.type is a string, as GraphML says (Boost
    // stops at it with "unrecognized type").
    std::string typed;
    std::size_t from = 0;
    for (const GraphMlScan::Key& k : graphml->keys) {
      if (k.has_type) continue;
      typed.append(text, from, k.name_end - from);
      typed += R"( attr.type="string")";
      from = k.name_end;
    }
    typed.append(text, from, std::string::npos);
    std::istringstream in(all_types_string(typed));
    boost::read_graphml(in, g, dp);
  }
  if (unread) {
    throw_input(fmt::format("attribute `{}` is not one trainsim reads", clip_name(*unread)),
                {name, 0, clip_name(*unread)}, attribute_hint(*unread, AttrOwner::kGraph));
  }
  Parsed p;
  for (std::size_t v = 0; v < boost::num_vertices(g); ++v) p.nodes.push_back(g[v]);
  if (format == FabricFormat::kGraphMl) {
    // Boost's GraphML reader does not keep node ids; it adds nodes in document order, so the
    // ids are taken from the pre-scan (outside comments), in the same order.
    if (graphml->nodes.size() != p.nodes.size()) {
      throw_input(fmt::format("could not match the {} GraphML node ids to the {} nodes read",
                              graphml->nodes.size(), p.nodes.size()),
                  {name, 0, "id"});
    }
    for (std::size_t i = 0; i < p.nodes.size(); ++i) p.nodes[i].id = graphml->nodes[i].id;
  }
  for (const auto& e : boost::make_iterator_range(boost::edges(g))) {
    p.cables.push_back({boost::source(e, g), boost::target(e, g), g[e]});
  }
  if (format == FabricFormat::kGraphViz) in_file_order(text, p);
  return p;
}

// Boost's GraphViz parser does not say where it stopped. The parser stops at the first bad
// token, so a prefix of the file gives the same error exactly when it contains that token: a
// binary search over line counts finds the line.
template <class Directed>
int graphviz_error_line(const std::string& text, const std::string& error) {
  std::vector<std::size_t> ends;  // offset just past each line
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\n') ends.push_back(i + 1);
  }
  ends.push_back(text.size());
  const auto same_error = [&](std::size_t lines) {
    const std::string prefix = text.substr(0, ends[lines - 1]);
    try {
      FileGraph<Directed> g;
      boost::dynamic_properties dp(boost::ignore_other_properties);
      boost::read_graphviz(prefix, g, dp);
    } catch (const boost::bad_graphviz_syntax& e) {
      return error == e.what();
    } catch (const std::exception&) {
    }
    return false;
  };
  std::size_t lo = 1, hi = ends.size();
  if (!same_error(hi)) return 0;
  while (lo < hi) {
    const std::size_t mid = (lo + hi) / 2;
    if (same_error(mid)) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return static_cast<int>(lo);
}

// Whether the file describes a directed graph: GraphViz `digraph`, GraphML
// edgedefault="directed". Boost's readers insist that the graph type matches.
bool is_directed(const std::string& text, FabricFormat format, const std::string& name,
                 const GraphMlScan* graphml) {
  if (format == FabricFormat::kGraphMl) return !graphml->undirected;
  // The first `graph` or `digraph` keyword outside comments, found by a linear scan.
  const std::string clean = scan_graphviz(text, name);
  const auto word_char = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  };
  for (std::size_t i = 0; i < clean.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(clean[i])) != 'g' &&
        std::tolower(static_cast<unsigned char>(clean[i])) != 'd') {
      continue;
    }
    if (i > 0 && word_char(clean[i - 1])) continue;
    for (const std::string_view kw : {std::string_view("digraph"), std::string_view("graph")}) {
      if (i + kw.size() > clean.size()) continue;
      bool match = true;
      for (std::size_t k = 0; k < kw.size() && match; ++k) {
        match = std::tolower(static_cast<unsigned char>(clean[i + k])) == kw[k];
      }
      if (match && (i + kw.size() == clean.size() || !word_char(clean[i + kw.size()]))) {
        return kw.size() == 7;
      }
    }
  }
  throw_input("not a GraphViz graph: no `graph` or `digraph` keyword", {name, 1, ""});
}

Parsed parse(const std::string& text, FabricFormat format, const std::string& name) {
  std::optional<GraphMlScan> graphml;
  std::unordered_map<std::string, Parsed::Declared> declared;
  if (format == FabricFormat::kGraphMl) {
    graphml = scan_graphml(text, name);
    check_graphml_ids(*graphml, name);
    declared = check_graphml_data(*graphml, name);
  }
  const GraphMlScan* scan = graphml ? &*graphml : nullptr;
  const bool directed = is_directed(text, format, name, scan);
  // GraphViz: Boost reads the text the statement scan checked, its values quoted.
  std::string read = text;
  bool understood = true;
  if (format == FabricFormat::kGraphViz) {
    DotScan dot = scan_dot_statements(scan_graphviz(text, name), name);
    read = std::move(dot.text);
    declared = std::move(dot.declared);
    understood = dot.understood;
  }
  Parsed p;
  try {
    p = directed ? read_with_boost<boost::directedS>(read, format, name, scan)
                 : read_with_boost<boost::undirectedS>(read, format, name, scan);
  } catch (const Error&) {
    throw;
  } catch (const boost::property_tree::file_parser_error& e) {
    throw_input("not valid GraphML: " + e.message(), {name, static_cast<int>(e.line()), ""});
  } catch (const boost::bad_graphviz_syntax& e) {
    const int line = directed ? graphviz_error_line<boost::directedS>(read, e.what())
                              : graphviz_error_line<boost::undirectedS>(read, e.what());
    throw_input(std::string("not valid GraphViz: ") + e.what(), {name, line, ""});
  } catch (const std::exception& e) {
    throw_input(std::string("cannot read the fabric: ") + e.what(), {name, 0, ""});
  }
  if (!understood) {
    // Boost read a statement the scan did not follow, so its attributes went unchecked.
    throw_input("a statement this reader does not follow (its attributes could not be checked)",
                {name, 0, ""},
                "write nodes as `id [kind=..., server=...];` and cables as `a -- b [gbps=...];` "
                "(docs/topology.md)");
  }
  p.declared = std::move(declared);
  return p;
}

std::string trim(const std::string& s) {
  const std::size_t b = s.find_first_not_of(" \t\r\n");
  const std::size_t e = s.find_last_not_of(" \t\r\n");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

std::optional<long> parse_int(const std::string& raw) {
  const std::string s = trim(raw);
  long v = 0;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

// Through the checked conversion: whole text, finite, not subnormal.
std::optional<double> parse_number(const std::string& raw) {
  const NumberResult r = to_double(trim(raw));
  if (r.problem != NumberProblem::kNone) return std::nullopt;
  return r.value;
}

// Tier = hops from the nearest NIC, by a breadth-first search over the NIC and switch cables.
std::vector<int> infer_tiers(const std::vector<NodeKind>& kinds, const Parsed& p) {
  using Undirected = boost::adjacency_list<boost::vecS, boost::vecS, boost::undirectedS>;
  Undirected g(kinds.size());
  for (const auto& c : p.cables) {
    const bool fabric = kinds[c.a] != NodeKind::kGpu && kinds[c.a] != NodeKind::kNvSwitch &&
                        kinds[c.b] != NodeKind::kGpu && kinds[c.b] != NodeKind::kNvSwitch;
    if (fabric) boost::add_edge(c.a, c.b, g);
  }
  std::vector<std::size_t> sources;
  for (std::size_t v = 0; v < kinds.size(); ++v) {
    if (kinds[v] == NodeKind::kNic) sources.push_back(v);
  }
  constexpr int kUnset = std::numeric_limits<int>::max();
  std::vector<int> dist(kinds.size(), kUnset);
  for (const std::size_t s : sources) dist[s] = 0;
  boost::queue<std::size_t> queue;
  std::vector<boost::default_color_type> color(kinds.size());
  boost::breadth_first_search(
      g, sources.begin(), sources.end(), queue,
      boost::make_bfs_visitor(boost::record_distances(dist.data(), boost::on_tree_edge())),
      color.data());
  return dist;
}

}  // namespace

ClusterGraph read_fabric_text(std::string_view text_view, FabricFormat format,
                              const std::string& name, const ClusterSpec& base) {
  const std::string text(strip_bom(text_view));
  const Parsed p = parse(text, format, name);
  const auto at_node = [&](std::size_t v, const char* attribute) {
    return ErrorContext{name, node_line(text, p, p.nodes[v].id), attribute};
  };
  const auto at_cable = [&](const Parsed::Cable& c, const char* attribute) {
    return ErrorContext{name, cable_line(text, format, p.nodes[c.a].id, p.nodes[c.b].id),
                        attribute};
  };
  if (p.nodes.empty()) throw_input("the fabric has no nodes", {name, 0, ""});

  // Nodes: kind, server, tier.
  const std::size_t n = p.nodes.size();
  std::vector<NodeKind> kinds(n);
  std::vector<int> servers(n, -1), tiers(n, 0);
  int tiers_given = 0, switches = 0;
  for (std::size_t v = 0; v < n; ++v) {
    const FileNode& node = p.nodes[v];
    const std::string kind = trim(node.kind);
    if (kind == "gpu") {
      kinds[v] = NodeKind::kGpu;
    } else if (kind == "nvswitch") {
      kinds[v] = NodeKind::kNvSwitch;
    } else if (kind == "nic") {
      kinds[v] = NodeKind::kNic;
    } else if (kind == "switch") {
      kinds[v] = NodeKind::kSwitch;
    } else {
      throw_input(kind.empty() ? fmt::format("node `{}` has no kind", node.id)
                               : fmt::format("node `{}`: unknown kind `{}`", node.id, kind),
                  at_node(v, "kind"), "kind is one of gpu, nvswitch, nic, switch");
    }
    // An attribute the node's own statement gives must fit its kind (a default that does not
    // fit, `node [server=0]` before a switch, is not the node's).
    const auto own = p.declared.find(node.id);
    if (own != p.declared.end()) {
      const char* misplaced = nullptr;
      for (const std::string& attr : own->second.attributes) {
        if (attr == "tier" && kinds[v] != NodeKind::kSwitch) misplaced = "tier";
        if (attr == "server" && kinds[v] == NodeKind::kSwitch) misplaced = "server";
      }
      if (misplaced != nullptr) {
        throw_input(fmt::format("node `{}` ({}): `{}` applies to {}", node.id, kind, misplaced,
                                std::string_view(misplaced) == "tier"
                                    ? "switches only"
                                    : "GPUs, NVSwitches and NICs only (a switch is in no server)"),
                    at_node(v, misplaced));
      }
    }
    if (kinds[v] == NodeKind::kSwitch) {
      ++switches;
      if (!trim(node.tier).empty()) {
        const auto t = parse_int(node.tier);
        if (!t || *t < 1 || *t > 16) {
          throw_input(fmt::format("node `{}`: tier must be an integer from 1 to 16, got `{}`",
                                  node.id, node.tier),
                      at_node(v, "tier"));
        }
        tiers[v] = static_cast<int>(*t);
        ++tiers_given;
      }
    } else {
      const auto s = parse_int(node.server);
      if (!s || *s < 0 || *s > std::numeric_limits<int>::max() / 2) {
        throw_input(trim(node.server).empty()
                        ? fmt::format("node `{}` ({}) has no server", node.id, kind)
                        : fmt::format("node `{}`: server must be an integer >= 0, got `{}`",
                                      node.id, node.server),
                    at_node(v, "server"));
      }
      servers[v] = static_cast<int>(*s);
    }
  }
  if (tiers_given != 0 && tiers_given != switches) {
    for (std::size_t v = 0; v < n; ++v) {
      if (kinds[v] == NodeKind::kSwitch && tiers[v] == 0) {
        throw_input(fmt::format("switch `{}` has no tier while others have one", p.nodes[v].id),
                    at_node(v, "tier"), "give every switch a tier, or none");
      }
    }
  }
  if (tiers_given > 0) {
    // Given tiers must agree with the cabling: a switch cabled to a NIC is a ToR (tier 1), and
    // tiers count up from 1 without a gap.
    for (const auto& c : p.cables) {
      for (const auto& [sw, nic] : {std::pair{c.a, c.b}, std::pair{c.b, c.a}}) {
        if (kinds[sw] == NodeKind::kSwitch && kinds[nic] == NodeKind::kNic && tiers[sw] != 1) {
          throw_input(fmt::format("switch `{}` has tier {} but is cabled to NIC `{}`: a switch "
                                  "NICs are cabled to is a ToR, tier 1",
                                  p.nodes[sw].id, tiers[sw], p.nodes[nic].id),
                      at_node(sw, "tier"), "give it tier=1, or cable the NIC to a ToR");
        }
      }
    }
    std::vector<std::size_t> first_of_tier(17, n);
    for (std::size_t v = 0; v < n; ++v) {
      if (kinds[v] == NodeKind::kSwitch && first_of_tier[tiers[v]] == n) first_of_tier[tiers[v]] = v;
    }
    for (int t = 1; t < 16; ++t) {
      if (first_of_tier[t] != n) continue;
      for (int above = t + 1; above <= 16; ++above) {
        if (first_of_tier[above] == n) continue;
        const std::size_t v = first_of_tier[above];
        throw_input(fmt::format("switch `{}` has tier {} but no switch has tier {}: tiers count "
                                "up from 1 (the ToRs) without a gap",
                                p.nodes[v].id, above, t),
                    at_node(v, "tier"));
      }
    }
  }
  if (tiers_given == 0 && switches > 0) {
    const std::vector<int> dist = infer_tiers(kinds, p);
    for (std::size_t v = 0; v < n; ++v) {
      if (kinds[v] != NodeKind::kSwitch) continue;
      if (dist[v] == std::numeric_limits<int>::max()) {
        throw_input(fmt::format("switch `{}` is not connected to any NIC, so its tier is unknown",
                                p.nodes[v].id),
                    at_node(v, "tier"), "give every switch a tier");
      }
      tiers[v] = dist[v];
    }
  }

  // Cables: speeds, latencies, and which kinds may be joined.
  struct Cable {
    std::size_t a, b;
    double Bps;
    std::optional<double> latency_ns, back_ns;
  };
  std::vector<Cable> cables;
  for (const auto& c : p.cables) {
    const std::string& an = p.nodes[c.a].id;
    const std::string& bn = p.nodes[c.b].id;
    const auto gbps = parse_number(c.attrs.gbps);
    if (!gbps || *gbps <= 0) {
      throw_input(trim(c.attrs.gbps).empty()
                      ? fmt::format("cable {} - {} has no gbps", an, bn)
                      : fmt::format("cable {} - {}: gbps must be a positive number, got `{}`", an,
                                    bn, clip_name(c.attrs.gbps)),
                  at_cable(c, "gbps"));
    }
    if (*gbps < 1e-3 || *gbps > limits::kMaxCableGbps) {
      throw_input(fmt::format("cable {} - {}: gbps {} is outside 0.001 to {} (1 Mb/s to 100 Tb/s)",
                              an, bn, clip_name(c.attrs.gbps), limits::kMaxCableGbps),
                  at_cable(c, "gbps"));
    }
    Cable out{c.a, c.b, *gbps * 1e9 / 8.0, std::nullopt, std::nullopt};
    for (const auto& [raw, field, slot] :
         {std::tuple{&c.attrs.latency_ns, "latency_ns", &out.latency_ns},
          std::tuple{&c.attrs.latency_back_ns, "latency_back_ns", &out.back_ns}}) {
      if (trim(*raw).empty()) continue;
      const auto v = parse_number(*raw);
      if (!v || *v < 0 || *v >= limits::kMaxCableLatency_ns) {
        throw_input(fmt::format("cable {} - {}: {} must be a number from 0 to below 1e9 (1 s), "
                                "got `{}`",
                                an, bn, field, clip_name(*raw)),
                    at_cable(c, field));
      }
      *slot = *v;
    }
    const NodeKind ka = kinds[c.a];
    const NodeKind kb = kinds[c.b];
    const auto is = [&](NodeKind x, NodeKind y) {
      return (ka == x && kb == y) || (ka == y && kb == x);
    };
    const bool ok =
        is(NodeKind::kGpu, NodeKind::kNvSwitch) || is(NodeKind::kGpu, NodeKind::kNic) ||
        is(NodeKind::kNic, NodeKind::kSwitch) ||
        (ka == NodeKind::kSwitch && kb == NodeKind::kSwitch && tiers[c.a] != tiers[c.b]);
    if (!ok) {
      const bool same_tier = ka == NodeKind::kSwitch && kb == NodeKind::kSwitch;
      throw_input(same_tier ? fmt::format("cable {} - {} joins two switches of tier {}; routing "
                                          "is up/down, so cables go between tiers",
                                          an, bn, tiers[c.a])
                            : fmt::format("cable {} - {} joins a {} and a {}; cables join "
                                          "gpu-nvswitch, gpu-nic, nic-switch or switches of "
                                          "different tiers",
                                          an, bn, p.nodes[c.a].kind, p.nodes[c.b].kind),
                  at_cable(c, same_tier ? "tier" : "kind"));
    }
    const bool same_server = servers[c.a] == servers[c.b];
    if ((is(NodeKind::kGpu, NodeKind::kNvSwitch) || is(NodeKind::kGpu, NodeKind::kNic)) &&
        !same_server) {
      throw_input(fmt::format("cable {} - {} joins devices of servers {} and {}", an, bn,
                              servers[c.a], servers[c.b]),
                  at_cable(c, "server"));
    }
    cables.push_back(out);
  }

  // GPUs by server, then file order; the other nodes in file order.
  std::vector<std::size_t> order(n);
  for (std::size_t v = 0; v < n; ++v) order[v] = v;
  const auto rank = [&](std::size_t v) { return static_cast<int>(kinds[v]); };
  std::stable_sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) {
    if (rank(x) != rank(y)) return rank(x) < rank(y);
    return kinds[x] == NodeKind::kGpu && servers[x] < servers[y];
  });
  GraphBuilder b(base.nic_latency_s, base.switch_latency_s);
  std::vector<NodeId> id(n, kNoNode);
  for (const std::size_t v : order) {
    switch (kinds[v]) {
      case NodeKind::kGpu:
        id[v] = b.add_gpu(servers[v]);
        break;
      case NodeKind::kNvSwitch:
        id[v] = b.add_nvswitch(servers[v]);
        break;
      case NodeKind::kNic:
        id[v] = b.add_nic(servers[v]);
        break;
      case NodeKind::kSwitch:
        id[v] = b.add_switch(tiers[v]);
        break;
    }
    b.set_name(id[v], p.nodes[v].id);
  }
  const auto ns = [](double v) { return TimePs::from_seconds(v * 1e-9); };
  std::vector<int> cable_count(n, 0);
  for (const Cable& c : cables) {
    const LinkId l = b.add_cable(id[c.a], id[c.b], c.Bps);
    if (c.latency_ns) b.set_latency(l, ns(*c.latency_ns));
    if (c.back_ns || c.latency_ns) b.set_latency(l + 1, ns(c.back_ns.value_or(*c.latency_ns)));
    ++cable_count[c.a];
    ++cable_count[c.b];
  }
  int gpus = 0;
  std::map<int, int> gpus_per_server, nics_per_server;
  for (std::size_t v = 0; v < n; ++v) {
    if (kinds[v] == NodeKind::kGpu) {
      ++gpus;
      ++gpus_per_server[servers[v]];
      if (cable_count[v] == 0) {
        throw_input(fmt::format("GPU `{}` has no NVSwitch or NIC cable", p.nodes[v].id),
                    at_node(v, "kind"));
      }
    }
    if (kinds[v] == NodeKind::kNic) ++nics_per_server[servers[v]];
  }
  if (gpus == 0) throw_input("the fabric has no GPU", {name, 0, "kind"});
  ClusterSpec spec = base;
  spec.name = "custom";
  spec.gpus_per_node = 0;
  for (const auto& [s, count] : gpus_per_server)
    spec.gpus_per_node = std::max(spec.gpus_per_node, count);
  spec.nics_per_node = 0;
  for (const auto& [s, count] : nics_per_server)
    spec.nics_per_node = std::max(spec.nics_per_node, count);
  return b.finish(spec, "fabric file " + name);
}

ClusterGraph read_fabric_file(const std::string& path, const ClusterSpec& base) {
  const std::string text = read_input_file(path, "fabric file", limits::kMaxFabricBytes);
  const std::size_t dot = path.rfind('.');
  const std::string ext = dot == std::string::npos ? "" : path.substr(dot + 1);
  FabricFormat format;
  if (ext == "graphml" || ext == "xml") {
    format = FabricFormat::kGraphMl;
  } else if (ext == "dot" || ext == "gv") {
    format = FabricFormat::kGraphViz;
  } else {
    throw_input("unknown fabric file type `." + ext + "`", {path, 0, ""},
                "use .graphml (GraphML) or .dot/.gv (GraphViz)");
  }
  return read_fabric_text(text, format, path, base);
}

void write_graphviz(const ClusterGraph& graph, std::ostream& out) {
  const BoostGraph& bg = graph.boost_graph().graph;
  // One edge per cable: its first (even) link.
  const auto first_direction = [&bg](BoostGraph::edge_descriptor e) { return bg[e].id % 2 == 0; };
  const boost::filtered_graph<BoostGraph, std::function<bool(BoostGraph::edge_descriptor)>> cables(
      bg, first_direction);
  const auto names = boost::make_function_property_map<std::size_t, std::string>(
      [&graph](std::size_t v) { return graph.node_name(static_cast<NodeId>(v)); });
  const auto kind_name = [](NodeKind k) {
    switch (k) {
      case NodeKind::kGpu:
        return "gpu";
      case NodeKind::kNvSwitch:
        return "nvswitch";
      case NodeKind::kNic:
        return "nic";
      case NodeKind::kSwitch:
        break;
    }
    return "switch";
  };
  const auto node_writer = [&](std::ostream& os, std::size_t v) {
    const NodeInfo& info = graph.node(static_cast<NodeId>(v));
    if (info.kind == NodeKind::kSwitch) {
      os << fmt::format("[kind=switch, tier={}]", info.tier);
    } else {
      os << fmt::format("[kind={}, server={}]", kind_name(info.kind), info.server);
    }
  };
  const auto cable_writer = [&](std::ostream& os, BoostGraph::edge_descriptor e) {
    const LinkId l = bg[e].id;
    const double there = graph.link_latency(l).ps * 1e-3;
    const double back = graph.link_latency(l + 1).ps * 1e-3;
    os << fmt::format("[gbps={}, latency_ns={}", graph.link_capacity_Bps(l) * 8 / 1e9, there);
    if (back != there) os << fmt::format(", latency_back_ns={}", back);
    os << "]";
  };
  const auto graph_writer = [&graph](std::ostream& os) {
    os << fmt::format("// {}: {} GPUs, {} servers (trainsim topo --export dot)\n",
                      graph.description(), graph.gpu_count(), graph.server_count());
  };
  boost::write_graphviz(out, cables, node_writer, cable_writer, graph_writer, names);
}

ClusterGraph cluster_graph(const ClusterSpec& c) {
  if (c.fabric.file.empty()) return build_cluster_graph(c);
  ClusterGraph g = read_fabric_file(c.fabric.file, c);
  if (g.gpu_count() < c.gpus) {
    throw_input(fmt::format("the fabric holds {} GPUs, fewer than cluster.gpus = {}",
                            g.gpu_count(), c.gpus),
                {c.fabric.file, 0, "cluster.fabric.file"},
                "use a fabric with enough GPUs, or fewer cluster.gpus");
  }
  if (g.spec().gpus_per_node != c.gpus_per_node) {
    throw_input(fmt::format("the fabric's servers hold {} GPUs each; the cluster's {} "
                            "(cluster.gpus_per_node), by which the parallel layout places ranks",
                            g.spec().gpus_per_node, c.gpus_per_node),
                {c.fabric.file, 0, "cluster.fabric.file"},
                "set cluster.gpus_per_node to the fabric's");
  }
  return g;
}

}  // namespace trainsim::topo
