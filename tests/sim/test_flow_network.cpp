// sim/network: the max-min solver and the event-driven flow network.
//
// Expected results by hand (progressive filling: the link with the smallest fair share
// remaining/flows saturates first and freezes its flows):
//   dumbbell, bottleneck 6 shared by 2 then 3 flows        → 3 each, then 2 each
//   parking lot, capacities 1, 2, 3, long flow + 3 short     → long 0.5, short 0.5, 1.5, 2.5
//   triangle AB=10, BC=4, CA=6 with 5 flows (see the test)   → 5, 2, 2, 3, 3
//   per-flow bound 1 among 3 flows on a link of 10           → 1, 4.5, 4.5
//   incast 8 → 1 on a 25 GB/s downlink                       → 25/8 GB/s each
// Then: the solver against a brute-force reference on hundreds of random small networks, the
// incremental re-solve against a full re-solve, and the flow network's completion times, batches,
// byte conservation, determinism and link flaps (RTO = 4.096 µs · 2^t).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "sim/core/error.h"
#include "sim/core/rng.h"
#include "sim/core/simulation.h"
#include "sim/network/flow_network.h"
#include "sim/network/maxmin.h"

namespace trainsim::net {
namespace {

using topo::LinkId;
using Path = std::vector<LinkId>;

constexpr double kG = 1e9;

void expect_rates(const MaxMinSolver& s, const std::vector<FlowIndex>& flows,
                  const std::vector<double>& expected) {
  ASSERT_EQ(flows.size(), expected.size());
  for (std::size_t i = 0; i < flows.size(); ++i) {
    EXPECT_NEAR(s.rate(flows[i]), expected[i], 1e-9 * std::max(1.0, expected[i])) << "flow " << i;
  }
  EXPECT_EQ(s.check_invariants(), "");
}

// ---------------------------------------------------------------------------------------------
// Exact answers.

TEST(MaxMin, Dumbbell) {
  // Links: 0, 1 left access (10), 2 bottleneck (6), 3, 4 right access (10).
  MaxMinSolver s({10, 10, 6, 10, 10});
  const FlowIndex a = s.add_flow(Path{0, 2, 3});
  const FlowIndex b = s.add_flow(Path{1, 2, 4});
  s.solve();
  expect_rates(s, {a, b}, {3, 3});
  const FlowIndex c = s.add_flow(Path{0, 2, 4});
  // A flow on link 1 alone takes what b leaves of it.
  const FlowIndex d = s.add_flow(Path{1});
  s.solve();
  expect_rates(s, {a, b, c, d}, {2, 2, 2, 8});
  s.remove_flow(c);
  s.solve();
  expect_rates(s, {a, b, d}, {3, 3, 7});
}

TEST(MaxMin, ParkingLotWithUnequalCapacities) {
  // Link 0 (1) is the long flow's bottleneck: it and short flow 0 get 0.5; the other short flows
  // take what is left of links 1 and 2.
  MaxMinSolver s({1, 2, 3});
  const FlowIndex lng = s.add_flow(Path{0, 1, 2});
  const FlowIndex s0 = s.add_flow(Path{0});
  const FlowIndex s1 = s.add_flow(Path{1});
  const FlowIndex s2 = s.add_flow(Path{2});
  s.solve();
  expect_rates(s, {lng, s0, s1, s2}, {0.5, 0.5, 1.5, 2.5});
}

TEST(MaxMin, ParkingLotEqualCapacities) {
  MaxMinSolver s({1, 1, 1, 1});
  std::vector<FlowIndex> f{s.add_flow(Path{0, 1, 2, 3})};
  for (LinkId l = 0; l < 4; ++l) f.push_back(s.add_flow(Path{l}));
  s.solve();
  expect_rates(s, f, {0.5, 0.5, 0.5, 0.5, 0.5});
}

TEST(MaxMin, TriangleWithUnequalCapacities) {
  // Links: 0 = A→B (10), 1 = B→C (4), 2 = C→A (6).
  // f1 A→B, f2 B→C, f3 A→C via B, f4 C→A, f5 C→B via A.
  // Shares: AB 10/3, BC 4/2 = 2, CA 6/2 = 3 → BC first: f2 = f3 = 2. Then AB (10−2)/2 = 4,
  // CA 3 → CA: f4 = f5 = 3. Then AB: f1 = 10 − 2 − 3 = 5.
  MaxMinSolver s({10, 4, 6});
  const FlowIndex f1 = s.add_flow(Path{0});
  const FlowIndex f2 = s.add_flow(Path{1});
  const FlowIndex f3 = s.add_flow(Path{0, 1});
  const FlowIndex f4 = s.add_flow(Path{2});
  const FlowIndex f5 = s.add_flow(Path{2, 0});
  s.solve();
  expect_rates(s, {f1, f2, f3, f4, f5}, {5, 2, 2, 3, 3});
}

TEST(MaxMin, PerFlowBounds) {
  MaxMinSolver s({10});
  const FlowIndex a = s.add_flow(Path{0}, 1);
  const FlowIndex b = s.add_flow(Path{0});
  const FlowIndex c = s.add_flow(Path{0}, 7);  // above its share: the link decides
  s.solve();
  expect_rates(s, {a, b, c}, {1, 4.5, 4.5});
  s.set_flow_cap(a, 0);  // a stalled flow takes nothing
  s.solve();
  expect_rates(s, {a, b, c}, {0, 5, 5});
  s.set_flow_cap(c, 2);
  s.solve();
  expect_rates(s, {a, b, c}, {0, 8, 2});
}

TEST(MaxMin, IncastEightToOne) {
  // Senders' NIC links 0..7 (25 GB/s each), receiver downlink 8 (25 GB/s).
  std::vector<double> caps(9, 25 * kG);
  MaxMinSolver s(caps);
  std::vector<FlowIndex> flows;
  for (LinkId l = 0; l < 8; ++l) flows.push_back(s.add_flow(Path{l, 8}));
  s.solve();
  expect_rates(s, flows, std::vector<double>(8, 25 * kG / 8));
}

TEST(MaxMin, CapacityChangeAndZeroCapacity) {
  MaxMinSolver s({4, 4});
  const FlowIndex a = s.add_flow(Path{0, 1});
  const FlowIndex b = s.add_flow(Path{1});
  s.solve();
  expect_rates(s, {a, b}, {2, 2});
  s.set_link_capacity(0, 0);
  s.solve();
  expect_rates(s, {a, b}, {0, 4});
  s.set_link_capacity(0, 1);
  s.solve();
  expect_rates(s, {a, b}, {1, 3});
}

TEST(MaxMin, RejectsBadInput) {
  EXPECT_THROW(MaxMinSolver({1, -1}), Error);
  MaxMinSolver s({1, 1});
  EXPECT_THROW(s.add_flow(Path{}), Error);
  EXPECT_THROW(s.add_flow(Path{2}), Error);
  EXPECT_THROW(s.add_flow(Path{0}, -1), Error);
}

// ---------------------------------------------------------------------------------------------
// Brute-force reference: textbook progressive filling, one level at a time. All unfrozen rates
// rise together by the largest step no link or bound forbids; flows on saturated links or at
// their bound freeze. Written independently of the solver (no heap, no incremental state).

struct Instance {
  std::vector<double> capacity;
  std::vector<Path> paths;
  std::vector<double> caps;
};

std::vector<double> brute_force_max_min(const Instance& in) {
  const std::size_t n = in.paths.size();
  std::vector<double> rate(n, 0.0);
  std::vector<bool> frozen(n, false);
  const double eps = 1e-12;
  while (std::find(frozen.begin(), frozen.end(), false) != frozen.end()) {
    std::vector<double> used(in.capacity.size(), 0.0);
    std::vector<int> rising(in.capacity.size(), 0);
    for (std::size_t f = 0; f < n; ++f) {
      for (const LinkId l : in.paths[f]) {
        used[l] += rate[f];
        rising[l] += frozen[f] ? 0 : 1;
      }
    }
    double step = kUnlimited;
    for (std::size_t l = 0; l < in.capacity.size(); ++l) {
      if (rising[l] > 0) step = std::min(step, (in.capacity[l] - used[l]) / rising[l]);
    }
    for (std::size_t f = 0; f < n; ++f) {
      if (!frozen[f]) step = std::min(step, in.caps[f] - rate[f]);
    }
    step = std::max(step, 0.0);
    for (std::size_t f = 0; f < n; ++f) {
      if (!frozen[f]) rate[f] += step;
    }
    for (std::size_t f = 0; f < n; ++f) {
      if (frozen[f]) continue;
      if (in.caps[f] < kUnlimited && in.caps[f] - rate[f] <= eps * std::max(1.0, in.caps[f])) {
        frozen[f] = true;
      }
      for (const LinkId l : in.paths[f]) {
        // A path that lists a link k times puts k times its rate on it (a ring in lock step).
        double load = 0;
        for (std::size_t g = 0; g < n; ++g) {
          load += rate[g] * static_cast<double>(
                                std::count(in.paths[g].begin(), in.paths[g].end(), l));
        }
        if (in.capacity[l] - load <= eps * std::max(1.0, in.capacity[l])) frozen[f] = true;
      }
    }
  }
  return rate;
}

Instance random_instance(Rng& rng, int max_links, int max_flows) {
  Instance in;
  const int links = static_cast<int>(rng.uniform_int(1, max_links));
  const int flows = static_cast<int>(rng.uniform_int(1, max_flows));
  // Capacities from a small set so that ties (several links saturating at once) are common.
  const double levels[] = {1, 2, 3, 5, 8, 12.5};
  for (int l = 0; l < links; ++l) {
    in.capacity.push_back(rng.uniform_below(4) == 0 ? 0.5 + 10 * rng.uniform01()
                                                    : levels[rng.uniform_below(6)]);
  }
  for (int f = 0; f < flows; ++f) {
    const int hops = static_cast<int>(rng.uniform_int(1, std::min(4, links)));
    Path all(static_cast<std::size_t>(links));
    for (int l = 0; l < links; ++l) all[static_cast<std::size_t>(l)] = l;
    rng.shuffle(all.begin(), all.end());
    in.paths.emplace_back(all.begin(), all.begin() + hops);
    in.caps.push_back(rng.uniform_below(3) == 0 ? levels[rng.uniform_below(6)] / 2 : kUnlimited);
  }
  return in;
}

// The solver's rates of `ids` (flow f of `in` is ids[f]) against the textbook filling, and the
// max-min invariants.
void expect_brute_force_rates(const MaxMinSolver& s, const Instance& in,
                              const std::vector<FlowIndex>& ids, int trial) {
  const std::vector<double> expected = brute_force_max_min(in);
  for (std::size_t f = 0; f < ids.size(); ++f) {
    ASSERT_NEAR(s.rate(ids[f]), expected[f], 1e-9 * std::max(1.0, expected[f]))
        << "trial " << trial << " flow " << f;
  }
  ASSERT_EQ(s.check_invariants(), "") << "trial " << trial;
}

TEST(MaxMinProperty, MatchesBruteForceOnRandomSmallNetworks) {
  Rng rng(2024);
  for (int trial = 0; trial < 500; ++trial) {
    const Instance in = random_instance(rng, 8, 12);
    MaxMinSolver s(in.capacity);
    std::vector<FlowIndex> ids;
    for (std::size_t f = 0; f < in.paths.size(); ++f) {
      ids.push_back(s.add_flow(in.paths[f], in.caps[f]));
    }
    s.solve();
    expect_brute_force_rates(s, in, ids, trial);
    if (testing::Test::HasFatalFailure()) return;
  }
}

// The invariant checker must catch allocations that are not max-min: here, stale rates after a
// capacity or bound change that has not been solved yet.
TEST(MaxMinProperty, CheckerRejectsNonMaxMinAllocations) {
  MaxMinSolver s({10, 4});
  s.add_flow(Path{0});                         // 6
  const FlowIndex b = s.add_flow(Path{0, 1});  // 4
  s.solve();
  EXPECT_EQ(s.check_invariants(), "");
  s.set_link_capacity(1, 2);  // b's 4 now overflows link 1
  EXPECT_NE(s.check_invariants().find("above its capacity"), std::string::npos);
  s.solve();  // b = 2, a = 8
  EXPECT_EQ(s.check_invariants(), "");
  s.set_link_capacity(0, 20);  // a could grow to 18: it has no bottleneck
  EXPECT_NE(s.check_invariants().find("no bottleneck"), std::string::npos);
  s.solve();
  s.set_flow_cap(b, 1);  // b is above its new bound
  EXPECT_NE(s.check_invariants().find("outside"), std::string::npos);
}

// The rates of `inc` equal a from-scratch solve of its live flows.
// Dense random networks for the level-restricted property tests: `links` links of capacity 1…12,
// and paths of 1 to 4 distinct links.
std::vector<double> random_capacities(Rng& rng, int links) {
  std::vector<double> capacity;
  for (int l = 0; l < links; ++l) capacity.push_back(1 + static_cast<double>(rng.uniform_below(12)));
  return capacity;
}

Path random_path(Rng& rng, int links) {
  Path all(static_cast<std::size_t>(links));
  for (int l = 0; l < links; ++l) all[static_cast<std::size_t>(l)] = l;
  rng.shuffle(all.begin(), all.end());
  return Path(all.begin(), all.begin() + 1 + static_cast<long>(rng.uniform_below(4)));
}

// Verified partial re-fills over the trials of a property test: both outcomes must occur, kept
// (a partial re-fill proved max-min) and given up (the full search ran instead).
struct VerifiedTally {
  std::int64_t verified = 0;
  std::int64_t fallbacks = 0;
  void add(const MaxMinSolver& s) {
    verified += s.verified_solves();
    fallbacks += s.verified_fallbacks();
  }
  void expect_both() const {
    EXPECT_GT(verified, 0);
    EXPECT_GT(fallbacks, 0);
  }
};

void expect_full_solve_rates(const MaxMinSolver& inc, const std::vector<double>& capacity,
                             const std::map<FlowIndex, std::pair<Path, double>>& live, int trial,
                             int op) {
  MaxMinSolver full(capacity);
  std::map<FlowIndex, FlowIndex> twin;
  for (const auto& [id, flow] : live) twin[id] = full.add_flow(flow.first, flow.second);
  full.solve_all();
  for (const auto& [id, other] : twin) {
    ASSERT_NEAR(inc.rate(id), full.rate(other), 1e-9 * std::max(1.0, full.rate(other)))
        << "trial " << trial << " op " << op;
  }
}

// Random changes the property tests mix: remove a flow, move a link's capacity by −3…+3 (at
// least 0.5), set a flow's bound to 0.25…6.
void remove_random_flow(Rng& rng, MaxMinSolver& s, std::map<FlowIndex, std::pair<Path, double>>& live) {
  auto it = live.begin();
  std::advance(it, static_cast<long>(rng.uniform_below(live.size())));
  s.remove_flow(it->first);
  live.erase(it);
}

void shift_random_capacity(Rng& rng, MaxMinSolver& s, std::vector<double>& capacity) {
  const LinkId l = static_cast<LinkId>(rng.uniform_below(capacity.size()));
  double& c = capacity[static_cast<std::size_t>(l)];
  c = std::max(0.5, c + static_cast<double>(rng.uniform_below(7)) - 3.0);
  s.set_link_capacity(l, c);
}

void rebound_random_flow(Rng& rng, MaxMinSolver& s, std::map<FlowIndex, std::pair<Path, double>>& live) {
  auto it = live.begin();
  std::advance(it, static_cast<long>(rng.uniform_below(live.size())));
  it->second.second = 0.25 * static_cast<double>(1 + rng.uniform_below(24));
  s.set_flow_cap(it->first, it->second.second);
}

// A path may list a link several times: a ring channel run in lock step is one flow over all
// its edges' links, and a switch link that two of its edges are routed over carries its rate
// twice (sim/collective/flow.h). By hand: link 0 (6 B/s) carries ring A twice and flow B once,
// 2·x_A + x_B ≤ 6 with x_A = x_B = 2. Then the case where lock step and edges as separate flows
// differ: ring R's edges cross link 0 (with b1, b2) and link 1 (with c). As one flow R is held to
// 6/3 = 2 by link 0 on every edge, and c gets 6 − 2 = 4 on link 1; as separate flows the edge on
// link 1 would take 3 and leave c 3.
// carries_flows(l), the dense byte per link that FlowNetwork reads to classify a group's links,
// follows the links' lists through random additions and removals (paths that repeat a link
// included): it is exactly flow_count_on(l) != 0 after every step.
TEST(MaxMin, CarriesFlowsFollowsTheLinksLists) {
  Rng rng(77);
  const int links = 12;
  MaxMinSolver s(std::vector<double>(links, 10.0));
  std::vector<FlowIndex> live;
  for (int step = 0; step < 2000; ++step) {
    if (live.empty() || rng.uniform_below(3) != 0) {
      Path p;
      const int hops = static_cast<int>(rng.uniform_int(1, 4));
      for (int h = 0; h < hops; ++h) p.push_back(static_cast<LinkId>(rng.uniform_below(links)));
      live.push_back(s.add_flow(p));
    } else {
      const std::size_t k = rng.uniform_below(live.size());
      s.remove_flow(live[k]);
      live[k] = live.back();
      live.pop_back();
    }
    if (rng.uniform_below(8) == 0) s.solve();
    for (LinkId l = 0; l < links; ++l) {
      ASSERT_EQ(s.carries_flows(l), s.flow_count_on(l) != 0) << "step " << step << " link " << l;
    }
  }
  for (const FlowIndex f : live) s.remove_flow(f);
  for (LinkId l = 0; l < links; ++l) EXPECT_FALSE(s.carries_flows(l));
}

TEST(MaxMin, RepeatedLinksCountOncePerCrossing) {
  MaxMinSolver s({6});
  const FlowIndex a = s.add_flow(Path{0, 0});
  const FlowIndex b = s.add_flow(Path{0});
  s.solve();
  EXPECT_DOUBLE_EQ(s.rate(a), 2.0);
  EXPECT_DOUBLE_EQ(s.rate(b), 2.0);
  EXPECT_EQ(s.check_invariants(), "");
  s.remove_flow(b);  // alone: 2·x_A ≤ 6
  s.solve();
  EXPECT_DOUBLE_EQ(s.rate(a), 3.0);

  MaxMinSolver r({6, 6});
  const FlowIndex ring = r.add_flow(Path{0, 1});
  r.add_flow(Path{0});
  r.add_flow(Path{0});
  const FlowIndex c = r.add_flow(Path{1});
  r.solve();
  EXPECT_DOUBLE_EQ(r.rate(ring), 2.0);
  EXPECT_DOUBLE_EQ(r.rate(c), 4.0);
  EXPECT_EQ(r.check_invariants(), "");
}

// Random networks whose paths repeat links, against the brute-force filling (which counts a
// link once per listing), and incremental changes against a full solve after every operation.
TEST(MaxMinProperty, RepeatedLinksMatchBruteForceAndFullResolve) {
  Rng rng(31);
  for (int trial = 0; trial < 200; ++trial) {
    Instance in;
    const int links = 1 + static_cast<int>(rng.uniform_below(6));
    in.capacity = random_capacities(rng, links);
    const int flows = 1 + static_cast<int>(rng.uniform_below(10));
    for (int f = 0; f < flows; ++f) {
      Path p;
      const int hops = 1 + static_cast<int>(rng.uniform_below(6));
      for (int h = 0; h < hops; ++h) p.push_back(static_cast<LinkId>(rng.uniform_below(links)));
      in.paths.push_back(p);
      in.caps.push_back(rng.uniform_below(4) == 0 ? 0.5 + static_cast<double>(rng.uniform_below(4))
                                                  : kUnlimited);
    }
    MaxMinSolver s(in.capacity);
    std::map<FlowIndex, std::pair<Path, double>> live;
    std::vector<FlowIndex> ids;
    for (std::size_t f = 0; f < in.paths.size(); ++f) {
      ids.push_back(s.add_flow(in.paths[f], in.caps[f]));
      live[ids.back()] = {in.paths[f], in.caps[f]};
    }
    s.solve();
    expect_brute_force_rates(s, in, ids, trial);
    if (testing::Test::HasFatalFailure()) return;
    for (int op = 0; op < 12 && !live.empty(); ++op) {
      const std::uint64_t kind = rng.uniform_below(4);
      if (kind == 0) {
        Path p;
        const int hops = 1 + static_cast<int>(rng.uniform_below(6));
        for (int h = 0; h < hops; ++h) p.push_back(static_cast<LinkId>(rng.uniform_below(links)));
        live[s.add_flow(p)] = {p, kUnlimited};
      } else if (kind == 1) {
        remove_random_flow(rng, s, live);
      } else if (kind == 2) {
        shift_random_capacity(rng, s, in.capacity);
      } else {
        rebound_random_flow(rng, s, live);
      }
      s.solve();
      ASSERT_EQ(s.check_invariants(), "") << "trial " << trial << " op " << op;
      expect_full_solve_rates(s, in.capacity, live, trial, op);
      if (testing::Test::HasFatalFailure()) return;
    }
  }
}

// Incremental re-solves against a from-scratch solve after every operation of random sequences:
// add, remove, capacity change, bound change.
TEST(MaxMinProperty, IncrementalEqualsFullResolve) {
  Rng rng(99);
  for (int trial = 0; trial < 200; ++trial) {
    const int links = 24;
    std::vector<double> capacity;
    for (int l = 0; l < links; ++l) {
      capacity.push_back(1 + static_cast<double>(rng.uniform_below(8)));
    }
    MaxMinSolver inc(capacity);
    std::map<FlowIndex, std::pair<Path, double>> live;
    for (int op = 0; op < 40; ++op) {
      const std::uint64_t kind = live.empty() ? 0 : rng.uniform_below(5);
      if (kind <= 1) {
        // Mostly local paths (a few neighbouring links) so that the network has many components.
        const LinkId first = static_cast<LinkId>(rng.uniform_below(links));
        Path p{first};
        const int extra = static_cast<int>(rng.uniform_below(3));
        for (int h = 1; h <= extra; ++h) {
          const LinkId l = (first + h * static_cast<LinkId>(1 + rng.uniform_below(2))) % links;
          if (std::find(p.begin(), p.end(), l) == p.end()) p.push_back(l);
        }
        const bool bounded = rng.uniform_below(4) == 0;
        const double cap = bounded ? 0.5 + static_cast<double>(rng.uniform_below(4)) : kUnlimited;
        live[inc.add_flow(p, cap)] = {p, cap};
      } else if (kind == 2) {
        auto it = live.begin();
        std::advance(it, static_cast<long>(rng.uniform_below(live.size())));
        inc.remove_flow(it->first);
        live.erase(it);
      } else if (kind == 3) {
        const LinkId l = static_cast<LinkId>(rng.uniform_below(links));
        capacity[static_cast<std::size_t>(l)] = static_cast<double>(rng.uniform_below(8));
        inc.set_link_capacity(l, capacity[static_cast<std::size_t>(l)]);
      } else {
        auto it = live.begin();
        std::advance(it, static_cast<long>(rng.uniform_below(live.size())));
        it->second.second = 0.25 * static_cast<double>(rng.uniform_below(16));
        inc.set_flow_cap(it->first, it->second.second);
      }
      inc.solve();
      ASSERT_EQ(inc.check_invariants(), "") << "trial " << trial << " op " << op;
      expect_full_solve_rates(inc, capacity, live, trial, op);
      if (testing::Test::HasFatalFailure()) return;
    }
  }
}

// A change in one component re-solves that component only and reports only its changed flows.
// e {0} arrives next to a (3, held by link 1 with b): e gets at least 6 / 2 = 3 on link 0, so
// nothing below 3 can change, and b (at 3 on link 1, which e does not cross) keeps its rate; a
// (at 3 on link 0) and e are re-filled.
// e's arrival re-fills its component at or above e's equal share: a and e, links 0 and 1 (an
// arrival never takes the verified partial re-fill). Then e leaves: a partial re-fill holds a by
// link 1 (its bottleneck, which the departure leaves alone) and re-fills nothing; the search
// re-fills a over links 0 and 1 (at the level of the departure, on a changed link).
TEST(MaxMin, IncrementalTouchesOnlyTheAffectedComponent) {
  for (const bool verified : {false, true}) {
    MaxMinSolver s({6, 6, 6, 6});
    s.set_verified_refill(verified);
    const FlowIndex a = s.add_flow(Path{0, 1});
    const FlowIndex b = s.add_flow(Path{1});
    const FlowIndex c = s.add_flow(Path{2, 3});
    const FlowIndex d = s.add_flow(Path{3});
    s.solve_all();
    const FlowIndex e = s.add_flow(Path{0});
    const auto changed = s.solve();
    std::vector<FlowIndex> refilled(s.last_flows().begin(), s.last_flows().end());
    std::sort(refilled.begin(), refilled.end());
    EXPECT_EQ(refilled, (std::vector<FlowIndex>{a, e}));
    EXPECT_EQ(s.last_links().size(), 2u);  // links 0 and 1
    std::vector<FlowIndex> got(changed.begin(), changed.end());
    std::sort(got.begin(), got.end());
    // a keeps 3 (link 1 is its bottleneck), b keeps 3: only e's rate changed.
    EXPECT_EQ(got, std::vector<FlowIndex>{e});
    expect_rates(s, {a, b, c, d, e}, {3, 3, 3, 3, 3});
    EXPECT_TRUE(s.solve().empty());  // nothing dirty
    s.remove_flow(e);
    EXPECT_TRUE(s.solve().empty());
    EXPECT_EQ(s.last_flows().size(), verified ? 0u : 1u);
    EXPECT_EQ(s.last_links().size(), verified ? 1u : 2u);  // link 0 (the seed), or links 0 and 1
    expect_rates(s, {a, b, c, d}, {3, 3, 3, 3});
    EXPECT_EQ(s.verified_solves(), verified ? 1 : 0);
  }
}

// Level-restricted re-solves. Links 0 (10), 1 (2), 2 (100); flows a {0}, b {0,1}, c {1,2}, d {2}.
// Link 1 saturates first at 1 (b = c = 1), then a takes the 9 left on link 0 and d the 99 left on
// link 2. A flow that leaves can only change flows at least as fast as it was: removing a (9) or
// d (99) re-fills nothing (b and c, at 1, are held by link 1); removing c (1) re-fills b alone,
// which takes link 1's 2.
TEST(MaxMin, RemovalReFillsOnlyFlowsAtOrAboveItsRate) {
  MaxMinSolver s({10, 2, 100});
  const FlowIndex a = s.add_flow(Path{0});
  const FlowIndex b = s.add_flow(Path{0, 1});
  const FlowIndex c = s.add_flow(Path{1, 2});
  const FlowIndex d = s.add_flow(Path{2});
  s.solve();
  expect_rates(s, {a, b, c, d}, {9, 1, 1, 99});
  s.remove_flow(a);
  EXPECT_TRUE(s.solve().empty());
  EXPECT_TRUE(s.last_flows().empty());
  s.remove_flow(d);
  EXPECT_TRUE(s.solve().empty());
  EXPECT_TRUE(s.last_flows().empty());
  expect_rates(s, {b, c}, {1, 1});
  s.remove_flow(c);
  const auto changed = s.solve();
  ASSERT_EQ(s.last_flows().size(), 1u);
  EXPECT_EQ(s.last_flows()[0], b);
  EXPECT_EQ(std::vector<FlowIndex>(changed.begin(), changed.end()), std::vector<FlowIndex>{b});
  expect_rates(s, {b}, {2});
  // Raising link 1 to 20 matters from its saturation level (2, b's rate): b re-fills to 10.
  s.set_link_capacity(1, 20);
  s.solve();
  expect_rates(s, {b}, {10});
  // Adding a flow re-fills from its equal share (10 on link 1): b and e.
  const FlowIndex e = s.add_flow(Path{1});
  s.solve();
  EXPECT_EQ(s.last_flows().size(), 2u);
  expect_rates(s, {b, e}, {10, 10});
}

// Congestion control raises a link's capacity when a flow leaves it. The raise matters from the
// link's saturation level in the last solve, which is the largest rate on it then, counting the
// flow that left: link 0 (10) carries a (9, the fastest) and b (1, held by link 1 of 2, which it
// shares with c); removing a and raising link 0 to 12 changes nothing below 9, so nothing is
// re-filled (counting only b, the flow left on link 0, the level would be 1 and b and c would be
// re-filled). A raise with no removal still counts its own flows: b re-fills once link 1 rises.
TEST(MaxMin, CapacityRaiseAfterARemovalCountsTheRemovedFlow) {
  MaxMinSolver s({10, 2});
  const FlowIndex a = s.add_flow(Path{0});
  const FlowIndex b = s.add_flow(Path{1, 0});
  const FlowIndex c = s.add_flow(Path{1});
  s.solve();
  expect_rates(s, {a, b, c}, {9, 1, 1});
  s.remove_flow(a);
  s.set_link_capacity(0, 12);
  EXPECT_TRUE(s.solve().empty());
  EXPECT_TRUE(s.last_flows().empty());
  expect_rates(s, {b, c}, {1, 1});
  EXPECT_EQ(s.check_invariants(), "");
  // In a later solve the removed flow no longer counts: link 1's raise re-fills b and c.
  s.set_link_capacity(1, 4);
  s.solve();
  EXPECT_EQ(s.last_flows().size(), 2u);
  expect_rates(s, {b, c}, {2, 2});
  EXPECT_EQ(s.check_invariants(), "");
}

// Water-filling with 2,000 bounded flows on one link (enough keys for the radix sort of the fill):
// flow i (bound i, from a private link of capacity i) shares link 0 of capacity
// Σ_{i=1}^{1000} i + 1000 · 1000.5, so the water level is 1000.5: flows 1…1000 reach their
// bounds, flows 1001…2000 get 1000.5. A key taken out of order would freeze a flow above the level.
TEST(MaxMin, WaterFillingOverThousandsOfBounds) {
  const int n = 2000;
  std::vector<double> capacity{1000.0 * 1001.0 / 2.0 + 1000.0 * 1000.5};
  for (int i = 1; i <= n; ++i) capacity.push_back(i);
  MaxMinSolver s(capacity);
  std::vector<FlowIndex> flows;
  // Added in a scrambled order so that the keys do not arrive sorted.
  for (int k = 0; k < n; ++k) {
    const int i = 1 + (k * 7919) % n;
    flows.push_back(s.add_flow(Path{0, static_cast<LinkId>(i)}));
  }
  s.solve();
  for (int k = 0; k < n; ++k) {
    const int i = 1 + (k * 7919) % n;
    const double expected = i <= 1000 ? i : 1000.5;
    ASSERT_NEAR(s.rate(flows[static_cast<std::size_t>(k)]), expected, 1e-9 * expected) << i;
  }
  EXPECT_EQ(s.check_invariants(), "");
}

// Water-filling over n bounds 1000·(1 + k·2^-e), k = 0 … n − 1 listed in the order `order(i)`
// gives, on one shared link whose capacity puts the water level a quarter of a step above the
// middle bound: flows below the level freeze at their bound (exactly), the others at the level.
// A bound taken out of order would freeze a flow above the level or one at the level above its
// bound: off by at least one step of 2^-e, far outside the tolerance.
void expect_near_tied_water_filling(int n, int e, const std::function<int(int)>& order) {
  const auto bound = [e](int k) { return 1000.0 * (1.0 + std::ldexp(static_cast<double>(k), -e)); };
  const int mid = n / 2;
  const double level = bound(mid) + 0.25 * (bound(mid + 1) - bound(mid));
  double capacity = 0;
  for (int k = 0; k < n; ++k) capacity += std::min(bound(k), level);
  MaxMinSolver s({capacity});
  std::vector<FlowIndex> flows;
  std::vector<int> ks;
  for (int i = 0; i < n; ++i) {
    ks.push_back(order(i));
    flows.push_back(s.add_flow(Path{0}, bound(ks.back())));
  }
  s.solve();
  double left = capacity;
  int rising = n;
  double water = 0;
  for (int k = 0; k < n; ++k) {
    if (bound(k) * rising <= left) {
      left -= bound(k);
      --rising;
    } else {
      water = left / rising;
      break;
    }
  }
  ASSERT_GT(water, bound(mid));
  ASSERT_LT(water, bound(mid + 1));
  for (int i = 0; i < n; ++i) {
    const int k = ks[static_cast<std::size_t>(i)];
    const double r = s.rate(flows[static_cast<std::size_t>(i)]);
    if (bound(k) < water) {
      ASSERT_EQ(r, bound(k)) << "k " << k;
    } else {
      ASSERT_NEAR(r, water, 1e-14 * water) << "k " << k;
    }
  }
  EXPECT_EQ(s.check_invariants(), "");
}

// 2,000 bounds 2^-30 apart, listed with every adjacent pair swapped: they agree in their upper
// 32 bits in runs of 1,024, so the large sort (MaxMinSolver::sort_keys) orders them by those bits
// and then by the whole key with a stable insertion pass, here one move per pair. It fails
// without that pass (checked).
TEST(MaxMin, WaterFillingOrdersNearTiedBoundsExactly) {
  expect_near_tied_water_filling(2000, 30, [](int i) { return i ^ 1; });
}

// The same bounds in a scrambled order: the insertion pass would move each one far, so it
// gives up within its budget and a stable sort finishes the job.
TEST(MaxMin, WaterFillingOrdersScrambledNearTiedBounds) {
  expect_near_tied_water_filling(2000, 30, [](int i) { return (i * 7919) % 2000; });
}

// 3,000 bounds 2^-40 apart, all in one run of equal upper bits and listed in descending order:
// the insertion pass would be quadratic, so past its budget of moves the sort finishes with a
// stable sort on the whole key. It fails if that finish does not sort (checked).
TEST(MaxMin, WaterFillingOrdersManyNearTiedBoundsListedBackwards) {
  expect_near_tied_water_filling(3000, 40, [](int i) { return 2999 - i; });
}

// Flows at the level of the change on links it does not touch keep their rates. Links 0 and 1
// (4.5 each) carry a, f {0}; c, g {1}; h {0,1}: every flow at 1.5. Removing f (λ* = 1.5)
// re-fills a and h (on link 0) but not c and g: link 1 still saturates at 1.5 with h, c, g, so
// h stays at 1.5 and a takes the 3 left on link 0.
// (A verified partial re-fill takes the same two: h's recorded bottleneck is link 0, the first of
// the two tied links the fill saturated, and link 0 is the changed one.)
TEST(MaxMin, FlowsAtTheLevelOnUnchangedLinksKeepTheirRates) {
  for (const bool verified : {false, true}) {
    MaxMinSolver s({4.5, 4.5});
    s.set_verified_refill(verified);
    const FlowIndex a = s.add_flow(Path{0});
    const FlowIndex f = s.add_flow(Path{0});
    const FlowIndex c = s.add_flow(Path{1});
    const FlowIndex g = s.add_flow(Path{1});
    const FlowIndex h = s.add_flow(Path{0, 1});
    s.solve();
    expect_rates(s, {a, f, c, g, h}, {1.5, 1.5, 1.5, 1.5, 1.5});
    s.remove_flow(f);
    s.solve();
    std::vector<FlowIndex> refilled(s.last_flows().begin(), s.last_flows().end());
    std::sort(refilled.begin(), refilled.end());
    EXPECT_EQ(refilled, (std::vector<FlowIndex>{a, h}));
    expect_rates(s, {a, c, g, h}, {3, 1.5, 1.5, 1.5});
  }
}

// A ring in lock step is one flow over every link of the ring (sim/collective/flow.h); pipeline
// transfers share its NICs. NICs 0-3 (10 each) carry the ring r; p_i crosses NIC i and a private
// link 4+i of 2, 3, 20, 20. NICs 2 and 3 split evenly: r = p2 = p3 = 5; p0 = 2, p1 = 3 (their
// private links); r's recorded bottleneck is NIC 2, the first of the tied NICs the fill saturates
// (keys in link order). p3 leaves (λ* = 5): NIC 2 still holds r at 5, so nothing moves; the full
// search re-fills r (at λ* on the changed NIC; p2, at λ* on a link the change leaves alone, keeps
// its rate), the verified re-fill nothing. Then p2 leaves: r's last bottleneck is gone and it
// rises to 7 (NIC 1: 10 - p1's 3), alone re-filled.
TEST(MaxMin, VerifiedReFillHoldsARingBottleneckedElsewhere) {
  for (const bool verified : {false, true}) {
    MaxMinSolver s({10, 10, 10, 10, 2, 3, 20, 20});
    s.set_verified_refill(verified);
    const FlowIndex r = s.add_flow(Path{0, 1, 2, 3});
    std::vector<FlowIndex> p;
    for (LinkId i = 0; i < 4; ++i) p.push_back(s.add_flow(Path{i, static_cast<LinkId>(4 + i)}));
    s.solve();
    expect_rates(s, {r, p[0], p[1], p[2], p[3]}, {5, 2, 3, 5, 5});
    s.remove_flow(p[3]);
    EXPECT_TRUE(s.solve().empty());
    std::vector<FlowIndex> refilled(s.last_flows().begin(), s.last_flows().end());
    std::sort(refilled.begin(), refilled.end());
    EXPECT_EQ(refilled, (verified ? std::vector<FlowIndex>{} : std::vector<FlowIndex>{r}));
    expect_rates(s, {r, p[2]}, {5, 5});
    s.remove_flow(p[2]);
    const auto changed = s.solve();
    EXPECT_EQ(std::vector<FlowIndex>(changed.begin(), changed.end()), std::vector<FlowIndex>{r});
    EXPECT_EQ(s.last_flows().size(), 1u);
    expect_rates(s, {r, p[0], p[1]}, {7, 2, 3});
    EXPECT_EQ(s.check_invariants(), "");
    // The two departures' solves (the first solve, of new flows, is an arrival's).
    EXPECT_EQ(s.verified_solves(), verified ? 2 : 0);
  }
}

// The same against full re-solves on dense random networks (one large component, most flows
// crossing several shared links): removals, capacity rises, bound changes and arrivals, every
// one of which takes the level-restricted path.
TEST(MaxMinProperty, LevelRestrictedReSolveEqualsFullResolve) {
  Rng rng(7);
  VerifiedTally tally;
  for (int trial = 0; trial < 100; ++trial) {
    const int links = 10;
    std::vector<double> capacity = random_capacities(rng, links);
    MaxMinSolver inc(capacity);
    std::map<FlowIndex, std::pair<Path, double>> live;
    for (int f = 0; f < 60; ++f) {
      const Path p = random_path(rng, links);
      const double cap = rng.uniform_below(3) == 0 ? 0.5 + static_cast<double>(rng.uniform_below(6))
                                                   : kUnlimited;
      live[inc.add_flow(p, cap)] = {p, cap};
    }
    inc.solve();
    std::int64_t restricted = 0;
    for (int op = 0; op < 50 && !live.empty(); ++op) {
      const std::uint64_t kind = rng.uniform_below(7);
      if (kind == 6) {
        // An arrival: re-filled from its equal share on its links.
        const Path p = random_path(rng, links);
        const double cap = rng.uniform_below(3) == 0
                               ? 0.5 + static_cast<double>(rng.uniform_below(6))
                               : kUnlimited;
        live[inc.add_flow(p, cap)] = {p, cap};
      } else if (kind <= 3) {
        remove_random_flow(rng, inc, live);
      } else if (kind == 4) {
        // Up (re-filled from the link's largest rate) or down (from its water level).
        shift_random_capacity(rng, inc, capacity);
      } else {
        rebound_random_flow(rng, inc, live);
      }
      inc.solve();
      restricted += static_cast<std::int64_t>(live.size() - inc.last_flows().size());
      ASSERT_EQ(inc.check_invariants(), "") << "trial " << trial << " op " << op;
      expect_full_solve_rates(inc, capacity, live, trial, op);
      if (testing::Test::HasFatalFailure()) return;
    }
    // The restriction did leave flows out (else this test would not exercise it).
    EXPECT_GT(restricted, 0) << "trial " << trial;
    tally.add(inc);
  }
  tally.expect_both();
}

// Verified partial re-fills where they matter: ring flows in lock step over many links (some
// listing a link twice), each NIC-like link shared with short transfers, under removals (the
// fastest first, as transfers finish), arrivals, capacity and bound changes. After every change
// the rates equal a full solve's and the invariants hold; some solves are kept after a re-fill of
// part of the component, some give up for the full search.
TEST(MaxMinProperty, VerifiedReFillWithRingsEqualsFullResolve) {
  Rng rng(23);
  VerifiedTally tally;
  for (int trial = 0; trial < 40; ++trial) {
    const int links = 24;
    std::vector<double> capacity = random_capacities(rng, links);
    MaxMinSolver inc(capacity);
    std::map<FlowIndex, std::pair<Path, double>> live;
    const auto add_ring = [&] {
      Path p = random_path(rng, links);
      for (int k = 0; k < 3; ++k) {
        const Path more = random_path(rng, links);
        p.insert(p.end(), more.begin(), more.end());
      }
      live[inc.add_flow(p)] = {p, kUnlimited};
    };
    for (int r = 0; r < 3; ++r) add_ring();
    for (int f = 0; f < 30; ++f) {
      const Path p = random_path(rng, links);
      live[inc.add_flow(p)] = {p, kUnlimited};
    }
    inc.solve();
    for (int op = 0; op < 40 && live.size() > 1; ++op) {
      const std::uint64_t kind = rng.uniform_below(8);
      if (kind <= 3) {
        // The fastest flow leaves, or any.
        auto it = live.begin();
        if (kind <= 1) {
          for (auto jt = live.begin(); jt != live.end(); ++jt) {
            if (inc.rate(jt->first) > inc.rate(it->first)) it = jt;
          }
          inc.remove_flow(it->first);
          live.erase(it);
        } else {
          remove_random_flow(rng, inc, live);
        }
      } else if (kind == 4) {
        add_ring();
      } else if (kind == 5) {
        const Path p = random_path(rng, links);
        live[inc.add_flow(p)] = {p, kUnlimited};
      } else if (kind == 6) {
        shift_random_capacity(rng, inc, capacity);
      } else {
        rebound_random_flow(rng, inc, live);
      }
      inc.solve();
      ASSERT_EQ(inc.check_invariants(), "") << "trial " << trial << " op " << op;
      expect_full_solve_rates(inc, capacity, live, trial, op);
      if (testing::Test::HasFatalFailure()) return;
    }
    tally.add(inc);
  }
  tally.expect_both();
}

// Several changes between two solves, as a batch of the flow network makes them under congestion
// control: a flow leaves and every link it crossed gets more capacity (a departure raises η), a
// flow arrives and its links get less, with capacity and bound changes mixed in. After every
// batch the level-restricted re-solve equals a full solve of the same flows.
TEST(MaxMinProperty, BatchedChangesEqualFullResolve) {
  Rng rng(11);
  for (int trial = 0; trial < 100; ++trial) {
    const int links = 10;
    std::vector<double> capacity = random_capacities(rng, links);
    MaxMinSolver inc(capacity);
    std::map<FlowIndex, std::pair<Path, double>> live;
    for (int f = 0; f < 40; ++f) {
      const Path p = random_path(rng, links);
      live[inc.add_flow(p)] = {p, kUnlimited};
    }
    inc.solve();
    for (int batch = 0; batch < 30 && !live.empty(); ++batch) {
      const int ops = 1 + static_cast<int>(rng.uniform_below(4));
      for (int op = 0; op < ops && !live.empty(); ++op) {
        const std::uint64_t kind = rng.uniform_below(5);
        if (kind <= 1) {
          // A departure, then more capacity on every link it crossed.
          auto it = live.begin();
          std::advance(it, static_cast<long>(rng.uniform_below(live.size())));
          const Path p = it->second.first;
          inc.remove_flow(it->first);
          live.erase(it);
          for (const LinkId l : p) {
            double& c = capacity[static_cast<std::size_t>(l)];
            c += 0.5 * static_cast<double>(1 + rng.uniform_below(3));
            inc.set_link_capacity(l, c);
          }
        } else if (kind == 2) {
          // An arrival, then less capacity on its links.
          const Path p = random_path(rng, links);
          live[inc.add_flow(p)] = {p, kUnlimited};
          for (const LinkId l : p) {
            double& c = capacity[static_cast<std::size_t>(l)];
            c = std::max(0.5, c - 0.5 * static_cast<double>(rng.uniform_below(3)));
            inc.set_link_capacity(l, c);
          }
        } else if (kind == 3) {
          const LinkId l = static_cast<LinkId>(rng.uniform_below(links));
          double& c = capacity[static_cast<std::size_t>(l)];
          c = std::max(0.5, c + static_cast<double>(rng.uniform_below(7)) - 3.0);
          inc.set_link_capacity(l, c);
        } else {
          auto it = live.begin();
          std::advance(it, static_cast<long>(rng.uniform_below(live.size())));
          it->second.second = rng.uniform_below(2) == 0
                                  ? kUnlimited
                                  : 0.25 * static_cast<double>(1 + rng.uniform_below(24));
          inc.set_flow_cap(it->first, it->second.second);
        }
      }
      inc.solve();
      ASSERT_EQ(inc.check_invariants(), "") << "trial " << trial << " batch " << batch;
      expect_full_solve_rates(inc, capacity, live, trial, batch);
      if (testing::Test::HasFatalFailure()) return;
    }
  }
}

// When the touched components hold more than half of a large network (kFullSolveMinFlows), the
// incremental solve becomes a full solve: the same rates as a from-scratch solve. A capacity cut
// on link 0 matters from level 0 (the whole component); an arrival only from its equal share.
TEST(MaxMin, LargeComponentFallsBackToAFullSolve) {
  const int links = 200;
  std::vector<double> capacity(links + 1, 10.0);
  MaxMinSolver inc(capacity);
  MaxMinSolver full(capacity);
  Rng rng(3);
  for (int i = 0; i < 12000; ++i) {
    const auto a = static_cast<LinkId>(rng.uniform_below(links));
    const auto b = static_cast<LinkId>((a + 1 + rng.uniform_below(links - 1)) % links);
    inc.add_flow(Path{a, b});
    full.add_flow(Path{a, b});
  }
  const FlowIndex alone = inc.add_flow(Path{links});  // its own component
  full.add_flow(Path{links});
  inc.solve();
  inc.add_flow(Path{0, 1});
  full.add_flow(Path{0, 1});
  inc.solve();
  EXPECT_LT(inc.last_flows().size(), 12001u / 2);  // the flows at or above its equal share
  // A lower capacity re-fills only from the water level where link 0 saturates with the
  // rates as they are (λ*, maxmin.h): fewer flows than the component (here most of them: the
  // rates are alike), the same rates.
  inc.set_link_capacity(0, 8.0);
  full.set_link_capacity(0, 8.0);
  inc.solve();
  EXPECT_LT(inc.last_flows().size(), 12001u);
  full.solve_all();
  for (FlowIndex f = 0; f < full.flow_slots(); ++f) {
    ASSERT_NEAR(inc.rate(f), full.rate(f), 1e-9 * full.rate(f)) << f;
  }
  // A capacity of 0 matters from level 0: the whole component, as a full solve.
  inc.set_link_capacity(0, 0.0);
  full.set_link_capacity(0, 0.0);
  inc.solve();
  EXPECT_EQ(inc.last_flows().size(), 12002u);  // everything, not the 12,001 of the component
  full.solve_all();
  for (FlowIndex f = 0; f < full.flow_slots(); ++f) {
    ASSERT_NEAR(inc.rate(f), full.rate(f), 1e-9 * std::max(1.0, full.rate(f))) << f;
  }
  EXPECT_EQ(inc.rate(alone), 10.0);
  EXPECT_EQ(inc.check_invariants(), "");
}

// ---------------------------------------------------------------------------------------------
// The event-driven flow network.

FlowNetworkOptions checked(NetworkConfig config = {}) {
  FlowNetworkOptions o;
  o.config = config;
  o.check_invariants = true;
  return o;
}

struct Done {
  std::vector<FlowDone> done;
  std::vector<FlowFailed> failed;
  explicit Done(FlowNetwork& net) {
    net.flow_done().subscribe([this](const FlowDone& d) { done.push_back(d); });
    net.flow_failed().subscribe([this](const FlowFailed& f) { failed.push_back(f); });
  }
  TimePs end_of(std::uint64_t tag) const {
    for (const FlowDone& d : done) {
      if (d.tag == tag) return d.end;
    }
    return TimePs::never();
  }
};

// Two flows share 1 GB/s: 0.5 GB/s each; the 1 MB flow ends at 2 ms, then the 3 MB flow has
// 2 MB left at 1 GB/s: it ends at 4 ms.
TEST(FlowNetwork, DumbbellCompletionTimes) {
  Simulation sim;
  FlowNetwork& net = sim.emplace<FlowNetwork>(std::vector<double>{1 * kG}, checked());
  Done d(net);
  const Path p{0};
  net.start_flow({p, 1'000'000, kUnlimited, 1});
  net.start_flow({p, 3'000'000, kUnlimited, 2});
  sim.run();
  ASSERT_EQ(d.done.size(), 2u);
  EXPECT_EQ(d.end_of(1), TimePs::from_ms(2));
  EXPECT_EQ(d.end_of(2), TimePs::from_ms(4));
  EXPECT_EQ(net.stats().bytes_done, 4'000'000);
  EXPECT_LT(net.stats().max_residual_bytes, 1.0);
  // Two solves: the arrivals' (a search), and the first completion's, which a partial re-fill
  // of the one flow left at the level (0.5 GB/s) on the changed link answers and proves; the
  // last completion leaves the link empty, with nothing to solve.
  EXPECT_EQ(net.stats().solves, 2);
  EXPECT_EQ(net.stats().solves_partial, 1);
  EXPECT_EQ(net.stats().solves_partial_given_up, 0);
  EXPECT_EQ(net.stats().flows_resolved, 3);
}

// Incast 8 → 1: 8 × 1 MB through a 25 GB/s downlink ends at 8 MB / 25 GB/s = 320 µs for all,
// and the 8 completions of that picosecond are one batch (one re-solve, not eight).
// Groups with remembered rates and replayed trajectories (start_group). Links 0 (10 GB/s),
// 1 (4), 2 (6); the group is A {0,1} 40 MB and B {0,2} 60 MB: link 0 carries both (4 + 6 = 10),
// so A = 4 and B = 6 GB/s and, alone, both end 10 ms after they start. Flows C, D, E cross link 0
// only. Every completion must be what plain start_flow calls give.
struct GroupEvent {
  double at_ms;
  bool group;           // the group, or one flow of `mb` MB on link `link`
  std::int64_t mb = 0;
  LinkId link = 0;
};

std::vector<FlowDone> run_groups(const std::vector<GroupEvent>& events, bool grouped,
                                 FlowNetworkStats* stats, const Path& a = Path{0, 1},
                                 const Path& b = Path{0, 2}, const NetworkConfig& cc = {}) {
  Simulation sim;
  FlowNetwork& net =
      sim.emplace<FlowNetwork>(std::vector<double>{10 * kG, 4 * kG, 6 * kG}, checked(cc));
  Done d(net);
  std::uint64_t tag = 0;
  for (const GroupEvent& e : events) {
    tag += 10;
    sim.schedule_call(TimePs::from_seconds(e.at_ms * 1e-3), [&net, grouped, e, tag, &a, &b] {
      if (!e.group) {
        net.start_flow({Path{e.link}, e.mb * 1'000'000, kUnlimited, tag});
        return;
      }
      const FlowSpec specs[] = {{a, 40'000'000, kUnlimited, tag},
                                {b, 60'000'000, kUnlimited, tag + 1}};
      if (grouped) {
        net.start_group(specs, 7);
      } else {
        for (const FlowSpec& s : specs) net.start_flow(s);
      }
    });
  }
  sim.run();
  if (stats != nullptr) *stats = net.stats();
  std::vector<FlowDone> done = d.done;
  std::sort(done.begin(), done.end(),
            [](const FlowDone& x, const FlowDone& y) { return x.tag < y.tag; });
  return done;
}

void expect_same_completions(const std::vector<GroupEvent>& events, FlowNetworkStats* grouped_stats,
                             const Path& a = Path{0, 1}, const Path& b = Path{0, 2},
                             const NetworkConfig& cc = {}) {
  const std::vector<FlowDone> grouped = run_groups(events, true, grouped_stats, a, b, cc);
  const std::vector<FlowDone> plain = run_groups(events, false, nullptr, a, b, cc);
  ASSERT_EQ(grouped.size(), plain.size());
  for (std::size_t k = 0; k < grouped.size(); ++k) {
    EXPECT_EQ(grouped[k].tag, plain[k].tag) << k;
    EXPECT_EQ(grouped[k].start, plain[k].start) << "tag " << grouped[k].tag;
    EXPECT_LE(std::abs((grouped[k].end - plain[k].end).ps), 1) << "tag " << grouped[k].tag;
  }
}

// 0 ms: recorded (alone until both end at 10 ms). 20 ms: replayed, until D joins link 0 at 22 ms:
// the group's flows enter the solver with 32 and 48 MB left. 40 ms: C (from 39 ms) is on link 0:
// an ordinary start. 100 ms: replayed to the end, by hand at 110 ms.
TEST(FlowNetwork, GroupsReplayAnIsolatedTrajectory) {
  const std::vector<GroupEvent> events = {
      {0, true}, {20, true}, {22, false, 10}, {39, false, 50}, {40, true}, {100, true}};
  FlowNetworkStats st;
  expect_same_completions(events, &st);
  EXPECT_EQ(st.flows_replayed, 4);
  EXPECT_EQ(st.replays_materialized, 1);
  EXPECT_EQ(st.flows_started, 10);
  EXPECT_EQ(st.flows_done, 10);
  const std::vector<FlowDone> done = run_groups(events, true, nullptr);
  for (const FlowDone& f : done) {
    if (f.tag == 10 || f.tag == 11) {
      EXPECT_EQ(f.end, TimePs::from_ms(10)) << f.tag;
    }
    if (f.tag == 60 || f.tag == 61) {
      EXPECT_EQ(f.end, TimePs::from_ms(110)) << f.tag;
      EXPECT_EQ(f.id, -1);  // replayed: never in the solver
    }
  }
}

// Merged replay completions (FlowNetworkOptions::merge_replayed_completions, what `run` uses):
// links 0 (10 GB/s), 1 (4), 2 (6); A {0,1} 20 MB and B {0,2} 60 MB. Alone, A runs at 4 GB/s and
// ends at 5 ms, then B (6 GB/s throughout, its own link's rate) ends at 10 ms. Started at 0 ms
// (recorded: two solver flows, two notifications) and at 20 ms (replayed): with one tag the
// replay reports one notification for both, at B's end (30 ms), 80 MB, count 2; with two tags,
// two, at 25 and 30 ms; without merging, one per flow.
std::vector<FlowDone> merged_run(bool merge, std::uint64_t tag_a, std::uint64_t tag_b,
                                 FlowNetworkStats* stats) {
  Simulation sim;
  FlowNetworkOptions o = checked();
  o.merge_replayed_completions = merge;
  FlowNetwork& net = sim.emplace<FlowNetwork>(std::vector<double>{10 * kG, 4 * kG, 6 * kG}, o);
  Done d(net);
  const Path a{0, 1}, b{0, 2};
  for (const double at_ms : {0.0, 20.0}) {
    sim.schedule_call(TimePs::from_seconds(at_ms * 1e-3), [&] {
      const FlowSpec specs[] = {{a, 20'000'000, kUnlimited, tag_a}, {b, 60'000'000, kUnlimited, tag_b}};
      net.start_group(specs, 3);
    });
  }
  sim.run();
  *stats = net.stats();
  return d.done;
}

TEST(FlowNetwork, MergedReplayCompletionsCountTheirFlows) {
  FlowNetworkStats st;
  std::vector<FlowDone> done = merged_run(true, 1, 1, &st);
  ASSERT_EQ(done.size(), 3u);
  EXPECT_EQ(done[0].end, TimePs::from_ms(5));
  EXPECT_EQ(done[1].end, TimePs::from_ms(10));
  const FlowDone& m = done[2];
  EXPECT_EQ(m.id, -1);
  EXPECT_EQ(m.tag, 1u);
  EXPECT_EQ(m.count, 2);
  EXPECT_EQ(m.start, TimePs::from_ms(20));
  EXPECT_EQ(m.end, TimePs::from_ms(30));
  EXPECT_EQ(m.bytes, 80'000'000);
  EXPECT_EQ(st.flows_replayed, 2);
  EXPECT_EQ(st.flows_done, 4);
  EXPECT_EQ(st.bytes_done, 160'000'000);

  done = merged_run(true, 1, 2, &st);
  ASSERT_EQ(done.size(), 4u);
  EXPECT_EQ(done[2].tag, 1u);
  EXPECT_EQ(done[2].count, 1);
  EXPECT_EQ(done[2].end, TimePs::from_ms(25));
  EXPECT_EQ(done[3].tag, 2u);
  EXPECT_EQ(done[3].end, TimePs::from_ms(30));

  done = merged_run(false, 1, 1, &st);
  ASSERT_EQ(done.size(), 4u);
  for (const FlowDone& f : done) EXPECT_EQ(f.count, 1);
  EXPECT_EQ(done[2].end, TimePs::from_ms(25));
  EXPECT_EQ(done[3].end, TimePs::from_ms(30));
  EXPECT_EQ(st.flows_done, 4);
}

// A tag base per start (what `run` passes: the in-flight slot) with fixed flow tags: the replay
// reports merged completions from the shape's tags | the base, also when something reaches it
// mid-way. Same network and flows as above, tags 0 (both); starts at 0 ms (base 5, recorded),
// 20 ms (base 7, replayed: one notification for both at 30 ms) and 40 ms (base 9), with 1 MB on
// link 2 at 46 ms: A (done at 45 ms) is reported as it was recorded, B enters the solver with
// its tag 9 and ends as the plain flows give it.
TEST(FlowNetwork, TagBasesReplayWithTheShapesTags) {
  const auto run = [](bool grouped) {
    Simulation sim;
    FlowNetworkOptions o = checked();
    o.merge_replayed_completions = true;
    FlowNetwork& net = sim.emplace<FlowNetwork>(std::vector<double>{10 * kG, 4 * kG, 6 * kG}, o);
    Done d(net);
    const Path a{0, 1}, b{0, 2}, two{2};
    for (const auto& [at_ms, base] : {std::pair{0.0, 5u}, {20.0, 7u}, {40.0, 9u}}) {
      sim.schedule_call(TimePs::from_seconds(at_ms * 1e-3), [&, base = base, grouped] {
        const FlowSpec specs[] = {{a, 20'000'000, kUnlimited, grouped ? 0 : base},
                                  {b, 60'000'000, kUnlimited, grouped ? 0 : base}};
        if (grouped) {
          net.start_group(specs, 3, base);
        } else {
          for (const FlowSpec& f : specs) net.start_flow(f);
        }
      });
    }
    sim.schedule_call(TimePs::from_ms(46), [&] { net.start_flow({two, 1'000'000, kUnlimited, 100}); });
    sim.run();
    return d.done;
  };
  const std::vector<FlowDone> grouped = run(true);
  const std::vector<FlowDone> plain = run(false);
  ASSERT_EQ(plain.size(), 7u);
  const auto last_of = [&](std::uint64_t tag) {
    TimePs end{-1};
    int n = 0;
    for (const FlowDone& f : plain) {
      if (f.tag != tag) continue;
      end = std::max(end, f.end);
      ++n;
    }
    return std::pair{end, n};
  };
  // 5 ms, 10 ms (recorded), 30 ms (merged), 45 ms (A, replayed), B and the stray flow.
  ASSERT_EQ(grouped.size(), 6u);
  int flows = 0;
  for (const FlowDone& g : grouped) {
    flows += g.count;
    if (g.tag == 7) {
      EXPECT_EQ(g.count, 2);
      EXPECT_EQ(g.end, TimePs::from_ms(30));
      EXPECT_EQ(g.end, last_of(7).first);
      EXPECT_EQ(g.start, TimePs::from_ms(20));
      continue;
    }
    EXPECT_EQ(g.count, 1) << g.tag;
    // Each other notification is one flow: the plain flow with that tag ending then.
    bool found = false;
    for (const FlowDone& f : plain) {
      found = found || (f.tag == g.tag && std::abs((f.end - g.end).ps) <= 1 && f.start == g.start);
    }
    EXPECT_TRUE(found) << "tag " << g.tag << " at " << g.end.seconds();
  }
  EXPECT_EQ(flows, 7);
  EXPECT_EQ(last_of(9).second, 2);
  const auto a9 = std::find_if(grouped.begin(), grouped.end(), [](const FlowDone& g) {
    return g.tag == 9 && g.id == -1;
  });
  ASSERT_NE(a9, grouped.end());
  EXPECT_EQ(a9->end, TimePs::from_ms(45));
}

// Replays ending at the same moment, scheduled one after the other, share one event (it ends
// them in the order their own events would have run): four components, one flow of 10 MB on its
// own 10 GB/s link each (1 ms alone). Started at 0 ms (recorded), 10 ms (replayed: one event at
// 11 ms, not four) and 20 ms, where flows on links 0 and 1 at 20.5 ms reach two of them (their
// batch goes on with the other two), and flows on links 2 and 3 too at 30.2 ms after a fourth
// start at 30 ms (every member ended early: the batch's event is cancelled with the last).
// Every completion as plain flows give it.
TEST(FlowNetwork, ReplayEndsAtOneMomentShareAnEvent) {
  const auto run = [](bool grouped, std::vector<TimePs>* dispatched) {
    Simulation sim;
    FlowNetwork& net =
        sim.emplace<FlowNetwork>(std::vector<double>(4, 10 * kG), checked());
    Done d(net);
    std::uint64_t tag = 0;
    for (const double at_ms : {0.0, 10.0, 20.0, 30.0}) {
      tag += 10;
      sim.schedule_call(TimePs::from_seconds(at_ms * 1e-3), [&net, grouped, tag] {
        const Path p0{0}, p1{1}, p2{2}, p3{3};
        const FlowSpec specs[] = {{p0, 10'000'000, kUnlimited, tag},
                                  {p1, 10'000'000, kUnlimited, tag + 1},
                                  {p2, 10'000'000, kUnlimited, tag + 2},
                                  {p3, 10'000'000, kUnlimited, tag + 3}};
        if (grouped) {
          net.start_group(specs, 5);
        } else {
          for (const FlowSpec& f : specs) net.start_flow(f);
        }
      });
    }
    for (const auto& [at_us, link] : {std::pair{20500, 0}, {20500, 1}, {30200, 0}, {30200, 1},
                                      {30200, 2}, {30200, 3}}) {
      sim.schedule_call(TimePs::from_seconds(at_us * 1e-6), [&net, link = link, at_us = at_us] {
        net.start_flow({Path{static_cast<LinkId>(link)}, 1'000'000, kUnlimited,
                        static_cast<std::uint64_t>(1000 + at_us + link)});
      });
    }
    sim.dispatched().subscribe([dispatched](const DispatchRecord& r) { dispatched->push_back(r.time); });
    sim.run();
    std::vector<FlowDone> done = d.done;
    std::sort(done.begin(), done.end(),
              [](const FlowDone& x, const FlowDone& y) { return x.tag < y.tag; });
    return done;
  };
  std::vector<TimePs> grouped_events, plain_events;
  const std::vector<FlowDone> grouped = run(true, &grouped_events);
  const std::vector<FlowDone> plain = run(false, &plain_events);
  ASSERT_EQ(grouped.size(), plain.size());
  ASSERT_EQ(grouped.size(), 22u);
  for (std::size_t k = 0; k < grouped.size(); ++k) {
    EXPECT_EQ(grouped[k].tag, plain[k].tag) << k;
    EXPECT_LE(std::abs((grouped[k].end - plain[k].end).ps), 1) << "tag " << grouped[k].tag;
  }
  // The replay at 10 ms: one event at 11 ms.
  EXPECT_EQ(std::count(grouped_events.begin(), grouped_events.end(), TimePs::from_ms(11)), 1);
  // The fourth start's batch was cancelled: nothing is dispatched at 31 ms for it.
  EXPECT_EQ(std::count(grouped_events.begin(), grouped_events.end(), TimePs::from_ms(31)), 0);
}

// A replay reached in the very picosecond it starts: its flows enter the solver with their
// first recorded rates (a segment starting now gives the rate now), not with none.
TEST(FlowNetwork, GroupsReachedAsTheyStart) {
  const std::vector<GroupEvent> events = {{0, true}, {20, true}, {20, false, 10}};
  FlowNetworkStats st;
  expect_same_completions(events, &st);
  EXPECT_EQ(st.flows_replayed, 2);
  EXPECT_EQ(st.replays_materialized, 1);
}

// 0 ms: E joins link 0 at 2 ms, so the first start is not recorded; 20 ms: alone to its end,
// recorded; 40 ms: replayed.
TEST(FlowNetwork, GroupsRecordOnlyWhatRanAlone) {
  const std::vector<GroupEvent> events = {{0, true}, {2, false, 5}, {20, true}, {40, true}};
  FlowNetworkStats st;
  expect_same_completions(events, &st);
  EXPECT_EQ(st.flows_replayed, 2);
  EXPECT_EQ(st.replays_materialized, 0);
}

// A group of two components, A {1} and B {2} (4 and 6 GB/s, both 10 ms): each is recorded and
// replayed on its own; a flow on link 1 at 22 ms brings only A back into the solver, and a
// flow on link 0 at 41 ms reaches neither.
TEST(FlowNetwork, GroupsReplayEachComponentOnItsOwn) {
  const std::vector<GroupEvent> events = {
      {0, true}, {20, true}, {22, false, 4, 1}, {40, true}, {41, false, 3, 0}};
  FlowNetworkStats st;
  expect_same_completions(events, &st, Path{1}, Path{2});
  EXPECT_EQ(st.flows_replayed, 4);
  EXPECT_EQ(st.replays_materialized, 1);
}

// Replay under congestion control (DCQCN). Link 0 carries A and B: derated to 0.95 · 10 = 9.5
// GB/s, A = 4 (link 1), B = 5.5. A ends at 10 ms; B's share rises to 6 and DCQCN holds it at 5.5
// for τ_up = 682 µs (7 timer periods of 55 µs, then 10 hyper-increase steps). A replayed start
// reached in the middle of that hold must come back held, with the hold's end, and the links
// derated for the flows back on them: every completion as the plain flows give it.
NetworkConfig dcqcn() {
  NetworkConfig c;
  c.congestion_control = CongestionControl::kDcqcn;
  return c;
}

TEST(FlowNetwork, CongestionControlGroupsReplayWithTheirHolds) {
  const CongestionModel cm(dcqcn());
  ASSERT_NEAR(cm.link_efficiency(2), 0.95, 1e-12);
  const TimePs lag = cm.increase_lag(5.5 * kG, 6 * kG);
  ASSERT_GT(lag, TimePs::from_us(600));
  ASSERT_LT(lag, TimePs::from_us(700));
  // 20 ms: replayed; A ends at 30 ms, B is held until 30 ms + τ_up. Reached at 30.3 ms by a flow
  // on link 1 (A's, not B's: B stays held), on link 2 (B's own), at 25 ms (before the hold; on
  // link 1, the shared link 0 must be derated again for the two flows back on it),
  // at the very end of the hold, and not at all (40 ms).
  const double hold_end_ms = 30 + lag.seconds() * 1e3;
  for (const auto& [at_ms, link] : std::vector<std::pair<double, LinkId>>{
           {30.3, 1}, {30.3, 2}, {25, 0}, {25, 1}, {hold_end_ms, 1}, {30.0, 1}}) {
    const std::vector<GroupEvent> events = {{0, true}, {20, true}, {at_ms, false, 1, link}, {40, true}};
    FlowNetworkStats st;
    expect_same_completions(events, &st, Path{0, 1}, Path{0, 2}, dcqcn());
    EXPECT_EQ(st.flows_replayed, 4) << at_ms << " ms, link " << link;
    EXPECT_EQ(st.replays_materialized, 1) << at_ms << " ms, link " << link;
  }
  // The hold is real: alone, B ends later than at a constant 5.5 → 6 GB/s jump would give.
  const std::vector<FlowDone> done = run_groups({{0, true}}, true, nullptr, Path{0, 1},
                                                Path{0, 2}, dcqcn());
  ASSERT_EQ(done.size(), 2u);
  const double b_left_at_10ms = 60e6 - 5.5 * kG * 10e-3;
  const double b_end_s = 10e-3 + lag.seconds() + (b_left_at_10ms - 5.5 * kG * lag.seconds()) / (6 * kG);
  EXPECT_NEAR(done[1].end.seconds(), b_end_s, 2e-12);
}

// Composites: a group that reaches a replay at the same age each time. Links 0 (10 GB/s), 1 (4),
// 2 (6), 3 (5). Group 7 is A {0,1} 40 MB and B {0,2} 60 MB (one component, both end 10 ms after
// they start alone); group 9 is E {1,3} 10 MB and F {3} 20 MB (one component through link 3),
// and E shares link 1 with A. `what`: 0 group 7, 1 group 9, 2 a 1 MB flow on link 2 (B's).
struct CompositeRun {
  std::vector<FlowDone> done;
  std::vector<TimePs> reported;  // when each completion was reported, by done's order
  FlowNetworkStats stats;
};

CompositeRun run_composites(const std::vector<std::pair<double, int>>& events, bool grouped,
                            const NetworkConfig& cc = {}) {
  Simulation sim;
  FlowNetwork& net = sim.emplace<FlowNetwork>(
      std::vector<double>{10 * kG, 4 * kG, 6 * kG, 5 * kG}, checked(cc));
  CompositeRun run;
  std::vector<std::pair<FlowDone, TimePs>> seen;
  net.flow_done().subscribe([&](const FlowDone& d) { seen.emplace_back(d, sim.now()); });
  static const Path a{0, 1}, b{0, 2}, e{1, 3}, f{3}, p{2};
  std::uint64_t tag = 0;
  for (const auto& [at_ms, what] : events) {
    tag += 10;
    sim.schedule_call(TimePs::from_seconds(at_ms * 1e-3), [&net, grouped, what, tag] {
      std::vector<FlowSpec> specs;
      if (what == 0) specs = {{a, 40'000'000, kUnlimited, tag}, {b, 60'000'000, kUnlimited, tag + 1}};
      if (what == 1) specs = {{e, 10'000'000, kUnlimited, tag}, {f, 20'000'000, kUnlimited, tag + 1}};
      if (what == 2) specs = {{p, 1'000'000, kUnlimited, tag}};
      if (grouped && what != 2) {
        net.start_group(specs, what == 0 ? 7 : 9);
      } else {
        for (const FlowSpec& s : specs) net.start_flow(s);
      }
    });
  }
  sim.run();
  run.stats = net.stats();
  std::sort(seen.begin(), seen.end(),
            [](const auto& x, const auto& y) { return x.first.tag < y.first.tag; });
  for (const auto& [d, at] : seen) {
    run.done.push_back(d);
    run.reported.push_back(at);
  }
  return run;
}

void expect_composites_exact(const std::vector<std::pair<double, int>>& events,
                             const CompositeRun& grouped, const NetworkConfig& cc = {}) {
  const CompositeRun plain = run_composites(events, false, cc);
  ASSERT_EQ(grouped.done.size(), plain.done.size());
  for (std::size_t k = 0; k < plain.done.size(); ++k) {
    const std::uint64_t tag = plain.done[k].tag;
    EXPECT_EQ(grouped.done[k].tag, tag);
    EXPECT_EQ(grouped.done[k].start, plain.done[k].start) << "tag " << tag;
    EXPECT_LE(std::abs((grouped.done[k].end - plain.done[k].end).ps), 1) << "tag " << tag;
    // A replay reports completions late, but never after the last one of its start (tags t and
    // t + 1 are one start), which it reports at its own date: a caller waiting for a start's
    // flows sees them end when they did.
    const std::uint64_t first = tag - tag % 10;
    TimePs last_end, last_reported;
    for (std::size_t j = 0; j < grouped.done.size(); ++j) {
      if (grouped.done[j].tag - grouped.done[j].tag % 10 != first) continue;
      last_end = std::max(last_end, grouped.done[j].end);
      last_reported = std::max(last_reported, grouped.reported[j]);
    }
    EXPECT_GE(grouped.reported[k], grouped.done[k].end) << "tag " << tag;
    EXPECT_LE(grouped.reported[k], last_end) << "tag " << tag;
    EXPECT_EQ(last_reported, last_end) << "tag " << tag;
  }
}

// 20 ms: group 7 replayed; 22 ms: group 9 reaches it 2 ms into its run: the two are recorded
// together (A and B enter the solver with 32 and 48 MB left). 40/42 ms: the same composite is
// replayed, no solver work. 60/62 ms: replayed, until a flow on link 2 at 63 ms brings it back
// into the solver. 80/82 ms: replayed to the end. 100/103 ms: reached at another age: recorded
// anew. Every completion as plain flows give it.
TEST(FlowNetwork, CompositesReplayGroupsThatMeetAtTheSameAge) {
  const std::vector<std::pair<double, int>> events = {
      {0, 0},  {20, 0}, {22, 1}, {40, 0}, {42, 1},  {60, 0}, {62, 1},
      {63, 2}, {80, 0}, {82, 1}, {100, 0}, {103, 1}};
  const CompositeRun run = run_composites(events, true);
  expect_composites_exact(events, run);
  EXPECT_EQ(run.stats.composites_recorded, 2);
  EXPECT_EQ(run.stats.composites_replayed, 3);
  // Materialized: group 7's replay at 22 and 103 ms (to record), the composite at 63 ms.
  EXPECT_EQ(run.stats.replays_materialized, 3);
  EXPECT_EQ(run.stats.flows_done, 23);
  // By hand, for the composite replayed at 40/42 ms (tags 40/41 are A/B, 50/51 are E/F): A has
  // 32 MB left at 42 ms. Link 1 (4 GB/s, A and E) saturates first at 2 GB/s each; F gets the
  // rest of link 3, 3 GB/s; B keeps 6 (link 2). E ends at 42 + 10/2 = 47 ms, A then has
  // 32 - 10 = 22 MB left at 4 GB/s: 52.5 ms; F has 5 MB left at 5 GB/s: 48 ms; B: 50 ms.
  const std::map<std::uint64_t, TimePs> by_hand = {{40, TimePs::from_us(52'500)},
                                                   {41, TimePs::from_ms(50)},
                                                   {50, TimePs::from_ms(47)},
                                                   {51, TimePs::from_ms(48)}};
  for (const FlowDone& d : run.done) {
    const auto it = by_hand.find(d.tag);
    if (it != by_hand.end()) {
      EXPECT_EQ(d.end, it->second) << d.tag;
      EXPECT_EQ(d.id, -1) << d.tag;  // replayed: never in the solver
    }
  }
}

// Meetings that never repeat (a new age each time) keep at most 2^14 composites; past that, the
// group starts plainly, with the same completions.
TEST(FlowNetwork, CompositesAreCappedWhenMeetingsDoNotRepeat) {
  std::vector<std::pair<double, int>> events = {{0, 0}};
  const int rounds = (1 << 14) + 100;
  for (int r = 1; r <= rounds; ++r) {
    events.emplace_back(40.0 * r, 0);
    events.emplace_back(40.0 * r + 2 + 1e-6 * r, 1);  // 2 ms + r ns: a new age every round
  }
  const CompositeRun run = run_composites(events, true);
  EXPECT_EQ(run.stats.composites_recorded, 1 << 14);
  EXPECT_EQ(run.stats.composites_replayed, 0);
  EXPECT_EQ(run.stats.flows_done, 2 + 4 * rounds);
  const CompositeRun plain = run_composites(events, false);
  ASSERT_EQ(run.done.size(), plain.done.size());
  for (std::size_t k = 0; k < plain.done.size(); ++k) {
    ASSERT_LE(std::abs((run.done[k].end - plain.done[k].end).ps), 1) << plain.done[k].tag;
  }
}

// The same under DCQCN: holds and link derating carry over into the composite and out of it.
TEST(FlowNetwork, CompositesUnderCongestionControl) {
  NetworkConfig cc;
  cc.congestion_control = CongestionControl::kDcqcn;
  const std::vector<std::pair<double, int>> events = {
      {0, 0}, {20, 0}, {22, 1}, {40, 0}, {42, 1}, {60, 0}, {62, 1}, {63, 2}, {80, 0}, {82, 1}};
  const CompositeRun run = run_composites(events, true, cc);
  expect_composites_exact(events, run, cc);
  EXPECT_EQ(run.stats.composites_recorded, 1);
  EXPECT_EQ(run.stats.composites_replayed, 3);
}

// Many starts at ages drawn from a few values, so that composites repeat and nest (a group
// reaching the replay of a composite): every completion as plain flows give it, with and
// without congestion control.
TEST(FlowNetwork, CompositesMatchPlainFlowsOnRandomStarts) {
  const std::vector<double> caps = {10 * kG, 4 * kG, 6 * kG, 5 * kG, 8 * kG, 3 * kG};
  struct G {
    std::uint64_t key;
    std::vector<std::pair<Path, std::int64_t>> flows;
  };
  const std::vector<G> groups = {
      {7, {{Path{0, 1}, 40'000'000}, {Path{0, 2}, 60'000'000}}},
      {9, {{Path{1, 3}, 10'000'000}, {Path{3}, 20'000'000}}},
      {11, {{Path{3, 4}, 15'000'000}, {Path{5}, 5'000'000}, {Path{2, 5}, 9'000'000}}}};
  for (const CongestionControl cc : {CongestionControl::kIdeal, CongestionControl::kDcqcn}) {
    NetworkConfig config;
    config.congestion_control = cc;
    std::uint64_t seed = 12345;
    const auto draw = [&seed](int n) {
      seed = seed * 6364136223846793005ull + 1442695040888963407ull;
      return static_cast<int>((seed >> 33) % static_cast<std::uint64_t>(n));
    };
    // (start ms, group index or -1 for a 2 MB flow on link `extra`)
    // First each group alone (recorded), then rounds where they meet.
    std::vector<std::tuple<double, int, LinkId>> events = {{0, 0, 0}, {40, 1, 0}, {80, 2, 0}};
    for (int round = 3; round < 60; ++round) {
      const double base = 40.0 * round;
      events.emplace_back(base, 0, 0);
      events.emplace_back(base + 1 + draw(2), 1, 0);
      if (draw(3) != 0) events.emplace_back(base + 3 + 0.5 * draw(2), 2, 0);
      if (draw(5) == 0) events.emplace_back(base + 2.5 + draw(4), -1, static_cast<LinkId>(draw(6)));
    }
    std::vector<FlowDone> out[2];
    FlowNetworkStats stats[2];
    for (const bool grouped : {false, true}) {
      Simulation sim;
      FlowNetwork& net = sim.emplace<FlowNetwork>(caps, checked(config));
      Done d(net);
      std::uint64_t tag = 0;
      for (const auto& [at_ms, g, extra] : events) {
        tag += 10;
        sim.schedule_call(TimePs::from_seconds(at_ms * 1e-3), [&, g, extra, tag] {
          if (g < 0) {
            net.start_flow({Path{extra}, 2'000'000, kUnlimited, tag});
            return;
          }
          std::vector<FlowSpec> specs;
          std::uint64_t t = tag;
          for (const auto& [path, bytes] : groups[static_cast<std::size_t>(g)].flows) {
            specs.push_back({path, bytes, kUnlimited, t++});
          }
          if (grouped) {
            net.start_group(specs, groups[static_cast<std::size_t>(g)].key);
          } else {
            for (const FlowSpec& spec : specs) net.start_flow(spec);
          }
        });
      }
      sim.run();
      out[grouped] = d.done;
      stats[grouped] = net.stats();
      std::sort(out[grouped].begin(), out[grouped].end(),
                [](const FlowDone& x, const FlowDone& y) { return x.tag < y.tag; });
    }
    ASSERT_EQ(out[0].size(), out[1].size());
    for (std::size_t k = 0; k < out[0].size(); ++k) {
      ASSERT_EQ(out[0][k].tag, out[1][k].tag);
      EXPECT_EQ(out[0][k].start, out[1][k].start) << out[0][k].tag;
      EXPECT_LE(std::abs((out[0][k].end - out[1][k].end).ps), 1) << out[0][k].tag;
    }
    EXPECT_EQ(stats[1].bytes_done, stats[0].bytes_done);
    EXPECT_GT(stats[1].composites_replayed, 10) << static_cast<int>(cc);
    EXPECT_LT(stats[1].solves, stats[0].solves / 2) << static_cast<int>(cc);
  }
}

TEST(FlowNetwork, IncastCompletesTogetherInOneBatch) {
  Simulation sim;
  FlowNetwork& net = sim.emplace<FlowNetwork>(std::vector<double>(9, 25 * kG), checked());
  Done d(net);
  std::vector<Path> paths;
  for (LinkId l = 0; l < 8; ++l) paths.push_back(Path{l, 8});
  for (std::uint64_t i = 0; i < 8; ++i) net.start_flow({paths[i], 1'000'000, kUnlimited, i});
  sim.run();
  ASSERT_EQ(d.done.size(), 8u);
  for (const FlowDone& f : d.done) EXPECT_EQ(f.end, TimePs::from_us(320));
  EXPECT_EQ(net.stats().solves, 2);  // the arrivals at 0, the departures at 320 µs
}

// Arrival into a running flow: A (10 MB) alone on 10 GB/s; B (5 MB) arrives at 0.5 ms when A has
// 5 MB left; both run at 5 GB/s and end together at 0.5 + 1 = 1.5 ms.
TEST(FlowNetwork, ArrivalSharesTheLink) {
  Simulation sim;
  FlowNetwork& net = sim.emplace<FlowNetwork>(std::vector<double>{10 * kG}, checked());
  Done d(net);
  const Path p{0};
  net.start_flow({p, 10'000'000, kUnlimited, 1});
  sim.schedule_call(TimePs::from_us(500), [&] { net.start_flow({p, 5'000'000, kUnlimited, 2}); });
  sim.run();
  EXPECT_EQ(d.end_of(1), TimePs::from_us(1500));
  EXPECT_EQ(d.end_of(2), TimePs::from_us(1500));
}

// A capacity change mid-flight: 10 MB at 10 GB/s, halved at 0.5 ms → 5 MB left at 5 GB/s → 1.5 ms.
TEST(FlowNetwork, CapacityChangeDuringARun) {
  Simulation sim;
  FlowNetwork& net = sim.emplace<FlowNetwork>(std::vector<double>{10 * kG}, checked());
  Done d(net);
  const Path p{0};
  net.start_flow({p, 10'000'000, kUnlimited, 1});
  sim.schedule_call(TimePs::from_us(500), [&] { net.set_link_capacity(0, 5 * kG); });
  sim.run();
  EXPECT_EQ(d.end_of(1), TimePs::from_us(1500));
}

// A NIC bound below the link's share: 4 MB capped at 2 GB/s on a 10 GB/s link ends at 2 ms;
// a zero-byte flow ends at once.
TEST(FlowNetwork, RateBoundAndZeroByteFlow) {
  Simulation sim;
  FlowNetwork& net = sim.emplace<FlowNetwork>(std::vector<double>{10 * kG}, checked());
  Done d(net);
  const Path p{0};
  net.start_flow({p, 4'000'000, 2 * kG, 1});
  net.start_flow({p, 0, kUnlimited, 2});
  sim.run();
  EXPECT_EQ(d.end_of(1), TimePs::from_ms(2));
  EXPECT_EQ(d.end_of(2), TimePs{0});
}

// Flows started from a completion callback join the same batch.
TEST(FlowNetwork, ChainedFlowsFromCallbacks) {
  Simulation sim;
  FlowNetwork& net = sim.emplace<FlowNetwork>(std::vector<double>{1 * kG}, checked());
  const Path p{0};
  std::vector<TimePs> ends;
  net.flow_done().subscribe([&](const FlowDone& f) {
    ends.push_back(f.end);
    if (ends.size() < 3) net.start_flow({p, 1'000'000, kUnlimited, f.tag + 1});
  });
  net.start_flow({p, 1'000'000, kUnlimited, 0});
  sim.run();
  EXPECT_EQ(ends,
            (std::vector<TimePs>{TimePs::from_ms(1), TimePs::from_ms(2), TimePs::from_ms(3)}));
}

// Random traffic with arrivals, departures and capacity changes on a small fabric. Every solve is
// checked (options.check_invariants); the test integrates each flow's rate over the intervals
// between its rate changes, independently of the network, and requires the integral to equal the
// flow's size to within one byte at its completion.
struct RandomRun {
  std::vector<std::tuple<std::int64_t, std::uint64_t, std::uint64_t>> trace;  // (ps, seq, tag)
  std::vector<std::pair<std::int64_t, std::uint64_t>> completions;            // (ps, tag)
  double worst_integral_error = 0;
  std::int64_t bytes_started = 0;
  std::int64_t bytes_done = 0;
};

RandomRun run_random_traffic(std::uint64_t seed, NetworkConfig config = {}) {
  RandomRun out;
  Simulation sim(seed);
  const int links = 12;
  std::vector<double> capacity(links, 10 * kG);
  FlowNetwork& net = sim.emplace<FlowNetwork>(capacity, checked(config));
  sim.dispatched().subscribe(
      [&out](const DispatchRecord& r) { out.trace.emplace_back(r.time.ps, r.seq, r.tag); });
  struct Integral {
    double bytes = 0;
    double rate = 0;
    TimePs since;
  };
  std::map<std::uint64_t, Integral> integral;
  net.rate_changed().subscribe([&](const FlowRateChanged& c) {
    Integral& in = integral[c.tag];
    in.bytes += in.rate * (c.time - in.since).seconds();
    in.rate = c.rate_Bps;
    in.since = c.time;
  });
  std::map<std::uint64_t, std::int64_t> size;
  net.flow_done().subscribe([&](const FlowDone& d) {
    Integral& in = integral[d.tag];
    in.bytes += in.rate * (d.end - in.since).seconds();
    out.worst_integral_error =
        std::max(out.worst_integral_error, std::abs(in.bytes - static_cast<double>(size[d.tag])));
    out.completions.emplace_back(d.end.ps, d.tag);
  });
  Rng rng = sim.rng_stream("traffic");
  std::vector<Path> paths;
  for (std::uint64_t tag = 0; tag < 150; ++tag) {
    const LinkId first = static_cast<LinkId>(rng.uniform_below(links));
    Path p{first};
    const LinkId second = static_cast<LinkId>((first + 1 + rng.uniform_below(links - 1)) % links);
    if (rng.uniform_below(2) == 0) p.push_back(second);
    const auto bytes = static_cast<std::int64_t>(rng.uniform_int(1, 20'000'000));
    const TimePs at{static_cast<std::int64_t>(rng.uniform_below(3'000'000'000))};
    const double cap = rng.uniform_below(3) == 0 ? 4 * kG : kUnlimited;
    size[tag] = bytes;
    out.bytes_started += bytes;
    sim.schedule_call(at, [&net, p, bytes, cap, tag] { net.start_flow({p, bytes, cap, tag}); });
  }
  for (int i = 0; i < 20; ++i) {
    const auto l = static_cast<LinkId>(rng.uniform_below(links));
    const double c = (2 + static_cast<double>(rng.uniform_below(10))) * kG;
    const TimePs at{static_cast<std::int64_t>(rng.uniform_below(3'000'000'000))};
    sim.schedule_call(at, [&net, l, c] { net.set_link_capacity(l, c); });
  }
  sim.run();
  out.bytes_done = net.stats().bytes_done;
  return out;
}

TEST(FlowNetwork, BytesConservedToTheByte) {
  for (const CongestionControl cc : {CongestionControl::kIdeal, CongestionControl::kDcqcn}) {
    NetworkConfig config;
    config.congestion_control = cc;
    const RandomRun run = run_random_traffic(17, config);
    EXPECT_EQ(run.completions.size(), 150u);
    EXPECT_EQ(run.bytes_done, run.bytes_started);
    EXPECT_LT(run.worst_integral_error, 1.0) << to_string(cc);
  }
}

TEST(FlowNetwork, SameSeedSameTraceDifferentSeedDifferentTrace) {
  const RandomRun a = run_random_traffic(5);
  const RandomRun b = run_random_traffic(5);
  const RandomRun c = run_random_traffic(6);
  EXPECT_EQ(a.trace, b.trace);
  EXPECT_EQ(a.completions, b.completions);
  EXPECT_NE(a.completions, c.completions);
}

// A change re-solves only its component: an arrival in one island changes rates there only.
TEST(FlowNetwork, ArrivalTouchesOnlyItsComponent) {
  Simulation sim;
  FlowNetwork& net = sim.emplace<FlowNetwork>(std::vector<double>(4, 10 * kG), checked());
  const Path left{0, 1}, right{2, 3};
  net.start_flow({left, 1'000'000'000, kUnlimited, 1});
  net.start_flow({right, 1'000'000'000, kUnlimited, 2});
  sim.run_until(TimePs::from_us(1));
  std::vector<std::uint64_t> changed;
  net.rate_changed().subscribe([&](const FlowRateChanged& c) { changed.push_back(c.tag); });
  const std::int64_t before = net.stats().flows_resolved;
  net.start_flow({Path{1}, 1'000'000'000, kUnlimited, 3});
  sim.run_until(TimePs::from_us(2));
  EXPECT_EQ(net.stats().flows_resolved - before, 2);  // flows 1 and 3, not 2
  std::sort(changed.begin(), changed.end());
  EXPECT_EQ(changed, (std::vector<std::uint64_t>{1, 3}));
}

// Retransmission: RTO = 4.096 µs · 2^1 = 8.192 µs, 3 retries → a stall survives up to 24.576 µs.
// A 10 MB flow at 10 GB/s (1 ms alone) loses its link at 100 µs.
class LinkFlap : public ::testing::Test {
 protected:
  static NetworkConfig config() {
    NetworkConfig c;
    c.retransmit.timeout = 1;
    c.retransmit.retry_count = 3;
    return c;
  }
  struct Outcome {
    TimePs end = TimePs::never();
    std::vector<FlowFailed> failed;
  };
  static Outcome flap(TimePs down_for) {
    Simulation sim;
    FlowNetwork& net = sim.emplace<FlowNetwork>(std::vector<double>{10 * kG}, checked(config()));
    Done d(net);
    net.start_flow({Path{0}, 10'000'000, kUnlimited, 1});
    net.schedule_link_flap(0, TimePs::from_us(100), down_for);
    sim.run();
    return {d.end_of(1), d.failed};
  }
};

TEST_F(LinkFlap, RtoArithmetic) {
  const CongestionModel m(config());
  EXPECT_EQ(m.retransmit_timeout(), TimePs::from_ns(8192));
  EXPECT_EQ(m.retry_budget(), TimePs::from_ns(24576));
  const CongestionModel defaults;  // NCCL: t = 20, 7 retries → 4.29 s per attempt, 30 s in all
  EXPECT_EQ(defaults.retransmit_timeout(), TimePs{4'096'000LL << 20});
  EXPECT_NEAR(defaults.retry_budget().seconds(), 30.06, 0.01);
}

// Down 10 µs: the second retransmission (16.384 µs after the stall) gets through, so the flow
// ends 16.384 µs late: at 1016.384 µs.
TEST_F(LinkFlap, ShortFlapCostsWholeRtos) {
  const Outcome o = flap(TimePs::from_us(10));
  EXPECT_TRUE(o.failed.empty());
  EXPECT_EQ(o.end, TimePs::from_us(1000) + TimePs::from_ns(16384));
}

// Down exactly retries · RTO: the last retry gets through.
TEST_F(LinkFlap, FlapOfExactlyTheBudgetSurvives) {
  const Outcome o = flap(TimePs::from_ns(24576));
  EXPECT_TRUE(o.failed.empty());
  EXPECT_EQ(o.end, TimePs::from_us(1000) + TimePs::from_ns(24576));
}

// Down 30 µs > 24.576 µs: the flow fails at 100 + 24.576 µs with 9 MB undelivered.
TEST_F(LinkFlap, LongFlapFailsTheFlow) {
  const Outcome o = flap(TimePs::from_us(30));
  EXPECT_EQ(o.end, TimePs::never());
  ASSERT_EQ(o.failed.size(), 1u);
  EXPECT_EQ(o.failed[0].stalled_since, TimePs::from_us(100));
  EXPECT_EQ(o.failed[0].time, TimePs::from_us(100) + TimePs::from_ns(24576));
  EXPECT_EQ(o.failed[0].bytes_left, 9'000'000);
}

// A flapping link: down at 100 µs for 10 µs, down again at 113 µs for 2 µs (before the resuming
// retransmission at 116.384 µs: the same stall episode, still resumed at 116.384 µs), then an
// independent 1 µs flap at 500 µs (one more RTO). The 1 ms flow ends 16.384 + 8.192 µs late.
TEST_F(LinkFlap, RepeatedFlapsOfOneLink) {
  Simulation sim;
  FlowNetwork& net = sim.emplace<FlowNetwork>(std::vector<double>{10 * kG}, checked(config()));
  Done d(net);
  net.start_flow({Path{0}, 10'000'000, kUnlimited, 1});
  net.schedule_link_flap(0, TimePs::from_us(100), TimePs::from_us(10));
  net.schedule_link_flap(0, TimePs::from_us(113), TimePs::from_us(2));
  net.schedule_link_flap(0, TimePs::from_us(500), TimePs::from_us(1));
  sim.run();
  EXPECT_TRUE(d.failed.empty());
  EXPECT_EQ(d.end_of(1), TimePs::from_us(1000) + TimePs::from_ns(16384 + 8192));
}

// A flow that starts on a down link stalls from its start; the other flow on the shared link
// takes all of it meanwhile. Link 1 is back at 20 µs, so the third retransmission (24.576 µs)
// resumes the stalled flow. Flow 2 sent 245,760 B alone, then both share 10 GB/s: flow 2's
// remaining 754,240 B take 150.848 µs (ends 175.424 µs), then flow 1 finishes its last
// 245,760 B alone at 10 GB/s: 200 µs, when 2 MB have crossed link 0 at full rate.
TEST_F(LinkFlap, FlowStartingOnADownLinkStalls) {
  Simulation sim;
  FlowNetwork& net =
      sim.emplace<FlowNetwork>(std::vector<double>{10 * kG, 10 * kG}, checked(config()));
  Done d(net);
  net.set_link_up(1, false);
  const FlowId stalled = net.start_flow({Path{0, 1}, 1'000'000, kUnlimited, 1});
  const FlowId other = net.start_flow({Path{0}, 1'000'000, kUnlimited, 2});
  sim.run_until(TimePs::from_us(1));
  EXPECT_EQ(net.rate_Bps(stalled), 0.0);
  EXPECT_EQ(net.rate_Bps(other), 10 * kG);
  sim.schedule_call(TimePs::from_us(20), [&] { net.set_link_up(1, true); });
  sim.run();
  EXPECT_EQ(d.end_of(2), TimePs::from_ns(175424));
  EXPECT_EQ(d.end_of(1), TimePs::from_us(200));
}

}  // namespace
}  // namespace trainsim::net
