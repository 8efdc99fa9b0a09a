// sim/network/congestion: the flow-level congestion-control models and their effect on an incast.
//
// Expected results by hand (defaults of sim/network/congestion.h, docs/network-model.md):
//   η(n) = contended_efficiency / (1 + incast_penalty · log2(n/2)), η(1) = 1
//     dcqcn η(2) = 0.95, η(16) = 0.95/1.18 = 0.8051; swift η(16) = 0.98/1.06 = 0.9245;
//     megascale η(16) = 0.98/1.03 = 0.9515; ideal 1.
//   τ_up for a 1 GB/s rise:
//     dcqcn: (F+2)·T + T·(m·(Δ−R_AI) − R_HAI·m(m−1)/2)/Δ with m = ⌈(Δ−R_AI)/R_HAI⌉ = 20
//            = 7·55 µs + 10.4·55 µs = 957 µs;
//     swift: RTT + Δ·RTT²/(2·ai·MTU) = 10 µs + 1e9·1e-10/8192 s = 22.207 µs.
//
// The incast test (16 → 1 through one 25 GB/s downlink; 15 flows of 4 MB and one of 8 MB) must
// order the completion of the long flow as ideal < megascale < swift < dcqcn, because:
//   * while all 16 share the downlink, each model delivers η(16)·C: megascale's ECN+RTT cuts lose
//     least to the incast (penalty 0.01 per doubling), swift's delay-only signal more (0.02),
//     DCQCN's ECN sawtooth and PFC most (0.95 base, 0.06 per doubling);
//   * when the 15 short flows leave, the long flow must climb from C·η/16 to C. Swift and
//     megascale climb one packet per RTT (about 0.3 ms for 23.5 GB/s); DCQCN climbs R_HAI per
//     55 µs timer period, about 13 ms, longer than the 4 MB it has left take at its old rate.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "sim/core/error.h"
#include "sim/core/simulation.h"
#include "sim/network/congestion.h"
#include "sim/network/flow_network.h"

namespace trainsim::net {
namespace {

using topo::LinkId;

NetworkConfig with(CongestionControl cc) {
  NetworkConfig c;
  c.congestion_control = cc;
  return c;
}

TEST(CongestionControl, NamesRoundTrip) {
  for (const CongestionControl cc : {CongestionControl::kIdeal, CongestionControl::kDcqcn,
                                     CongestionControl::kSwift, CongestionControl::kMegaScale}) {
    EXPECT_EQ(parse_congestion_control(to_string(cc)), cc);
  }
  EXPECT_FALSE(parse_congestion_control("hpcc").has_value());
}

TEST(CongestionControl, InvalidParametersNameTheirKey) {
  NetworkConfig c;
  c.dcqcn.contended_efficiency = 1.5;
  try {
    CongestionModel m(c);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.where().field, "network.dcqcn.contended_efficiency");
    EXPECT_EQ(e.kind(), ErrorKind::kInput);
  }
  NetworkConfig r;
  r.retransmit.retry_count = 8;
  EXPECT_THROW(CongestionModel{r}, Error);
  NetworkConfig s;
  s.swift.base_rtt = TimePs{0};
  EXPECT_THROW(CongestionModel{s}, Error);
}

TEST(CongestionControl, LinkEfficiency) {
  const CongestionModel ideal(with(CongestionControl::kIdeal));
  const CongestionModel dcqcn(with(CongestionControl::kDcqcn));
  const CongestionModel swift(with(CongestionControl::kSwift));
  const CongestionModel mega(with(CongestionControl::kMegaScale));
  EXPECT_EQ(ideal.link_efficiency(64), 1.0);
  EXPECT_EQ(dcqcn.link_efficiency(1), 1.0);  // a lone flow runs at line rate
  EXPECT_DOUBLE_EQ(dcqcn.link_efficiency(2), 0.95);
  EXPECT_DOUBLE_EQ(dcqcn.link_efficiency(16), 0.95 / 1.18);
  // Swift and MegaScale: the fit of packet incasts (test_congestion_fit.cpp), no trend in n.
  EXPECT_DOUBLE_EQ(swift.link_efficiency(16), 1.0);
  EXPECT_DOUBLE_EQ(mega.link_efficiency(16), 0.995);
  EXPECT_DOUBLE_EQ(mega.link_efficiency(2), 0.995);
  EXPECT_GT(swift.link_efficiency(16), mega.link_efficiency(16));
  // Only an η below 1 derates links (the flow level then re-rates a link at every arrival).
  EXPECT_FALSE(ideal.derates());
  EXPECT_FALSE(swift.derates());
  EXPECT_TRUE(mega.derates());
  EXPECT_TRUE(dcqcn.derates());
  NetworkConfig lossy = with(CongestionControl::kSwift);
  lossy.swift.incast_penalty = 0.01;
  EXPECT_TRUE(CongestionModel(lossy).derates());
  EXPECT_GT(mega.link_efficiency(16), dcqcn.link_efficiency(16));
}

TEST(CongestionControl, IncreaseLag) {
  const CongestionModel ideal(with(CongestionControl::kIdeal));
  const CongestionModel dcqcn(with(CongestionControl::kDcqcn));
  const CongestionModel swift(with(CongestionControl::kSwift));
  EXPECT_EQ(ideal.increase_lag(1e9, 2e9), TimePs{});
  EXPECT_EQ(dcqcn.increase_lag(2e9, 1e9), TimePs{});  // decreases are immediate
  EXPECT_NEAR(dcqcn.increase_lag(1e9, 2e9).seconds(), 17.4 * 55e-6, 1e-9);
  EXPECT_NEAR(swift.increase_lag(1e9, 2e9).seconds(), 10e-6 + 1e9 * 1e-10 / 8192, 1e-9);
  // A rise within one AI step: F fast-recovery periods, the AI period, the RC trail.
  EXPECT_NEAR(dcqcn.increase_lag(1e9, 1e9 + 1e6).seconds(), 7 * 55e-6, 1e-9);
}

// ---------------------------------------------------------------------------------------------
// Incast 16 → 1.

constexpr double kC = 25e9;  // 200 Gb/s
constexpr std::int64_t kS = 4'000'000;

// Completion of the long flow (2S) by the model's formulas, computed here independently of the
// network: all 16 share η(16)·C until the short flows end at t1 = S/r; the long flow then holds r
// for τ_up and takes C afterwards.
double expected_long_flow_end_s(const CongestionModel& m) {
  const double r = kC * m.link_efficiency(16) / 16;
  const double t1 = kS / r;
  const double lag = m.increase_lag(r, kC).seconds();
  if (lag * r >= kS) return t1 + kS / r;
  return t1 + lag + (kS - lag * r) / kC;
}

double simulate_long_flow_end_s(CongestionControl cc, double* short_end_s) {
  Simulation sim;
  FlowNetworkOptions options;
  options.config = with(cc);
  options.check_invariants = true;
  // Links 0..15: the senders' NIC links; link 16: the receiver's ToR downlink.
  FlowNetwork& net = sim.emplace<FlowNetwork>(std::vector<double>(17, kC), options);
  double long_end = -1;
  net.flow_done().subscribe([&](const FlowDone& d) {
    if (d.tag == 0) {
      long_end = d.end.seconds();
    } else {
      *short_end_s = d.end.seconds();
    }
  });
  std::vector<std::vector<LinkId>> paths;
  for (LinkId l = 0; l < 16; ++l) paths.push_back({l, 16});
  for (std::uint64_t i = 0; i < 16; ++i) {
    net.start_flow({paths[i], i == 0 ? 2 * kS : kS, kUnlimited, i});
  }
  sim.run();
  return long_end;
}

// Swift keeps the bottleneck busy (η = 1) and then ramps; MegaScale's ECN cuts cost it 0.5 %
// more (both fitted to packet incasts); DCQCN's [D] derating and slow recovery cost most.
TEST(CongestionControl, IncastOrderingIsIdealSwiftMegaScaleDcqcn) {
  std::vector<double> ends;
  for (const CongestionControl cc : {CongestionControl::kIdeal, CongestionControl::kSwift,
                                     CongestionControl::kMegaScale, CongestionControl::kDcqcn}) {
    const CongestionModel m(with(cc));
    double short_end = 0;
    const double end = simulate_long_flow_end_s(cc, &short_end);
    EXPECT_NEAR(short_end, kS / (kC * m.link_efficiency(16) / 16), 2e-12) << to_string(cc);
    EXPECT_NEAR(end, expected_long_flow_end_s(m), 4e-12) << to_string(cc);
    ends.push_back(end);
  }
  // ideal: 16·4 MB/25 GB/s = 2.56 ms, then 4 MB at 25 GB/s: 2.72 ms.
  EXPECT_NEAR(ends[0], 2.72e-3, 1e-12);
  EXPECT_LT(ends[0], ends[1]);
  EXPECT_LT(ends[1], ends[2]);
  EXPECT_LT(ends[2], ends[3]);
  // DCQCN's recovery (~13 ms) outlasts the long flow: it ends at 2·t1, twice the short flows.
  EXPECT_GT(ends[3], 2 * ends[0]);
}

// Decreases are immediate: a running flow drops to its new share in the batch of the arrival.
// Increases lag: after the competitor leaves, a DCQCN flow keeps its share for τ_up.
TEST(CongestionControl, DecreaseImmediateIncreaseLags) {
  Simulation sim;
  FlowNetworkOptions options;
  options.config = with(CongestionControl::kDcqcn);
  options.check_invariants = true;
  FlowNetwork& net = sim.emplace<FlowNetwork>(std::vector<double>{10e9}, options);
  const std::vector<LinkId> path{0};
  const FlowId a = net.start_flow({path, 1'000'000'000, kUnlimited, 1});
  sim.run_until(TimePs::from_us(10));
  EXPECT_EQ(net.rate_Bps(a), 10e9);
  const FlowId b = net.start_flow({path, 1'000'000, kUnlimited, 2});
  sim.run_until(TimePs::from_us(11));
  const double shared = 10e9 * 0.95 / 2;  // η(2) = 0.95
  EXPECT_DOUBLE_EQ(net.rate_Bps(a), shared);
  EXPECT_DOUBLE_EQ(net.rate_Bps(b), shared);
  // b (1 MB) ends at 10 µs + 1 MB / 4.75 GB/s; a keeps 4.75 GB/s for τ_up(4.75 → 10 GB/s).
  const TimePs b_end =
      TimePs::from_us(10) +
      TimePs{static_cast<std::int64_t>(std::ceil(1e6 * 1e12 / shared * (1 - 1e-12) - 1e-6))};
  const TimePs lag = net.congestion().increase_lag(shared, 10e9);
  sim.run_until(b_end + lag - TimePs{1});
  EXPECT_FALSE(net.active(b));
  EXPECT_DOUBLE_EQ(net.rate_Bps(a), shared);
  sim.run_until(b_end + lag);
  EXPECT_EQ(net.rate_Bps(a), 10e9);
}

// Sender links (a NIC's own egress) are scheduled by the NIC: the congestion-control derating
// applies at switch egress only. 4 QPs of one GPU through its NIC share C, not η(4)·C.
TEST(CongestionControl, SenderLinksAreNotDerated) {
  for (const bool exempt : {false, true}) {
    Simulation sim;
    FlowNetworkOptions options;
    options.config = with(CongestionControl::kDcqcn);
    options.check_invariants = true;
    if (exempt) options.sender_links = {0};
    FlowNetwork& net = sim.emplace<FlowNetwork>(std::vector<double>{10e9, 40e9}, options);
    std::vector<FlowId> flows;
    const std::vector<LinkId> path{0, 1};
    for (std::uint64_t i = 0; i < 4; ++i) {
      flows.push_back(net.start_flow({path, 1'000'000'000, kUnlimited, i}));
    }
    sim.run_until(TimePs{1});
    // Link 1 (40 GB/s · η(4)) is not the bottleneck; link 0 is.
    const double eta4 = exempt ? 1.0 : 0.95 / (1 + 0.06);
    for (const FlowId f : flows) EXPECT_DOUBLE_EQ(net.rate_Bps(f), 10e9 * eta4 / 4);
  }
}

}  // namespace
}  // namespace trainsim::net
