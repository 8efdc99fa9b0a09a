// sim/network/packet_network: store-and-forward closed forms, the flow level against the
// packet level on incast and a shared bottleneck, DCQCN's effect on an incast queue,
// determinism and bad input.
#include "sim/network/packet_network.h"

#include <gtest/gtest.h>

#include <vector>

#include "sim/core/error.h"
#include "sim/exec/flow_backend.h"
#include "sim/network/flow_network.h"
#include "sim/core/rng.h"
#include "topology/clos.h"
#include "topology/routing.h"

namespace trainsim::net {
namespace {

using topo::LinkId;
constexpr double kG = 1e9;
constexpr double kMtu = 4096;

struct PacketRun {
  std::vector<FlowDone> done;
  PacketNetworkStats stats;
  TimePs end_of(std::uint64_t tag) const {
    for (const FlowDone& d : done) {
      if (d.tag == tag) return d.end;
    }
    return TimePs::never();
  }
  TimePs last() const {
    TimePs t;
    for (const FlowDone& d : done) t = std::max(t, d.end);
    return t;
  }
};

struct Spec {
  std::vector<LinkId> path;
  std::int64_t bytes;
};

PacketRun run_packets(std::vector<double> cap, std::vector<TimePs> lat, const std::vector<Spec>& flows,
                PacketNetworkOptions opt = {}, std::uint64_t seed = 1) {
  Simulation sim(seed);
  PacketNetwork& net = sim.emplace<PacketNetwork>(std::move(cap), std::move(lat), opt);
  PacketRun r;
  net.flow_done().subscribe([&r](const FlowDone& d) { r.done.push_back(d); });
  std::uint64_t tag = 1;
  for (const Spec& s : flows) net.start_flow({s.path, s.bytes, kUnlimited, tag++});
  sim.run();
  r.stats = net.stats();
  return r;
}

std::vector<FlowDone> run_flows(std::vector<double> cap, const std::vector<Spec>& flows) {
  Simulation sim;
  FlowNetwork& net = sim.emplace<FlowNetwork>(std::move(cap));
  std::vector<FlowDone> done;
  net.flow_done().subscribe([&done](const FlowDone& d) { done.push_back(d); });
  std::uint64_t tag = 1;
  for (const Spec& s : flows) net.start_flow({s.path, s.bytes, kUnlimited, tag++});
  sim.run();
  return done;
}

// N senders, each on its own link (0 … N−1), into one downlink (link N): the incast.
std::vector<Spec> incast(int n, std::int64_t bytes) {
  std::vector<Spec> f;
  for (int i = 0; i < n; ++i) f.push_back({{i, n}, bytes});
  return f;
}

// The incast the congestion-control tests share: 8 senders of 4 MB into one downlink, every
// link 25 GB/s and 1 µs.
constexpr int kIncastN = 8;
constexpr std::int64_t kIncastS = 4'000'000;
PacketRun incast8(PacketNetworkOptions opt = {}) {
  return run_packets(std::vector<double>(kIncastN + 1, 25 * kG),
                     std::vector<TimePs>(kIncastN + 1, TimePs::from_us(1)),
                     incast(kIncastN, kIncastS), opt);
}

// One flow over two links of 10 GB/s and 1 µs: the last packet leaves the first link at S/C,
// the second link is one packet behind (store and forward), and each hop adds its latency:
// S/C + MTU/C + 2 µs = 104.8576 + 0.4096 + 2 µs, to the picosecond.
TEST(PacketNetwork, OneFlowStoreAndForwardClosedForm) {
  const std::int64_t S = 256 * 4096;
  const PacketRun r = run_packets({10 * kG, 10 * kG}, {TimePs::from_us(1), TimePs::from_us(1)},
                            {{{0, 1}, S}});
  ASSERT_EQ(r.done.size(), 1u);
  EXPECT_EQ(r.done[0].end.ps, 104'857'600 + 409'600 + 2'000'000);
  EXPECT_EQ(r.stats.packets, 256);
  EXPECT_EQ(r.stats.transmissions, 512);
  EXPECT_EQ(r.stats.bytes_delivered, S);
  // The links run at the same rate: no packet waits behind another (one may arrive in the
  // picosecond its predecessor finishes, and is counted queued for no time).
  EXPECT_LE(r.stats.max_queue_bytes, kMtu);
}

// Incast 8 → 1 at 25 GB/s, 1 MiB each, no congestion control: the downlink is busy from the
// first packet's arrival (MTU/C + 1 µs) until all 8 MiB have crossed it, then 1 µs to the
// receiver: 0.16384 + 1 + 335.54432 + 1 µs. The flow level ends every flow at 8 MiB / C; the
// packet level is within 1 % of it (issue 16 asks 5 % for messages of 1 MB and more).
TEST(PacketNetwork, IncastAgainstTheFlowLevel) {
  const int n = 8;
  const std::int64_t S = 1 << 20;
  std::vector<double> cap(n + 1, 25 * kG);
  std::vector<TimePs> lat(n + 1, TimePs::from_us(1));
  const PacketRun r = run_packets(cap, lat, incast(n, S));
  ASSERT_EQ(r.done.size(), static_cast<std::size_t>(n));
  EXPECT_EQ(r.last().ps, 163'840 + 1'000'000 + 335'544'320 + 1'000'000);
  EXPECT_EQ(r.stats.bytes_delivered, n * S);
  // Line-rate senders fill the downlink's queue until PFC pauses them: every ingress link stops
  // at XOFF plus what was in flight while its PAUSE travelled (1 µs back, 1 µs of sending on
  // arrival: 2 × 25 KB, a packet each way), and no ingress ever goes above its buffer.
  const PacketConfig pc;
  EXPECT_GT(r.stats.pauses, 0);
  EXPECT_GT(r.stats.max_queue_bytes, n * pc.pfc_xoff_bytes);
  EXPECT_LE(r.stats.max_queue_bytes, n * (pc.pfc_xoff_bytes + 2 * 25e3 + 2 * kMtu));
  EXPECT_EQ(r.stats.time_above_buffer_s, 0.0);
  // Without PFC, every sender's ingress passes its buffer (a real switch would drop).
  PacketNetworkOptions no_pfc;
  no_pfc.packet.pfc = false;
  const PacketRun lossy = run_packets(cap, lat, incast(n, 2 * S), no_pfc);
  EXPECT_EQ(lossy.stats.pauses, 0);
  EXPECT_GT(lossy.stats.time_above_buffer_s, 0.0);
  const std::vector<FlowDone> fl = run_flows(cap, incast(n, S));
  ASSERT_EQ(fl.size(), static_cast<std::size_t>(n));
  for (const FlowDone& d : fl) {
    const double packet = r.end_of(d.tag).seconds(), flow = d.end.seconds();
    EXPECT_NEAR(packet, flow, 0.01 * flow) << "flow " << d.tag;
  }
}

// Two flows of 1 and 3 MiB through one 25 GB/s bottleneck: the switch's FIFO interleaves them,
// so each gets half until the small one ends (2 MiB / C), then the big one the whole link
// (4 MiB / C): what max-min gives at the flow level, within 1 %.
TEST(PacketNetwork, SharedBottleneckIsFairAsMaxMin) {
  const std::vector<Spec> flows{{{0, 2}, 1 << 20}, {{1, 2}, 3 << 20}};
  const std::vector<double> cap{25 * kG, 25 * kG, 25 * kG};
  const PacketRun r = run_packets(cap, {TimePs{}, TimePs{}, TimePs{}}, flows);
  const std::vector<FlowDone> fl = run_flows(cap, flows);
  ASSERT_EQ(r.done.size(), 2u);
  ASSERT_EQ(fl.size(), 2u);
  EXPECT_NEAR(fl[0].end.seconds(), (2 << 20) / (25 * kG), 1e-12);
  for (const FlowDone& d : fl) {
    EXPECT_NEAR(r.end_of(d.tag).seconds(), d.end.seconds(), 0.01 * d.end.seconds()) << d.tag;
  }
}

// A rate-limited flow sharing its NIC keeps its rate: flow A (4 MB, bound 10 GB/s, a point-to-
// point channel's cap) and flow B (16 MB, unbounded) leave through one 25 GB/s link. Max-min
// gives A 10 and B 15 GB/s, so A ends at 4 MB / 10 GB/s = 400 µs (plus a packet and the hops).
// A's packet that becomes eligible while B's is on the wire waits up to one MTU time; the pacer
// keeps A's schedule instead of restarting the gap from the late send (which ran A at 8.3 GB/s: 479.9 µs).
TEST(PacketNetwork, PacedFlowSharingItsNicKeepsItsRate) {
  Simulation sim(1);
  PacketNetwork& net = sim.emplace<PacketNetwork>(
      std::vector<double>{25 * kG, 25 * kG, 25 * kG},
      std::vector<TimePs>{TimePs{}, TimePs{}, TimePs{}}, PacketNetworkOptions{});
  std::vector<FlowDone> done;
  net.flow_done().subscribe([&done](const FlowDone& d) { done.push_back(d); });
  const std::vector<LinkId> a{0, 1}, b{0, 2};
  net.start_flow({a, 4'000'000, 10 * kG, 1});
  net.start_flow({b, 16'000'000, kUnlimited, 2});
  sim.run();
  ASSERT_EQ(done.size(), 2u);
  const FlowDone& fa = done[0].tag == 1 ? done[0] : done[1];
  const FlowDone& fb = done[0].tag == 1 ? done[1] : done[0];
  EXPECT_NEAR(fa.end.seconds(), 400e-6, 0.005 * 400e-6);
  // B: 15 GB/s while A runs (6 MB), then the whole link for its last 10 MB: 400 + 400 µs.
  EXPECT_NEAR(fb.end.seconds(), 800e-6, 0.005 * 800e-6);
}

PacketNetworkOptions dcqcn() {
  PacketNetworkOptions o;
  o.config.congestion_control = CongestionControl::kDcqcn;
  return o;
}

// ECN marks count packets, each once: a packet marked at one port keeps its mark over the ports
// after it, where it was counted again (a 16-GPU run reported 14.7 M marks for 5.2 M packets).
// Hand-countable: four one-packet senders into link 4, then links 5 and 6, all 10 GB/s, marking
// whenever the class queue holds anything (Kmin = Kmax = 0). The first packet goes straight onto
// the wire, the second waits in front of an empty queue, the third and fourth find one and two
// packets queued: 2 marks. Links 5 and 6 see them one transmission time apart, so no queue there,
// and the two marked packets are not counted again (the old count: 2 x 3 ports = 6, above the 4
// packets sent).
TEST(PacketNetwork, EcnMarksCountEachPacketOnce) {
  PacketNetworkOptions opt;
  opt.packet.kmin_bytes = 0;
  opt.packet.kmax_bytes = 0;
  std::vector<Spec> flows;
  for (LinkId l = 0; l < 4; ++l) flows.push_back({{l, 4, 5, 6}, static_cast<std::int64_t>(kMtu)});
  const PacketRun r = run_packets(std::vector<double>(7, 10 * kG),
                                  std::vector<TimePs>(7, TimePs::from_us(1)), flows, opt);
  ASSERT_EQ(r.done.size(), 4u);
  EXPECT_EQ(r.stats.packets, 4);
  EXPECT_EQ(r.stats.ecn_marks, 2);
  // DCQCN's incast behind a second hop: marks stay at most the packets sent.
  std::vector<Spec> deep;
  for (LinkId l = 0; l < kIncastN; ++l) deep.push_back({{l, kIncastN, kIncastN + 1}, kIncastS});
  const PacketRun d = run_packets(std::vector<double>(kIncastN + 2, 25 * kG),
                                  std::vector<TimePs>(kIncastN + 2, TimePs::from_us(1)), deep,
                                  dcqcn());
  EXPECT_GT(d.stats.ecn_marks, 0);
  EXPECT_LE(d.stats.ecn_marks, d.stats.packets);
}

// A mark stays on its packet to the receiver (ECN's CE codepoint is never cleared), and a
// sender's own port never marks. Four one-packet senders into link 4 (10 GB/s, T = one packet's
// serialization), then link 5 at 4 GB/s (2.5 T); Kmin 0.5 packet, Kmax 1.5, Pmax 1e-300 (a draw
// between them never marks). At link 4 the packets find 0, 0, 1 and 2 packets queued: only the
// fourth is marked (above Kmax). They reach link 5 T apart: the first goes onto the wire
// (t..t+2.5T), the second finds none queued, the third one (a draw, no mark) and the fourth, at
// t+3T after the second went onto the wire at t+2.5T, one again: a draw that does not mark. The
// marked packet arrives marked: under DCQCN one CNP (the old engine's draw cleared the mark: 0).
TEST(PacketNetwork, EcnMarkStaysOnThePacketAndSenderLinksNeverMark) {
  PacketNetworkOptions opt = dcqcn();
  opt.packet.kmin_bytes = 0.5 * kMtu;
  opt.packet.kmax_bytes = 1.5 * kMtu;
  opt.packet.pmax = 1e-300;
  std::vector<Spec> flows;
  for (LinkId l = 0; l < 4; ++l) flows.push_back({{l, 4, 5}, static_cast<std::int64_t>(kMtu)});
  std::vector<double> cap(6, 10 * kG);
  cap[5] = 4 * kG;
  const std::vector<TimePs> lat(6, TimePs::from_us(1));
  const PacketRun r = run_packets(cap, lat, flows, opt);
  ASSERT_EQ(r.done.size(), 4u);
  EXPECT_EQ(r.stats.ecn_marks, 1);
  EXPECT_EQ(r.stats.cnps, 1);
  // Link 4 as a sender's port (a NIC egress): nothing marks there, and link 5's queue stays in
  // the draw band: no mark, no CNP.
  PacketNetworkOptions sender = opt;
  sender.sender_links = {4};
  const PacketRun s = run_packets(cap, lat, flows, sender);
  ASSERT_EQ(s.done.size(), 4u);
  EXPECT_EQ(s.stats.ecn_marks, 0);
  EXPECT_EQ(s.stats.cnps, 0);
  // The same senders with Kmin = Kmax = 0: link 4 marks two packets (EcnMarksCountEachPacketOnce)
  // unless it is a sender link; link 5 (2.5 T a packet) then queues and marks.
  PacketNetworkOptions zero;
  zero.packet.kmin_bytes = 0;
  zero.packet.kmax_bytes = 0;
  zero.sender_links = {4, 5};
  EXPECT_EQ(run_packets(cap, lat, flows, zero).stats.ecn_marks, 0);
  // A sender link that does not exist is refused.
  zero.sender_links = {6};
  EXPECT_THROW(run_packets(cap, lat, flows, zero), Error);
}

// DCQCN on the incast (8 → 1, 25 GB/s, 4 MB each). Line-rate senders keep the downlink busy
// under PFC (the lossless fabric's answer: 372 pauses here) and end at the line-rate floor,
// 32 MB / C, to the packet. DCQCN's purpose (Zhu et al., SIGCOMM'15 §1) is fewer pauses: marks
// beyond Kmin bring CNPs and rate cuts, and the pauses fall to 55. With the paper's 40 Gb/s
// constants (byte counter 10 MB, timer 55 µs, R_AI 40 Mb/s) the cut senders recover slowly at
// 200 Gb/s: the incast takes 5.2 times the floor (docs/network.md, "Packet level"), where the
// flow level's [D] derating gives 1/η(8) = 1.18 times (ConnectX's target-rate rule brings it to
// 1.19 times, DcqcnTargetClampRule; DCQCN's flow-level η stays [D], docs/network.md).
TEST(PacketNetwork, DcqcnTradesPausesForThroughput) {
  const int n = kIncastN;
  const std::int64_t S = kIncastS;
  const PacketRun plain = incast8();
  const PacketRun cc = incast8(dcqcn());
  ASSERT_EQ(cc.done.size(), static_cast<std::size_t>(n));
  EXPECT_EQ(cc.stats.bytes_delivered, n * S);
  const double floor_s = n * S / (25 * kG);
  EXPECT_EQ(plain.stats.cnps, 0);
  EXPECT_GT(plain.stats.pauses, 100);
  EXPECT_NEAR(plain.last().seconds(), floor_s, 0.01 * floor_s);
  EXPECT_GT(cc.stats.ecn_marks, 0);
  EXPECT_GT(cc.stats.cnps, 0);
  EXPECT_EQ(cc.stats.rate_cuts, cc.stats.cnps);
  EXPECT_LT(cc.stats.pauses, plain.stats.pauses / 4);
  EXPECT_GT(cc.last().seconds(), 2 * floor_s);
  EXPECT_LT(cc.last().seconds(), 6 * floor_s);
}

// DCQCN on a dumbbell (two senders, one 25 GB/s bottleneck, the paper's constants): the second
// flow joins at line rate 500 µs after the first. Averaged over 2 ms windows (the flows' rates
// saw-tooth between cuts), both hold within 15 % of the fair share C/2 from the first window on
// and the pair keeps the bottleneck at least 90 % busy. The shares do not become equal: over the
// last 10 ms the incumbent averages 12.78 GB/s (+2 %) and the newcomer 11.78 GB/s (−6 %)
// (docs/network.md, "Packet level"), because the notification point caps CNPs at one per 50 µs
// per flow, so both flows are cut about equally often while the faster one's byte counter fires
// sooner.
TEST(PacketNetwork, DcqcnSharesADumbbellWithinFifteenPercent) {
  Simulation sim(1);
  PacketNetwork& net = sim.emplace<PacketNetwork>(std::vector<double>(3, 25 * kG),
                                                  std::vector<TimePs>(3, TimePs::from_us(1)), dcqcn());
  const std::vector<LinkId> p0{0, 2}, p1{1, 2};
  const FlowId a = net.start_flow({p0, 800'000'000, kUnlimited, 1});
  sim.run_until(TimePs::from_us(500));
  const FlowId b = net.start_flow({p1, 800'000'000, kUnlimited, 2});
  const double half = 12.5 * kG;
  double sa = 0, sb = 0, late_a = 0, late_b = 0;
  for (int us = 1; us <= 20'000; ++us) {
    sim.run_until(TimePs::from_us(500 + us));
    sa += net.rate_Bps(a);
    sb += net.rate_Bps(b);
    if (us % 2000 != 0) continue;
    const double ra = sa / 2000, rb = sb / 2000;
    EXPECT_NEAR(ra, half, 0.15 * half) << "window ending " << us << " µs after the join";
    EXPECT_NEAR(rb, half, 0.15 * half) << "window ending " << us << " µs after the join";
    EXPECT_GT(ra + rb, 0.9 * 25 * kG);
    if (us > 10'000) {
      late_a += ra;
      late_b += rb;
    }
    sa = sb = 0;
  }
  EXPECT_GT(net.stats().cnps, 20);
  // The incumbent's edge, over the last 10 ms: above C/2, by less than 10 %.
  EXPECT_GT(late_a / 5, half);
  EXPECT_LT(late_a / 5, 1.10 * half);
  EXPECT_LT(late_b / 5, late_a / 5);
}

// ConnectX's target-rate rule (clamp_tgt_rate 0): a CNP that follows another with no increase
// between them keeps the older, higher target, so the cut senders recover towards it and the
// 8 → 1 incast ends sooner than with the paper's rule (every CNP resets the target).
TEST(PacketNetwork, DcqcnTargetClampRule) {
  const int n = kIncastN;
  const std::int64_t S = kIncastS;
  PacketNetworkOptions vendor = dcqcn();
  vendor.packet.dcqcn_clamp_target_always = false;
  const PacketRun paper = incast8(dcqcn());
  const PacketRun cx = incast8(vendor);
  ASSERT_EQ(cx.done.size(), static_cast<std::size_t>(n));
  EXPECT_EQ(cx.stats.bytes_delivered, n * S);
  EXPECT_GT(cx.stats.rate_cuts, 0);
  EXPECT_LT(cx.last(), paper.last());
}

// Lowering the ECN thresholds trades queueing delay for throughput: two 20 MB flows into one
// 25 GB/s link under DCQCN (no PFC, so the queue is DCQCN's alone); marking from 1 KB (Kmax
// 20 KB) instead of 5 KB (200 KB) keeps the largest queue at 156 KB instead of 438 KB and the
// pair ends at 1,754 instead of 1,682 µs (line rate: 1,600 µs).
TEST(PacketNetwork, LowerEcnThresholdsTradeQueueForThroughput) {
  const int n = 2;
  std::vector<double> cap(n + 1, 25 * kG);
  std::vector<TimePs> lat(n + 1, TimePs::from_us(1));
  PacketNetworkOptions high = dcqcn(), low = dcqcn();
  high.packet.pfc = low.packet.pfc = false;  // the queue is DCQCN's alone
  low.packet.kmin_bytes = 1e3;
  low.packet.kmax_bytes = 20e3;
  const PacketRun h = run_packets(cap, lat, incast(n, 20'000'000), high);
  const PacketRun l = run_packets(cap, lat, incast(n, 20'000'000), low);
  EXPECT_GT(h.stats.cnps, 0);
  EXPECT_GT(l.stats.cnps, 0);
  EXPECT_LT(l.stats.max_queue_bytes, 0.5 * h.stats.max_queue_bytes);
  EXPECT_GT(l.last(), h.last());
  EXPECT_GT(h.last().seconds(), 40e6 / (25 * kG));
}

// A PFC pause spreads upstream: 4 senders (links 0–3, 25 GB/s) into switch A, A to switch B over
// a 100 GB/s link (4), B to the receiver at 25 GB/s (5). B's queue for link 5 fills from link 4,
// so B pauses link 4; A's queue for link 4 then fills from the senders and A pauses them: two
// hops of pauses, and no ingress past its buffer.
TEST(PacketNetwork, PfcPauseSpreadsUpstream) {
  std::vector<double> cap{25 * kG, 25 * kG, 25 * kG, 25 * kG, 100 * kG, 25 * kG};
  std::vector<TimePs> lat(cap.size(), TimePs::from_us(1));
  std::vector<Spec> flows;
  for (int i = 0; i < 4; ++i) flows.push_back({{i, 4, 5}, 4'000'000});
  Simulation sim;
  PacketNetwork& net = sim.emplace<PacketNetwork>(cap, lat);
  for (std::size_t i = 0; i < flows.size(); ++i) {
    net.start_flow({flows[i].path, flows[i].bytes, kUnlimited, i + 1});
  }
  sim.run();
  EXPECT_GT(net.pauses_on(4), 0);
  for (LinkId l = 0; l < 4; ++l) EXPECT_GT(net.pauses_on(l), 0) << "sender link " << l;
  EXPECT_EQ(net.pauses_on(5), 0);  // the receiver never pauses
  EXPECT_EQ(net.stats().time_above_buffer_s, 0.0);
  EXPECT_EQ(net.stats().bytes_delivered, 16'000'000);
}

// A random permutation on the k = 8 fat tree (128 hosts at 100 Gb/s, Al-Fares et al.), 4 MB per
// host, ECMP paths from the router: the flows collide on edge and aggregation uplinks.
// Without PFC (unbounded FIFOs) the packet level ends when the flow level's max-min does, within
// 1 % (1,286.6 against 1,280.0 µs); single flows differ by up to half (a FIFO shares a port in
// proportion to what arrives, max-min by the flows' other bottlenecks). With PFC, pauses spread
// from the hot ports to flows that do not cross them (head-of-line blocking): 13,455 pauses and
// the permutation takes 34 % longer (1,719 µs). The flow level does not model that spreading.
TEST(PacketNetwork, RandomPermutationOnK8FatTree) {
  const topo::ClusterGraph g = topo::build_fat_tree(8);
  topo::Router router(g, topo::RoutingConfig{});
  Rng rng(11);
  std::vector<topo::GpuId> dst(128);
  for (int i = 0; i < 128; ++i) dst[static_cast<std::size_t>(i)] = i;
  const auto has_fixed_point = [&] {
    for (int i = 0; i < 128; ++i) {
      if (dst[static_cast<std::size_t>(i)] == i) return true;
    }
    return false;
  };
  do {
    rng.shuffle(dst.begin(), dst.end());
  } while (has_fixed_point());
  std::vector<Spec> flows;
  std::vector<LinkId> path;
  for (int i = 0; i < 128; ++i) {
    ASSERT_TRUE(router.route({i, dst[static_cast<std::size_t>(i)], 0}, path));
    flows.push_back({path, 4'000'000});
  }
  const std::vector<FlowDone> f = run_flows(g.link_capacity_Bps(), flows);
  ASSERT_EQ(f.size(), 128u);
  TimePs flow_last;
  for (const FlowDone& d : f) flow_last = std::max(flow_last, d.end);
  PacketNetworkOptions lossy;
  lossy.packet.pfc = false;
  const PacketRun q = run_packets(g.link_capacity_Bps(), g.link_latency(), flows, lossy);
  ASSERT_EQ(q.done.size(), 128u);
  EXPECT_NEAR(q.last().seconds(), flow_last.seconds(), 0.01 * flow_last.seconds());
  const PacketRun p = run_packets(g.link_capacity_Bps(), g.link_latency(), flows);
  ASSERT_EQ(p.done.size(), 128u);
  EXPECT_GT(p.stats.pauses, 1000);
  EXPECT_GT(p.last().seconds(), 1.2 * flow_last.seconds());
  EXPECT_EQ(p.stats.time_above_buffer_s, 0.0);
}

// A link flap under go-back-N: one flow of S = 2,441 full packets over two 25 GB/s links of 1 µs,
// the second link down from 100 to 600 µs. What it carries and what reaches it is lost; the
// sender has sent everything by then, so no later packet shows the receiver a gap (no NAK) and
// the flow waits for its RTO, counted from its last accepted byte R: delivered at
// R/C + MTU/C + 2 µs. Going back to R, the rest arrives (S − R)/C + MTU/C + 2 µs after the RTO:
// end = S/C + RTO + 2·MTU/C + 4 µs, whatever R is. With NCCL's default timeout (20: RTO 4.29 s)
// the flap costs the job 4.29 s (MegaScale §3.6's reason for a short RTO). The flow level's flap
// model (stall, then the RTO) gives the same within the packets' 4.3 µs of latency.
TEST(PacketNetwork, LinkFlapRecoversAfterTheRto) {
  const std::int64_t S = 2441 * 4096;
  for (int timeout : {8, 20}) {
    Simulation sim;
    PacketNetworkOptions o;
    o.config.retransmit.timeout = timeout;
    PacketNetwork& net = sim.emplace<PacketNetwork>(std::vector<double>{25 * kG, 25 * kG},
                                                    std::vector<TimePs>(2, TimePs::from_us(1)), o);
    PacketRun r;
    net.flow_done().subscribe([&r](const FlowDone& d) { r.done.push_back(d); });
    const std::vector<LinkId> path{0, 1};
    net.start_flow({path, S, kUnlimited, 1});
    net.schedule_link_flap(1, TimePs::from_us(100), TimePs::from_us(500));
    sim.run();
    ASSERT_EQ(r.done.size(), 1u) << timeout;
    const TimePs rto{4'096'000LL << timeout};  // 4.096 µs · 2^timeout
    EXPECT_EQ(r.done[0].end.ps, 399'933'440 + rto.ps + 2 * 163'840 + 4'000'000) << timeout;
    EXPECT_GT(net.stats().dropped, 0);
    EXPECT_EQ(net.stats().timeouts, 1);
    EXPECT_EQ(net.stats().naks, 0);
    EXPECT_GT(net.stats().retransmitted_bytes, 0);
    EXPECT_EQ(net.stats().bytes_delivered, S);
    // The flow level's flap model, same flow and flap.
    Simulation fsim;
    FlowNetworkOptions fo;
    fo.config.retransmit.timeout = timeout;
    FlowNetwork& fnet = fsim.emplace<FlowNetwork>(std::vector<double>{25 * kG, 25 * kG}, fo);
    std::vector<FlowDone> fd;
    fnet.flow_done().subscribe([&fd](const FlowDone& d) { fd.push_back(d); });
    fnet.start_flow({path, S, kUnlimited, 1});
    fnet.schedule_link_flap(1, TimePs::from_us(100), TimePs::from_us(500));
    fsim.run();
    ASSERT_EQ(fd.size(), 1u);
    // It ends 4.3 µs earlier (no propagation, no store and forward): 1,448.5 against 1,452.8 µs.
    EXPECT_LT(fd[0].end, r.done[0].end);
    EXPECT_NEAR(fd[0].end.seconds(), r.done[0].end.seconds(), 5e-6) << timeout;
  }
}

// A too-short RTO retransmits what is only waiting: flow A (8 MB) fills a 12.5 GB/s bottleneck
// from a 25 GB/s sender; flow B starts 100 µs later behind about 1.25 MB of queue (100 µs). With
// an RTO of 65.5 µs (timeout 4) B times out before its first byte arrives and sends again what
// is still queued (spurious retransmissions, dropped as duplicates); with 1.05 ms (timeout 8) it
// does not. No link is down and nothing is lost either way.
TEST(PacketNetwork, TooShortRtoRetransmitsSpuriously) {
  auto run = [](int timeout) {
    Simulation sim;
    PacketNetworkOptions o;
    o.config.retransmit.timeout = timeout;
    o.packet.pfc = false;
    PacketNetwork& net = sim.emplace<PacketNetwork>(
        std::vector<double>{25 * kG, 25 * kG, 12.5 * kG}, std::vector<TimePs>(3, TimePs::from_us(1)),
        o);
    const std::vector<LinkId> a{0, 2}, b{1, 2};
    net.start_flow({a, 8'000'000, kUnlimited, 1});
    sim.schedule_call(TimePs::from_us(100), [&net, &b] { net.start_flow({b, 1'000'000, kUnlimited, 2}); });
    sim.run();
    return net.stats();
  };
  const PacketNetworkStats short_rto = run(4), long_rto = run(8);
  EXPECT_GT(short_rto.timeouts, 0);
  EXPECT_GT(short_rto.retransmitted_bytes, 0);
  EXPECT_GT(short_rto.out_of_order, 0);
  EXPECT_EQ(short_rto.dropped, 0);
  EXPECT_EQ(short_rto.bytes_delivered, 9'000'000);
  EXPECT_EQ(long_rto.timeouts, 0);
  EXPECT_EQ(long_rto.retransmitted_bytes, 0);
  EXPECT_EQ(long_rto.bytes_delivered, 9'000'000);
}

// A link that stays down: retry_count RTOs without progress and the flow fails.
TEST(PacketNetwork, AFlowGivesUpAfterItsRetries) {
  Simulation sim;
  PacketNetworkOptions o;
  o.config.retransmit.timeout = 4;
  o.config.retransmit.retry_count = 3;
  PacketNetwork& net = sim.emplace<PacketNetwork>(std::vector<double>{25 * kG, 25 * kG},
                                                  std::vector<TimePs>(2, TimePs::from_us(1)), o);
  std::vector<FlowFailed> failed;
  net.flow_failed().subscribe([&failed](const FlowFailed& f) { failed.push_back(f); });
  const std::vector<LinkId> path{0, 1};
  net.start_flow({path, 1'000'000, kUnlimited, 7});
  net.schedule_link_flap(1, TimePs::from_us(10), TimePs::from_seconds(1.0));
  sim.run();
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(failed[0].tag, 7u);
  EXPECT_EQ(net.stats().timeouts, 4);  // three retries, then the fourth gives up
  EXPECT_EQ(net.stats().flows_failed, 1);
  EXPECT_LT(net.stats().bytes_delivered, 1'000'000);
}

// Swift and MegaScale's hybrid at the packet level (window control on per-packet ACKs): an
// 8 → 1 incast of 4 MB each at 25 GB/s delivers every byte, never pauses more than line-rate
// senders do, and ends within 10 % of the line-rate floor 32 MB / C (the target delay keeps a
// standing queue at the downlink, so it never idles). Windows are cut on delay (Swift) and on
// ECN echoes (MegaScale).
TEST(PacketNetwork, SwiftAndMegaScaleWindowsOnAnIncast) {
  const int n = kIncastN;
  const std::int64_t S = kIncastS;
  const PacketRun line = incast8();
  const double floor_s = n * S / (25 * kG);
  for (const CongestionControl cc : {CongestionControl::kSwift, CongestionControl::kMegaScale}) {
    PacketNetworkOptions o;
    o.config.congestion_control = cc;
    const PacketRun r = incast8(o);
    ASSERT_EQ(r.done.size(), static_cast<std::size_t>(n)) << to_string(cc);
    EXPECT_EQ(r.stats.bytes_delivered, n * S);
    EXPECT_GT(r.stats.acks, 0);
    EXPECT_LE(r.stats.pauses, line.stats.pauses) << to_string(cc);
    EXPECT_GE(r.last().seconds(), floor_s);
    EXPECT_LT(r.last().seconds(), 1.10 * floor_s) << to_string(cc);
    if (cc == CongestionControl::kSwift) {
      EXPECT_GT(r.stats.delay_cuts, 0);
      EXPECT_EQ(r.stats.ecn_cuts, 0);
    }
  }
}

// Same seed, same run: every completion and every counter.
TEST(PacketNetwork, SameSeedSameRun) {
  const int n = 4;
  std::vector<double> cap(n + 1, 25 * kG);
  std::vector<TimePs> lat(n + 1, TimePs::from_us(1));
  const PacketRun a = run_packets(cap, lat, incast(n, 2'000'000), dcqcn(), 7);
  const PacketRun b = run_packets(cap, lat, incast(n, 2'000'000), dcqcn(), 7);
  ASSERT_EQ(a.done.size(), b.done.size());
  for (std::size_t i = 0; i < a.done.size(); ++i) {
    EXPECT_EQ(a.done[i].tag, b.done[i].tag);
    EXPECT_EQ(a.done[i].end, b.done[i].end);
  }
  EXPECT_EQ(a.stats.ecn_marks, b.stats.ecn_marks);
  EXPECT_EQ(a.stats.cnps, b.stats.cnps);
  EXPECT_EQ(a.stats.max_queue_bytes, b.stats.max_queue_bytes);
}

// Impossible parameters name their key.
// Strict priority at a congested port: two 2 MiB flows from 25 GB/s senders into a 10 GB/s
// link. In one class the FIFO shares the port and both end near 4 MiB / 10 GB/s; with two
// classes the class-0 flow has the port to itself (2 MiB / 10 GB/s, to within one packet) and
// the class-1 flow gets it afterwards (4 MiB / 10 GB/s, within 1 %).
TEST(PacketNetwork, StrictPriorityServesTheHigherClassFirst) {
  const std::vector<double> cap{25 * kG, 25 * kG, 10 * kG};
  const std::vector<TimePs> lat(3, TimePs::from_us(1));
  const std::int64_t S = 2 << 20;
  const auto run = [&](int classes) {
    Simulation sim;
    PacketNetworkOptions o;
    o.packet.priority_classes = classes;
    PacketNetwork& net = sim.emplace<PacketNetwork>(cap, lat, o);
    PacketRun r;
    net.flow_done().subscribe([&r](const FlowDone& d) { r.done.push_back(d); });
    const std::vector<LinkId> low{0, 2}, high{1, 2};
    net.start_flow({low, S, kUnlimited, 1, classes > 1 ? 1 : 0});
    net.start_flow({high, S, kUnlimited, 2, 0});
    sim.run();
    r.stats = net.stats();
    return r;
  };
  const double half = S / (10 * kG), both = 2 * S / (10 * kG);
  const PacketRun one = run(1);
  EXPECT_NEAR(one.end_of(1).seconds(), both, 0.02 * both);
  EXPECT_NEAR(one.end_of(2).seconds(), both, 0.02 * both);
  const PacketRun two = run(2);
  // Alone it would end at S/C + the first packet's 25 GB/s hop + 2 × 1 µs; the first low-class
  // packet may be in service when the first high one arrives (a port does not preempt): at most
  // one packet of 0.41 µs later.
  const double alone = half + kMtu / (25 * kG) + 2e-6;
  EXPECT_GE(two.end_of(2).seconds(), alone - 1e-12);
  EXPECT_LE(two.end_of(2).seconds(), alone + kMtu / (10 * kG) + 1e-12);
  EXPECT_NEAR(two.end_of(1).seconds(), both, 0.01 * both);
  EXPECT_EQ(two.stats.bytes_delivered, 2 * S);
}

// ETS (802.1Qaz) by deficit round robin, weights 3 : 1: two 3 MiB flows from 25 GB/s senders
// into a 10 GB/s port. Both classes stay backlogged, so class 0 gets 7.5 GB/s and ends at
// 3 MiB / 7.5 GB/s; class 1 then has the port (work conserving) and ends with all 6 MiB through
// it, at 6 MiB / 10 GB/s. Within 1 % (latencies and the first packets are a few µs).
TEST(PacketNetwork, EtsSharesAPortByTheClassWeights) {
  const std::vector<double> cap{25 * kG, 25 * kG, 10 * kG};
  const std::vector<TimePs> lat(3, TimePs::from_us(1));
  const std::int64_t S = 3 << 20;
  Simulation sim;
  PacketNetworkOptions o;
  o.packet.priority_classes = 2;
  o.packet.scheduling = PacketConfig::Scheduling::kEts;
  o.packet.class_weights[0] = 3;
  o.packet.class_weights[1] = 1;
  PacketNetwork& net = sim.emplace<PacketNetwork>(cap, lat, o);
  PacketRun r;
  net.flow_done().subscribe([&r](const FlowDone& d) { r.done.push_back(d); });
  const std::vector<LinkId> a{0, 2}, b{1, 2};
  net.start_flow({a, S, kUnlimited, 1, 0});
  net.start_flow({b, S, kUnlimited, 2, 1});
  sim.run();
  const double first = S / (7.5 * kG), both = 2 * S / (10 * kG);
  EXPECT_NEAR(r.end_of(1).seconds(), first, 0.01 * first);
  EXPECT_NEAR(r.end_of(2).seconds(), both, 0.01 * both);
  EXPECT_EQ(net.stats().bytes_delivered, 2 * S);
}

// PFC per class (802.1Qbb): a class-1 flow into a slow 5 GB/s port fills the next switch's
// ingress over the shared 100 GB/s link, which pauses that link. With one class the pause stops
// the class-0 flow behind it too (head-of-line blocking: it ends more than 1.5× later than
// alone); with two classes only class 1 is paused and the class-0 flow ends as it does alone,
// within 1 %.
TEST(PacketNetwork, PriorityClassesPauseOnlyTheirClass) {
  // 0: low sender → S1, 1: high sender → S1, 2: S1 → S2, 3: S2 → high receiver, 4: S2 → low.
  const std::vector<double> cap{25 * kG, 25 * kG, 100 * kG, 25 * kG, 5 * kG};
  const std::vector<TimePs> lat(cap.size(), TimePs::from_us(1));
  const std::int64_t S = 4'000'000;
  const std::vector<LinkId> low{0, 2, 4}, high{1, 2, 3};
  const auto run = [&](int classes, bool with_low) {
    Simulation sim;
    PacketNetworkOptions o;
    o.packet.priority_classes = classes;
    PacketNetwork& net = sim.emplace<PacketNetwork>(cap, lat, o);
    TimePs high_end;
    std::int64_t pauses_shared = 0;
    net.flow_done().subscribe([&](const FlowDone& d) {
      if (d.tag == 2) {
        high_end = d.end;
        pauses_shared = net.pauses_on(2);
      }
    });
    if (with_low) net.start_flow({low, S, kUnlimited, 1, classes - 1});
    net.start_flow({high, S, kUnlimited, 2, 0});
    sim.run();
    EXPECT_EQ(net.stats().bytes_delivered, (with_low ? 2 : 1) * S);
    return std::pair{high_end.seconds(), pauses_shared};
  };
  const double alone = run(1, false).first;
  const auto [blocked, pauses_one] = run(1, true);
  const auto [free, pauses_two] = run(2, true);
  EXPECT_GT(pauses_one, 0);
  EXPECT_GT(pauses_two, 0);  // the shared link is paused in both runs, for class 1 only in this
  EXPECT_GT(blocked, 1.5 * alone);
  EXPECT_NEAR(free, alone, 0.01 * alone);
}

// Which class the executor gives a job's traffic (network.packet.priority_by).
TEST(PacketNetwork, PriorityByJobOrDimension) {
  using plan::Dim;
  PacketConfig pc;
  pc.priority_classes = 8;
  EXPECT_EQ(exec::priority_class(pc, 3, Dim::kTp), 0);  // none: one class for all
  pc.priority_by = PacketConfig::PriorityBy::kJob;
  EXPECT_EQ(exec::priority_class(pc, 3, Dim::kTp), 3);
  EXPECT_EQ(exec::priority_class(pc, 11, Dim::kDp), 7);  // beyond the last class: the last
  pc.priority_by = PacketConfig::PriorityBy::kDimension;
  EXPECT_EQ(exec::priority_class(pc, 5, Dim::kTp), 0);
  EXPECT_EQ(exec::priority_class(pc, 5, Dim::kCp), 1);
  EXPECT_EQ(exec::priority_class(pc, 5, Dim::kEp), 2);
  EXPECT_EQ(exec::priority_class(pc, 5, Dim::kPp), 3);
  EXPECT_EQ(exec::priority_class(pc, 5, Dim::kDp), 4);
  EXPECT_EQ(exec::priority_class(pc, 5, Dim::kExpertDp), 4);
  pc.priority_classes = 2;  // TP above everything else
  EXPECT_EQ(exec::priority_class(pc, 0, Dim::kTp), 0);
  EXPECT_EQ(exec::priority_class(pc, 0, Dim::kPp), 1);
  EXPECT_EQ(exec::priority_class(pc, 0, Dim::kDp), 1);
}

// Packet spraying on a leaf-spine with two spines: hosts h1, h2 under leaf A send S = 4 MiB
// each to h3, h4 under leaf B; every link 25 GB/s and 1 µs. Links: 0 h1→A, 1 h2→A, 2 A→s1,
// 3 A→s2, 4 s1→B, 5 s2→B, 6 B→h3, 7 B→h4.
//  - Both flows hashed onto spine 1 (an ECMP collision): they share link 2 and each ends near
//    2S/C (max-min: C/2 each).
//  - Sprayed over both spines: the two uplinks carry 2C together, each flow runs at its NIC's
//    C and ends near S/C; what random spraying adds is the imbalance of a fair coin over the
//    2,048 packets (σ ≈ 23 packets ≈ 3.7 µs of the 168 µs) and the queues it builds: within
//    10 %. Packets overtake each other (reordered > 0), every byte arrives once, and the same
//    seed gives the same end to the picosecond.
struct SprayRun {
  TimePs end1, end2;
  PacketNetworkStats stats;
};
SprayRun run_leaf_spine(bool spray, std::uint64_t seed, TimePs flap_at = TimePs::never()) {
  const std::vector<double> cap(8, 25 * kG);
  const std::vector<TimePs> lat(8, TimePs::from_us(1));
  Simulation sim(seed);
  PacketNetworkOptions o;
  o.config.retransmit.timeout = 4;  // 65.5 µs
  PacketNetwork& net = sim.emplace<PacketNetwork>(cap, lat, o);
  SprayRun r;
  net.flow_done().subscribe([&r](const FlowDone& d) { (d.tag == 1 ? r.end1 : r.end2) = d.end; });
  const std::int64_t S = 4 << 20;
  const std::vector<LinkId> p1{0, 2, 4, 6}, p2{1, 2, 4, 7};
  // Flow 1: {0,2,4,6}, {0,3,5,6}; flow 2: {1,2,4,7}, {1,3,5,7}.
  const std::vector<LinkId> alt1{0, 2, 4, 6, 0, 3, 5, 6}, alt2{1, 2, 4, 7, 1, 3, 5, 7};
  const std::vector<std::uint32_t> offsets{0, 4, 8};
  FlowSpec f1{p1, S, kUnlimited, 1, 0};
  FlowSpec f2{p2, S, kUnlimited, 2, 0};
  if (spray) {
    f1.spray_links = alt1;
    f1.spray_offset = offsets;
    f2.spray_links = alt2;
    f2.spray_offset = offsets;
  }
  net.start_flow(f1);
  net.start_flow(f2);
  if (flap_at != TimePs::never()) net.schedule_link_flap(3, flap_at, TimePs::from_us(20));
  sim.run();
  r.stats = net.stats();
  return r;
}

TEST(PacketNetwork, SprayingSpreadsAFlowOverEqualCostPaths) {
  const double S = 4 << 20, C = 25 * kG;
  const SprayRun ecmp = run_leaf_spine(false, 1);
  EXPECT_NEAR(ecmp.end1.seconds(), 2 * S / C, 0.03 * 2 * S / C);
  EXPECT_NEAR(ecmp.end2.seconds(), 2 * S / C, 0.03 * 2 * S / C);
  EXPECT_EQ(ecmp.stats.reordered, 0);
  EXPECT_EQ(ecmp.stats.sprayed_flows, 0);

  const SprayRun spray = run_leaf_spine(true, 1);
  EXPECT_GE(spray.end1.seconds(), S / C);
  EXPECT_LE(spray.end1.seconds(), 1.10 * S / C);
  EXPECT_LE(spray.end2.seconds(), 1.10 * S / C);
  EXPECT_EQ(spray.stats.sprayed_flows, 2);
  EXPECT_GT(spray.stats.reordered, 0);
  EXPECT_EQ(spray.stats.bytes_delivered, 2 * (4 << 20));
  EXPECT_EQ(spray.stats.naks, 0);  // reordering is not a loss
  EXPECT_EQ(spray.stats.retransmitted_bytes, 0);
  // Every packet took one of the two routes: 4 hops each, 1,024 packets per flow.
  EXPECT_EQ(spray.stats.transmissions, 2 * 1024 * 4);
  const SprayRun again = run_leaf_spine(true, 1);
  EXPECT_EQ(again.end1.ps, spray.end1.ps);
  EXPECT_EQ(again.end2.ps, spray.end2.ps);
  EXPECT_EQ(again.stats.reordered, spray.stats.reordered);
}

// A flap of spine 2's uplink (link 3) for 20 µs while both flows spray: the packets on and
// behind it are lost, the receivers place what follows and send no NAK, and the RTO (65.5 µs
// here) sends the senders back to their first missing byte; every byte still arrives once.
TEST(PacketNetwork, SprayedFlowsRecoverALossByTheirTimeout) {
  const double S = 4 << 20, C = 25 * kG;
  const SprayRun r = run_leaf_spine(true, 1, TimePs::from_us(50));
  EXPECT_GT(r.stats.dropped, 0);
  EXPECT_EQ(r.stats.naks, 0);
  EXPECT_GE(r.stats.timeouts, 1);
  EXPECT_GT(r.stats.retransmitted_bytes, 0);
  EXPECT_EQ(r.stats.bytes_delivered, 2 * (4 << 20));
  EXPECT_GT(std::max(r.end1, r.end2).seconds(), S / C + 65.5e-6);
}

// A sprayed flow's paths must leave over its first link.
TEST(PacketNetwork, SprayedPathsMustLeaveOverTheFirstLink) {
  Simulation sim;
  PacketNetwork& net = sim.emplace<PacketNetwork>(std::vector<double>(3, kG),
                                                  std::vector<TimePs>(3, TimePs{}));
  const std::vector<LinkId> path{0, 2}, alt{0, 2, 1, 2};
  const std::vector<std::uint32_t> offsets{0, 2, 4};
  FlowSpec f{path, 4096, kUnlimited, 1, 0};
  f.spray_links = alt;
  f.spray_offset = offsets;
  EXPECT_THROW(net.start_flow(f), Error);
}

TEST(PacketNetwork, BadParametersNameTheirKey) {
  auto field_of = [](PacketConfig p) -> std::string {
    Simulation sim;
    PacketNetworkOptions o;
    o.packet = p;
    try {
      sim.emplace<PacketNetwork>(std::vector<double>{kG}, std::vector<TimePs>{TimePs{}}, o);
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInput);
      return e.where().field;
    }
    return "";
  };
  PacketConfig p;
  p.buffer_bytes = kMtu - 1;
  EXPECT_EQ(field_of(p), "network.packet.buffer_bytes");
  p = PacketConfig{};
  p.kmin_bytes = 300e3;
  EXPECT_EQ(field_of(p), "network.packet.kmax_bytes");
  p = PacketConfig{};
  p.pmax = 1.5;
  EXPECT_EQ(field_of(p), "network.packet.pmax");
  p = PacketConfig{};
  p.priority_classes = 9;
  EXPECT_EQ(field_of(p), "network.packet.priority_classes");
  // Weights within bounds each, but 1e-300 beside 1 (a quantum of 4e303 bytes) was accepted.
  p = PacketConfig{};
  p.class_weights[0] = 1e-300;
  EXPECT_EQ(field_of(p), "network.packet.class_weights");
  p.class_weights[0] = 1e-6;
  EXPECT_EQ(field_of(p), "");
  // A flow in a class the ports do not have.
  Simulation sim;
  PacketNetwork& net =
      sim.emplace<PacketNetwork>(std::vector<double>{kG}, std::vector<TimePs>{TimePs{}});
  const std::vector<LinkId> path{0};
  try {
    net.start_flow({path, 4096, kUnlimited, 1, 1});
    ADD_FAILURE() << "class 1 of one class was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.where().field, "network.packet.priority_classes");
  }
  EXPECT_EQ(field_of(PacketConfig{}), "");
}

}  // namespace
}  // namespace trainsim::net
