// Fabric files (topology/fabric_file.h): the GraphML example, GraphViz, the writer's round trip,
// tier inference, and errors that name the line and the attribute.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "sim/core/error.h"
#include "topology/clos.h"
#include "topology/fabric_file.h"
#include "topology/routing.h"
#include "topology/stats.h"

namespace trainsim::topo {
namespace {

ClusterSpec base() {
  ClusterSpec c;
  c.gpu.name = "a100-80gb";
  c.nic_latency_s = 0.5e-6;
  c.switch_latency_s = 0.6e-6;
  return c;
}

Error read_error(std::string_view text, FabricFormat format) {
  try {
    read_fabric_text(text, format, "f", base());
  } catch (const Error& e) {
    std::printf("%s\n", e.what());
    return e;
  }
  ADD_FAILURE() << "no error for:\n" << text;
  return Error(ErrorKind::kRuntime, "none");
}

// The example: 4 servers x 2 GPUs, each NIC on two ToRs (planes a and b), each plane with one
// spine, 2 parallel links per ToR-spine pair. gpu0 -> gpu4 (other ToR pair): 2 planes x 2 links
// up x 2 links down = 8 paths; gpu0 -> gpu2 (same ToR pair): one path per plane.
TEST(FabricFile, ReadsTheGraphMlExample) {
  const std::string path =
      std::string(TRAINSIM_SOURCE_DIR) + "/scenarios/examples/dual-plane-8gpu.graphml";
  const ClusterGraph g = read_fabric_file(path, base());
  EXPECT_EQ(g.gpu_count(), 8);
  EXPECT_EQ(g.server_count(), 4);
  EXPECT_EQ(g.nic_count(), 8);
  EXPECT_EQ(g.switches_per_tier(), (std::vector<int>{4, 2}));
  EXPECT_EQ(g.spec().gpus_per_node, 2);
  EXPECT_EQ(g.node_name(g.gpu_node(0)), "gpu0");
  EXPECT_EQ(g.node_name(g.switch_node(2, 1)), "spineb");
  Router r(g, RoutingConfig{});
  EXPECT_EQ(r.path_count(0, 4), 8u);
  EXPECT_EQ(r.path_count(0, 2), 2u);
  EXPECT_EQ(r.path_count(0, 1), 1u);  // NVLink
  std::vector<LinkId> p;
  ASSERT_TRUE(r.route({0, 4, 0}, p));
  EXPECT_EQ(p.size(), 6u);  // gpu, nic, tor, spine, tor, nic, gpu
  // Stated latencies: 600 ns on the NIC-ToR and ToR-spine cables both ways.
  TimePs total{0};
  for (const LinkId l : p) total += g.link_latency(l);
  EXPECT_EQ(total.ps, 500'000 + 4 * 600'000);  // gpu->nic enters a NIC (default 0.5 us)
  const FabricSummary s = summarize_fabric(g);
  EXPECT_DOUBLE_EQ(s.tiers[0].oversubscription, 16 * 200.0 / (8 * 400.0));
  // Injection: each NIC takes 200 G from its GPU and has 2 x 200 G to the ToRs; it injects the
  // lesser, 200 G (counting both ToR cables gave 3.2 Tb/s for 8 GPUs of 200 G).
  EXPECT_DOUBLE_EQ(s.injection_Bps, 8 * 200e9 / 8);
  EXPECT_DOUBLE_EQ(s.bisection_Bps, 8 * 200e9 / 8 / 2);
}

// GraphViz with tiers left out: a switch's tier is its distance from the nearest NIC.
TEST(FabricFile, GraphVizWithInferredTiers) {
  const char* dot = R"(graph leafspine {
  // two servers of one GPU
  g0 [kind=gpu, server=0];  n0 [kind=nic, server=0];
  g1 [kind=gpu, server=1];  n1 [kind=nic, server=1];
  l0 [kind=switch]; l1 [kind=switch]; s0 [kind=switch];
  g0 -- n0 [gbps=400]; g1 -- n1 [gbps=400];
  n0 -- l0 [gbps=400]; n1 -- l1 [gbps=400];
  l0 -- s0 [gbps=400, latency_ns=1000]; l1 -- s0 [gbps=400];
})";
  const ClusterGraph g = read_fabric_text(dot, FabricFormat::kGraphViz, "leafspine.dot", base());
  EXPECT_EQ(g.switches_per_tier(), (std::vector<int>{2, 1}));
  Router r(g, RoutingConfig{});
  std::vector<LinkId> p;
  ASSERT_TRUE(r.route({0, 1, 0}, p));
  ASSERT_EQ(p.size(), 6u);
  EXPECT_EQ(g.link_name(p[2]), "l0->s0");
  EXPECT_EQ(g.link_latency(p[2]).ps, 1'000'000);
  EXPECT_EQ(g.link_latency(p[3]).ps, 600'000);  // default: entering a switch
  EXPECT_DOUBLE_EQ(g.link_capacity_Bps(p[2]), 50e9);
}

// write_graphviz then read: the same counts, capacities and equal-cost path sets.
TEST(FabricFile, WriterRoundTrip) {
  ClusterSpec c = base();
  c.gpu.nvlink_Bps = 300e9;
  c.gpus = 256;
  c.nic_Gbps = 200;
  c.fabric.switch_radix = 16;
  c.fabric.switch_port_Gbps = 400;
  c.fabric.port_split = 2;
  const ClusterGraph g = build_cluster_graph(c);
  std::ostringstream out;
  write_graphviz(g, out);
  const ClusterGraph back = read_fabric_text(out.str(), FabricFormat::kGraphViz, "x.dot", c);
  EXPECT_EQ(back.gpu_count(), g.gpu_count());
  EXPECT_EQ(back.server_count(), g.server_count());
  EXPECT_EQ(back.link_count(), g.link_count());
  EXPECT_EQ(back.switches_per_tier(), g.switches_per_tier());
  std::vector<double> a = g.link_capacity_Bps(), b = back.link_capacity_Bps();
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  EXPECT_EQ(a, b);
  Router ra(g, RoutingConfig{}), rb(back, RoutingConfig{});
  for (const auto& [s, d] : {std::pair{0, 255}, std::pair{0, 9}, std::pair{3, 200}}) {
    EXPECT_EQ(ra.path_count(s, d), rb.path_count(s, d)) << s << "->" << d;
    // Node names and next-hop order survive the round trip, so ECMP picks the same path.
    std::vector<LinkId> pa, pb;
    ASSERT_TRUE(ra.route({s, d, 3}, pa));
    ASSERT_TRUE(rb.route({s, d, 3}, pb));
    ASSERT_EQ(pa.size(), pb.size());
    for (std::size_t i = 0; i < pa.size(); ++i) {
      EXPECT_EQ(g.link_name(pa[i]), back.link_name(pb[i]));
      EXPECT_EQ(g.link_latency(pa[i]), back.link_latency(pb[i]));
    }
  }
}

// A GraphViz leaf-spine of one cable per pair, with `attrs` on the ToR-spine cable l0 -- s0 (line 6).
std::string leafspine(const std::string& attrs) {
  return "graph f {\n"
         "  g0 [kind=gpu, server=0];  n0 [kind=nic, server=0];\n"
         "  g1 [kind=gpu, server=1];  n1 [kind=nic, server=1];\n"
         "  l0 [kind=switch]; l1 [kind=switch]; s0 [kind=switch];\n"
         "  g0 -- n0 [gbps=400]; g1 -- n1 [gbps=400]; n0 -- l0 [gbps=400]; n1 -- l1 [gbps=400];\n"
         "  l0 -- s0 [" + attrs + "];\n"
         "  l1 -- s0 [gbps=400];\n"
         "}\n";
}

double l0_s0_gbps(const ClusterGraph& g) {
  for (LinkId l = 0; l < g.link_count(); ++l) {
    if (g.link_name(l) == "l0->s0") return g.link_capacity_Bps(l) * 8 / 1e9;
  }
  return -1;
}

// Boost's GraphViz reader cuts an unquoted value where DOT's number token ends (`4e2` is 4 and
// an attribute `e2`): the whole text of a value is the number, exponents included, and anything
// else is refused with the line and the attribute.
TEST(FabricFile, GraphVizValuesAreReadWhole) {
  for (const auto& [attrs, gbps] :
       {std::pair{"gbps=4e2", 400.0}, std::pair{"gbps=.5e3", 500.0}, std::pair{"gbps=\"4e2\"", 400.0},
        std::pair{"gbps = 1.5E2 , latency_ns=2e3", 150.0}, std::pair{"gbps=400", 400.0}}) {
    const ClusterGraph g = read_fabric_text(leafspine(attrs), FabricFormat::kGraphViz, "f", base());
    EXPECT_DOUBLE_EQ(l0_s0_gbps(g), gbps) << attrs;
  }
  const ClusterGraph g =
      read_fabric_text(leafspine("gbps=400 latency_ns=2e3"), FabricFormat::kGraphViz, "f", base());
  for (LinkId l = 0; l < g.link_count(); ++l) {
    if (g.link_name(l) == "l0->s0") {
      EXPECT_EQ(g.link_latency(l).ps, 2'000'000);
    }
  }
  for (const char* bad : {"gbps=2x", "gbps=400abc", "gbps=4e2e"}) {
    const Error e = read_error(leafspine(bad), FabricFormat::kGraphViz);
    EXPECT_EQ(e.where().line, 6) << bad;
    EXPECT_EQ(e.where().field, "gbps") << bad;
    EXPECT_NE(std::string(e.what()).find("gbps must be a positive number, got `" +
                                         std::string(bad).substr(5) + "`"),
              std::string::npos)
        << e.what();
  }
  const Error tiny = read_error(leafspine("gbps=1e-9"), FabricFormat::kGraphViz);
  EXPECT_EQ(tiny.where().line, 6);
  EXPECT_NE(std::string(tiny.what()).find("gbps 1e-9 is outside 0.001"), std::string::npos)
      << tiny.what();
  const Error lat = read_error(leafspine("gbps=400, latency_ns=5us"), FabricFormat::kGraphViz);
  EXPECT_EQ(lat.where().field, "latency_ns");
  EXPECT_NE(std::string(lat.what()).find("got `5us`"), std::string::npos) << lat.what();
}

// An attribute trainsim does not read, one that does not fit the element, and one given twice
// are refused by line and name (they were dropped, or the last one kept, without a word).
TEST(FabricFile, UnknownMisplacedAndRepeatedAttributesAreRefused) {
  const auto refused = [](const std::string& text, FabricFormat format, int line,
                          const std::string& field, const std::string& says) {
    const Error e = read_error(text, format);
    EXPECT_EQ(e.kind(), ErrorKind::kInput);
    EXPECT_EQ(e.where().line, line) << e.what();
    EXPECT_EQ(e.where().field, field) << e.what();
    EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    return std::string(e.what()) + " " + e.hint();
  };
  const std::string typo = refused(leafspine("gbps=400, latency=600000"), FabricFormat::kGraphViz,
                                   6, "latency", "cable l0 - s0: unknown attribute `latency`");
  EXPECT_NE(typo.find("did you mean `latency_ns`?"), std::string::npos) << typo;
  refused(leafspine("gbps=400, foo=bar"), FabricFormat::kGraphViz, 6, "foo",
          "unknown attribute `foo`");
  refused(leafspine("gbps=400, gbps=100"), FabricFormat::kGraphViz, 6, "gbps",
          "attribute `gbps` is given twice");
  refused(leafspine("gbps=400][gbps=100"), FabricFormat::kGraphViz, 6, "gbps",
          "attribute `gbps` is given twice");
  refused(leafspine("gbps=400, kind=nic"), FabricFormat::kGraphViz, 6, "kind",
          "`kind` is a node attribute, not an edge's");
  std::string text = leafspine("gbps=400");
  text.replace(text.find("g1 [kind=gpu, server=1]"), 23, "g1 [kind=gpu, server=1, tier=2]");
  refused(text, FabricFormat::kGraphViz, 3, "tier", "node `g1` (gpu): `tier` applies to switches");
  text = leafspine("gbps=400");
  text.replace(text.find("s0 [kind=switch]"), 16, "s0 [kind=switch, server=3]");
  refused(text, FabricFormat::kGraphViz, 4, "server", "node `s0` (switch): `server` applies to");
  text = leafspine("gbps=400");
  text.replace(text.find("l0 [kind=switch]"), 16, "l0 [kind=switch, gbps=400]");
  refused(text, FabricFormat::kGraphViz, 4, "gbps", "`gbps` is an edge (cable) attribute");
  text = leafspine("gbps=400");
  text.insert(text.find("  g0"), "  rankdir=LR;\n");
  refused(text, FabricFormat::kGraphViz, 2, "rankdir", "not a graph attribute trainsim reads");
  // A default that does not fit a node is not that node's: `node [server=0]` before switches.
  text = leafspine("gbps=400");
  text.insert(text.find("  l0"), "  node [server=0];\n");
  EXPECT_NO_THROW(read_fabric_text(text, FabricFormat::kGraphViz, "f", base()));

  // GraphML: keys are checked where their data is.
  const auto graphml = [](const std::string& keys, const std::string& edge_data) {
    return "<?xml version=\"1.0\"?>\n"
           "<graphml>\n"
           "  <key id=\"k\" for=\"node\" attr.name=\"kind\" attr.type=\"string\"/>\n"
           "  <key id=\"s\" for=\"node\" attr.name=\"server\" attr.type=\"int\"/>\n"
           "  <key id=\"g\" for=\"edge\" attr.name=\"gbps\" attr.type=\"double\"/>\n" +
           keys +
           "  <graph edgedefault=\"undirected\">\n"
           "    <node id=\"a\"><data key=\"k\">gpu</data><data key=\"s\">0</data></node>\n"
           "    <node id=\"b\"><data key=\"k\">nic</data><data key=\"s\">0</data></node>\n"
           "    <edge source=\"a\" target=\"b\"><data key=\"g\">400</data>" + edge_data +
           "</edge>\n"
           "  </graph>\n"
           "</graphml>\n";
  };
  EXPECT_NO_THROW(read_fabric_text(graphml("", ""), FabricFormat::kGraphMl, "f", base()));
  refused(graphml("", "<data key=\"latency\">600</data>"), FabricFormat::kGraphMl, 9, "latency",
          "<data key=\"latency\"> names no declared <key>");
  refused(graphml("  <key id=\"l\" for=\"edge\" attr.name=\"latency\" attr.type=\"double\"/>\n",
                  "<data key=\"l\">600</data>"),
          FabricFormat::kGraphMl, 10, "latency", "cable a - b: unknown attribute `latency`");
  refused(graphml("", "<data key=\"g\">100</data>"), FabricFormat::kGraphMl, 9, "gbps",
          "cable a - b: attribute `gbps` is given twice");
  refused(graphml("", "<data key=\"k\">gpu</data>"), FabricFormat::kGraphMl, 9, "kind",
          "`kind` is a node attribute, not an edge's");
  // A key without attr.type is a string, as GraphML defines it.
  const ClusterGraph typed = read_fabric_text(
      graphml("  <key id=\"l\" for=\"edge\" attr.name=\"latency_ns\"/>\n", "<data key=\"l\">700</data>"),
      FabricFormat::kGraphMl, "f", base());
  EXPECT_EQ(typed.link_latency(0).ps, 700'000);
}

// `strict` merges parallel edges, and every edge is one cable: refused, not merged.
TEST(FabricFile, StrictGraphsAreRefused) {
  std::string text = leafspine("gbps=400");
  text.insert(text.find("  l1 -- s0"), "  l0 -- s0 [gbps=400];\n");
  const ClusterGraph g = read_fabric_text(text, FabricFormat::kGraphViz, "f", base());
  EXPECT_EQ(g.link_count(), 2 * 7);  // 2 GPU-NIC, 2 NIC-ToR, 3 ToR-spine cables (two l0 -- s0)
  const Error e = read_error("strict " + text, FabricFormat::kGraphViz);
  EXPECT_EQ(e.where().line, 1);
  EXPECT_EQ(e.where().field, "strict");
  EXPECT_NE(std::string(e.what()).find("`strict` graph merges parallel edges"), std::string::npos);
  EXPECT_EQ(read_error("\n/* x */ STRICT digraph f {}\n", FabricFormat::kGraphViz).where().line, 2);
}

// Errors about a node name the node's own line (a node at the start of its line was reported
// on the line before); a node declared twice is named as such, with both lines.
TEST(FabricFile, NodeErrorsNameTheNodesLine) {
  Error e = read_error("graph f {\ng0 [kind=gpu, server=0];\nb [kind=router];\n}",
                       FabricFormat::kGraphViz);
  EXPECT_EQ(e.where().line, 3) << e.what();
  e = read_error("graph f {\ng0 [kind=gpu, server=0];\n}", FabricFormat::kGraphViz);
  EXPECT_EQ(e.where().line, 2) << e.what();  // GPU `g0` has no cable
  EXPECT_NE(std::string(e.what()).find("GPU `g0` has no NVSwitch or NIC cable"), std::string::npos);
  std::string text = leafspine("gbps=400");
  text.insert(text.find("  l1 -- s0"), "  n0 [kind=nic, server=1];\n");
  e = read_error(text, FabricFormat::kGraphViz);
  EXPECT_EQ(e.where().line, 7) << e.what();
  EXPECT_EQ(e.where().field, "n0") << e.what();
  EXPECT_NE(std::string(e.what()).find("node `n0` is declared twice (lines 2 and 7)"),
            std::string::npos)
      << e.what();
}

// Given tiers must agree with the cabling: NICs are cabled to ToRs (tier 1), and tiers count up
// from 1 without a gap (a tier-3 switch cabled to NICs was read as a 3-tier fabric).
TEST(FabricFile, TiersThatContradictTheCablingAreRefused) {
  const auto fabric = [](const std::string& t0, const std::string& t1) {
    return "graph f {\n"
           "  g0 [kind=gpu, server=0]; n0 [kind=nic, server=0];\n"
           "  t0 [kind=switch, tier=" + t0 + "];\n"
           "  t1 [kind=switch, tier=" + t1 + "];\n"
           "  g0 -- n0 [gbps=400]; n0 -- t0 [gbps=400]; t0 -- t1 [gbps=400];\n"
           "}\n";
  };
  EXPECT_NO_THROW(read_fabric_text(fabric("1", "2"), FabricFormat::kGraphViz, "f", base()));
  Error e = read_error(fabric("3", "1"), FabricFormat::kGraphViz);
  EXPECT_EQ(e.where().line, 3);
  EXPECT_EQ(e.where().field, "tier");
  EXPECT_NE(std::string(e.what()).find("switch `t0` has tier 3 but is cabled to NIC `n0`"),
            std::string::npos)
      << e.what();
  e = read_error(fabric("1", "3"), FabricFormat::kGraphViz);
  EXPECT_EQ(e.where().line, 4);
  EXPECT_NE(std::string(e.what()).find("switch `t1` has tier 3 but no switch has tier 2"),
            std::string::npos)
      << e.what();
}

TEST(FabricFile, ErrorsNameTheLineAndTheAttribute) {
  {
    const Error e = read_error(R"(graph f {
  g0 [kind=gpu, server=0];
  n0 [kind=nic, server=0];
  t0 [kind=switch, tier=1];
  g0 -- n0 [gbps=fast];
  n0 -- t0 [gbps=100];
})",
                               FabricFormat::kGraphViz);
    EXPECT_EQ(e.kind(), ErrorKind::kInput);
    EXPECT_EQ(e.where().line, 5);
    EXPECT_EQ(e.where().field, "gbps");
    EXPECT_NE(std::string(e.what()).find("f:5: `gbps`: cable g0 - n0: gbps must be a positive "
                                         "number, got `fast`"),
              std::string::npos)
        << e.what();
  }
  {
    const Error e = read_error("digraph f {\n  a [kind=gpu, server=0];\n  b [kind=router];\n}",
                               FabricFormat::kGraphViz);
    EXPECT_EQ(e.where().line, 3);
    EXPECT_EQ(e.where().field, "kind");
    EXPECT_NE(std::string(e.what()).find("unknown kind `router`"), std::string::npos);
  }
  {
    const Error e = read_error("graph f {\n  a [kind=gpu];\n}", FabricFormat::kGraphViz);
    EXPECT_EQ(e.where().line, 2);
    EXPECT_EQ(e.where().field, "server");
  }
  {
    const Error e = read_error(
        "graph f {\n  a [kind=gpu, server=0];\n  t [kind=switch, tier=1];\n  a -- t [gbps=1];\n}",
        FabricFormat::kGraphViz);
    EXPECT_EQ(e.where().line, 4);
    EXPECT_EQ(e.where().field, "kind");
    EXPECT_NE(std::string(e.what()).find("joins a gpu and a switch"), std::string::npos);
  }
  {
    const Error e = read_error(
        "graph f {\n a [kind=switch, tier=1];\n b [kind=switch, tier=1];\n a -- b [gbps=1];\n}",
        FabricFormat::kGraphViz);
    EXPECT_EQ(e.where().line, 4);
    EXPECT_EQ(e.where().field, "tier");
  }
  {
    const Error e = read_error("graph f {\n a [kind=switch, tier=1];\n b [kind=switch];\n}",
                               FabricFormat::kGraphViz);
    EXPECT_EQ(e.where().line, 3);
    EXPECT_EQ(e.where().field, "tier");
  }
  {
    const Error e = read_error("graph f {\n  a [kind=gpu, server=0];\n  b [kind=nic, server=0;\n}",
                               FabricFormat::kGraphViz);
    EXPECT_NE(std::string(e.what()).find("not valid GraphViz"), std::string::npos) << e.what();
    EXPECT_EQ(e.where().line, 4) << e.what();  // the unclosed list ends at the brace
  }
  {
    const Error e = read_error(R"(<?xml version="1.0"?>
<graphml>
  <key id="k" for="node" attr.name="kind" attr.type="string"/>
  <graph edgedefault="undirected">
    <node id="a"><data key="k">gpu</data>
  </graph>
</graphml>)",
                               FabricFormat::kGraphMl);
    EXPECT_NE(std::string(e.what()).find("not valid GraphML"), std::string::npos) << e.what();
    EXPECT_GT(e.where().line, 0) << e.what();
  }
  {
    const Error e = read_error(R"(<?xml version="1.0"?>
<graphml>
  <key id="k" for="node" attr.name="kind" attr.type="string"/>
  <key id="s" for="node" attr.name="server" attr.type="int"/>
  <graph edgedefault="undirected">
    <node id="a"><data key="k">gpu</data><data key="s">zero</data></node>
  </graph>
</graphml>)",
                               FabricFormat::kGraphMl);
    EXPECT_EQ(e.where().line, 6) << e.what();
    EXPECT_EQ(e.where().field, "server");
    EXPECT_NE(std::string(e.what()).find("got `zero`"), std::string::npos) << e.what();
  }
  EXPECT_THROW(read_fabric_file("no/such/file.graphml", base()), Error);
  EXPECT_THROW(read_fabric_file("scenarios/examples/llama3-8b-64xh100.yaml", base()), Error);
}

}  // namespace
}  // namespace trainsim::topo
