// sim/collective/analytic: α–β costs against the closed forms of network-models.md §4.
#include "sim/collective/analytic.h"
#include "sim/collective/comm_init.h"

#include <gtest/gtest.h>

#include "sim/core/error.h"

namespace trainsim::coll {
namespace {

LinkModel links() {
  LinkModel l;
  l.nvlink_busbw_Bps = 200e9;
  l.nic_Bps_per_gpu = 25e9;
  l.set_ring_simple(5e-6, 2e-6, 10e-6);
  return l;
}

const Choice kRingSimple{Algorithm::kRing, Protocol::kSimple};

TEST(Collective, BusBandwidthFactors) {
  EXPECT_DOUBLE_EQ(busbw_factor(Kind::kAllReduce, 8), 2.0 * 7 / 8);
  EXPECT_DOUBLE_EQ(busbw_factor(Kind::kAllGather, 8), 7.0 / 8);
  EXPECT_DOUBLE_EQ(busbw_factor(Kind::kReduceScatter, 4), 3.0 / 4);
  EXPECT_DOUBLE_EQ(busbw_factor(Kind::kAllToAll, 2), 0.5);
  EXPECT_DOUBLE_EQ(busbw_factor(Kind::kBroadcast, 16), 1.0);
  EXPECT_DOUBLE_EQ(busbw_factor(Kind::kAllReduce, 1), 0.0);
}

// Ring all-reduce on one idle server: T = base + 2(n−1)·α + 2(n−1)/n · S / B.
TEST(Collective, RingAllReduceInsideServer) {
  const double S = 1 << 30;
  const Cost c = collective_cost(Kind::kAllReduce, S, GroupShape{8, 8, 1, 1}, links(), kRingSimple);
  EXPECT_DOUBLE_EQ(c.time_s, 5e-6 + 14 * 2e-6 + 2.0 * 7 / 8 * S / 200e9);
  EXPECT_DOUBLE_EQ(c.nvlink_bytes, 2.0 * 7 / 8 * S);
  EXPECT_DOUBLE_EQ(c.nic_bytes, 0);
}

// NVLS is used for an all-reduce inside a server when it is faster than the ring.
TEST(Collective, NvlsAllReduce) {
  LinkModel l = links();
  l.nvls_busbw_Bps = 400e9;
  const double S = 1 << 30;
  // NVLS: 23 µs fixed (NCCL hwLat), then the NVLS bus bandwidth over the buffer and two more
  // loops of the chunk pipeline: 16 CTAs × 8 heads × 128 KiB (1 GiB keeps the largest chunk).
  const Cost c = collective_cost(Kind::kAllReduce, S, GroupShape{8, 8, 1, 1}, l);
  EXPECT_EQ(c.algorithm, Algorithm::kNvls);
  EXPECT_DOUBLE_EQ(c.time_s, 23e-6 + 2.0 * 7 / 8 * (S + 2 * 16 * 8 * 131072.0) / 400e9);
  const Cost ag = collective_cost(Kind::kAllGather, S, GroupShape{8, 8, 1, 1}, l, kRingSimple);
  EXPECT_DOUBLE_EQ(ag.time_s, 5e-6 + 7 * 2e-6 + 7.0 / 8 * S / 200e9);
}

// NCCL's NVLS chunk (calcCollChunking): 128 KiB, halved while a CTA's 1/16 of the buffer is below
// 64, 8, 2 × heads × chunk. With 8 heads: 128 KiB from 1 GiB, 64 KiB from 64 MiB, 32 KiB from
// 8 MiB, 16 KiB below; with 4 heads every threshold halves.
TEST(Collective, NvlsChunkShrinksWithTheMessage) {
  const double MiB = 1 << 20;
  EXPECT_EQ(nvls_chunk_bytes(1024 * MiB, 8), 131072);
  EXPECT_EQ(nvls_chunk_bytes(1024 * MiB - 1, 8), 65536);
  EXPECT_EQ(nvls_chunk_bytes(64 * MiB, 8), 65536);
  EXPECT_EQ(nvls_chunk_bytes(64 * MiB - 1, 8), 32768);
  EXPECT_EQ(nvls_chunk_bytes(8 * MiB, 8), 32768);
  EXPECT_EQ(nvls_chunk_bytes(8 * MiB - 1, 8), 16384);
  EXPECT_EQ(nvls_chunk_bytes(1, 8), 16384);
  EXPECT_EQ(nvls_chunk_bytes(512 * MiB, 4), 131072);
  EXPECT_EQ(nvls_chunk_bytes(32 * MiB - 1, 4), 32768);
  // The pipeline's fill and drain: two loops (16 CTAs × heads × chunk), or twice the buffer when
  // it is smaller than one loop.
  EXPECT_EQ(nvls_pipeline_fill_bytes(8 * MiB, 8), 2 * 16 * 8 * 32768.0);
  EXPECT_EQ(nvls_pipeline_fill_bytes(1 * MiB, 8), 2 * MiB);
}

// The published 8-GPU H100 curve by hand (docs/network.md): at 8 MiB the pipeline adds 8 MiB
// of time to 8 MiB of data, so busbw is about half the peak; at 1 GiB it adds 3 %.
TEST(Collective, NvlsRampsUpWithTheMessage) {
  LinkModel l = links();
  l.nvls_busbw_Bps = 480e9;
  const GroupShape server{8, 8, 1, 1};
  const double MiB = 1 << 20;
  auto busbw = [&](double S) {
    const Cost c = collective_cost(Kind::kAllReduce, S, server, l, Choice{Algorithm::kNvls, {}});
    return 2.0 * 7 / 8 * S / c.time_s;
  };
  EXPECT_NEAR(busbw(8 * MiB), 1.75 * 8 * MiB / (23e-6 + 1.75 * 16 * MiB / 480e9), 1e-3);
  EXPECT_NEAR(busbw(1024 * MiB), 1.75 * 1024 * MiB / (23e-6 + 1.75 * 1056 * MiB / 480e9), 1e-3);
  EXPECT_LT(busbw(8 * MiB), 0.4 * 480e9);
  EXPECT_GT(busbw(1024 * MiB), 0.96 * 480e9);
  // Across servers NVLS_TREE's pipeline is not modelled: no fill term. With NICs that do not
  // bound it, the switch moves the buffer at the 8-GPU algorithm bandwidth (480 · 8/14).
  l.nic_Bps_per_gpu = 1e12;
  const Cost two = collective_cost(Kind::kAllReduce, 8 * MiB, GroupShape{16, 8, 2, 1}, l,
                                   Choice{Algorithm::kNvls, {}});
  EXPECT_NEAR(two.time_s, 23e-6 + 2 * 18e-6 + 8 * MiB / (480e9 * 8 / 14), 1e-15);
}

// What one GPU's links carry in an NVLS all-reduce does not depend on how many GPUs share the
// switch, so the algorithm bandwidth is the 8-GPU run's (480 · 8/14 = 274 GB/s) at 3 or 4 GPUs
// and the bus bandwidth shrinks with 2(g−1)/g: 411 GB/s at 4, not 480 (NCCL's tuner: NVLS bus
// to algorithm bandwidth × 5/6 whatever nRanks). With two or fewer GPUs of the group on a
// server NCCL (v2.17–v2.27, ncclNvlsInit) does not run NVLS at all.
TEST(Collective, NvlsAlgorithmBandwidthDoesNotGrowAsTheGroupShrinks) {
  LinkModel l = links();
  l.nvlink_busbw_Bps = 370e9;
  l.nvls_busbw_Bps = 480e9;
  EXPECT_DOUBLE_EQ(nvls_algbw(l), 480e9 * 8 / 14);
  const double S = 1 << 30;
  const double fill4 = nvls_pipeline_fill_bytes(S, 4);
  const Cost four = collective_cost(Kind::kAllReduce, S, GroupShape{4, 4, 1, 1}, l,
                                    Choice{Algorithm::kNvls, {}});
  EXPECT_NEAR(four.time_s, 23e-6 + (S + fill4) / (480e9 * 8 / 14), 1e-12);
  EXPECT_NEAR(2.0 * 3 / 4 * nvls_algbw(l), 411.4e9, 0.1e9);  // its bus bandwidth
  // Eight GPUs keep the profile's figure exactly.
  const Cost eight = collective_cost(Kind::kAllReduce, S, GroupShape{8, 8, 1, 1}, l,
                                     Choice{Algorithm::kNvls, {}});
  EXPECT_DOUBLE_EQ(eight.time_s, 23e-6 + 1.75 * (S + nvls_pipeline_fill_bytes(S, 8)) / 480e9);
  // Four GPUs: NVLS (274 GB/s of buffer) still beats the ring (370 · 4/6 = 247 GB/s).
  EXPECT_EQ(collective_cost(Kind::kAllReduce, S, GroupShape{4, 4, 1, 1}, l).algorithm,
            Algorithm::kNvls);
  // Two GPUs (a TP-2 group), or two per server across servers: no NVLS; asking for it is an
  // error that says why.
  for (const GroupShape& g : {GroupShape{2, 2, 1, 1}, GroupShape{4, 2, 2, 1}}) {
    EXPECT_NE(collective_cost(Kind::kAllReduce, S, g, l).algorithm, Algorithm::kNvls);
    try {
      collective_cost(Kind::kAllReduce, S, g, l, Choice{Algorithm::kNvls, {}});
      ADD_FAILURE() << "NVLS on two GPUs per server was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("more than 2"), std::string::npos) << e.what();
    }
  }
  const Cost two = collective_cost(Kind::kAllReduce, S, GroupShape{2, 2, 1, 1}, l);
  EXPECT_EQ(two.algorithm, Algorithm::kRing);
  EXPECT_NEAR(two.time_s, 5e-6 + 2 * 2e-6 + S / 370e9, 1e-12);
}

// NCCL picks the pair its own tuning model rates fastest (latency + bytes / bandwidth, no chunk
// pipeline), then the kernel takes what it takes. At 2 MiB on an H100-like server NVLS's model
// time (23 + 7.6 µs) beats the ring's (Simple: 33 + 9.9 µs), so NVLS runs, although with its
// pipeline (4 MiB more of time: 45.9 µs) it is slower than the ring would be (42.9 µs).
TEST(Collective, ChoiceFollowsTheTunerModelNotTheKernel) {
  LinkModel l = links();
  l.nvlink_busbw_Bps = 370e9;
  l.nvls_busbw_Bps = 480e9;
  const double S = 2 << 20;
  const GroupShape server{8, 8, 1, 1};
  const Cost chosen = collective_cost(Kind::kAllReduce, S, server, l);
  EXPECT_EQ(chosen.algorithm, Algorithm::kNvls);
  const Cost ring = collective_cost(Kind::kAllReduce, S, server, l, Choice{Algorithm::kRing, {}});
  EXPECT_NEAR(chosen.time_s, 23e-6 + 1.75 * 3 * S / 480e9, 1e-12);
  EXPECT_NEAR(ring.time_s, 5e-6 + 14 * 2e-6 + 1.75 * S / 370e9, 1e-12);
  EXPECT_GT(chosen.time_s, ring.time_s);
}

// Tree inside one server (NCCL tuning.cc): algorithm bandwidth is half the bus bandwidth, and
// LL128 runs at 7/9 of it.
TEST(Collective, TreeInsideOneServer) {
  const LinkModel l = links();
  const double S = 1 << 20;
  const Cost t = collective_cost(Kind::kAllReduce, S, GroupShape{8, 8, 1, 1}, l,
                                 Choice{Algorithm::kTree, Protocol::kLL128});
  EXPECT_NEAR(t.time_s, 14e-6 + 2 * 7 * 1.25e-6 + 2.0 * S / (0.92 * 200e9 * 7 / 9), 1e-12);
}

// One rank per server (a DP ring on rails): every step crosses the network at the NIC rate.
// All-gather: n−1 steps, nodes−1 of them network steps (all of them here).
TEST(Collective, RingAcrossServersOnePerNode) {
  const double S = 64e6;
  const Cost c = collective_cost(Kind::kAllGather, S, GroupShape{16, 1, 16, 1}, links(), kRingSimple);
  EXPECT_DOUBLE_EQ(c.time_s, 5e-6 + 15 * 10e-6 + 15.0 / 16 * S / 25e9);
  EXPECT_DOUBLE_EQ(c.nic_bytes, 15.0 / 16 * S);
}

// g ranks per server: busbw = min(g·B_nic, g/(g−1)·B_nvlink); bytes split g−1 : 1.
TEST(Collective, HierarchicalBandwidth) {
  const double S = 1e9;
  const Cost c = collective_cost(Kind::kAllReduce, S, GroupShape{32, 4, 8, 1}, links(), kRingSimple);
  const double busbw = std::min(4 * 25e9, 4.0 / 3 * 200e9);
  const int steps = 2 * 31, net = 2 * 8;
  EXPECT_DOUBLE_EQ(c.time_s, 5e-6 + (steps - net) * 2e-6 + net * 10e-6 + 2.0 * 31 / 32 * S / busbw);
  // Bytes conserved: what each rank sends is the bus-bandwidth volume, split by link type.
  EXPECT_DOUBLE_EQ(c.nic_bytes + c.nvlink_bytes, 2.0 * 31 / 32 * S);
  EXPECT_DOUBLE_EQ(c.nic_bytes, 2.0 * 31 / 32 * S / 4);
}

// All-to-all: (g−1)/n of the buffer stays on NVLink, (n−g)/n crosses the NIC; the slower decides.
TEST(Collective, AllToAll) {
  const double S = 8e8;
  const Cost c = collective_cost(Kind::kAllToAll, S, GroupShape{16, 8, 2, 1}, links());
  EXPECT_DOUBLE_EQ(c.nvlink_bytes, S * 7 / 16);
  EXPECT_DOUBLE_EQ(c.nic_bytes, S * 8 / 16);
  const double lat = 5e-6 + 7 * 2e-6 + 8 * 10e-6 / 8;
  EXPECT_DOUBLE_EQ(c.time_s, lat + std::max(S * 7 / 16 / 200e9, S * 8 / 16 / 25e9));
}

// Crossing a 1:7 oversubscribed tier slows the crossing share of an all-to-all.
TEST(Collective, AbovePodOversubscription) {
  LinkModel l = links();
  l.above_pod_oversubscription = 7;
  const double S = 8e8;
  const Cost in_pod = collective_cost(Kind::kAllToAll, S, GroupShape{16, 1, 16, 1}, l);
  const Cost two_pods = collective_cost(Kind::kAllToAll, S, GroupShape{16, 1, 16, 2}, l);
  EXPECT_NEAR((two_pods.time_s - in_pod.time_s) / (S * 15 / 16 / 25e9), 3.5 - 1.0, 1e-9);
}

TEST(Collective, SendRecv) {
  const Cost inter = collective_cost(Kind::kSendRecv, 1e8, GroupShape{2, 1, 2, 1}, links());
  EXPECT_DOUBLE_EQ(inter.time_s, 5e-6 + 10e-6 + 1e8 / 25e9);
  EXPECT_DOUBLE_EQ(inter.nic_bytes, 1e8);
  const Cost intra = collective_cost(Kind::kSendRecv, 1e8, GroupShape{2, 2, 1, 1}, links());
  EXPECT_DOUBLE_EQ(intra.time_s, 5e-6 + 2e-6 + 1e8 / 200e9);
}

// Small messages: the tuner picks LL (6.6 µs base + 0.6 µs per NVLink step); 8 B over 8 GPUs of a
// DGX H100 costs ≈ 15 µs, near nccl-tests' ≈ 13 µs. Large messages: Simple.
TEST(Collective, ProtocolChoiceBySize) {
  LinkModel l = links();
  const Cost tiny = collective_cost(Kind::kAllReduce, 8, GroupShape{8, 8, 1, 1}, l);
  EXPECT_EQ(tiny.protocol, Protocol::kLL);
  EXPECT_NEAR(tiny.time_s, 6.6e-6 + 14 * 0.6e-6 + 2.0 * 7 / 8 * 8 / (0.25 * 200e9), 1e-12);
  const Cost big = collective_cost(Kind::kAllReduce, 1 << 30, GroupShape{8, 8, 1, 1}, l);
  EXPECT_EQ(big.protocol, Protocol::kSimple);
  // Every protocol is slower than the chosen one at each size (the tuner takes the minimum).
  for (double S : {8.0, 65536.0, 16e6, 1e9}) {
    const Cost best = collective_cost(Kind::kAllReduce, S, GroupShape{64, 8, 8, 1}, l);
    for (Algorithm a : {Algorithm::kRing, Algorithm::kTree}) {
      for (Protocol p : {Protocol::kLL, Protocol::kLL128, Protocol::kSimple}) {
        EXPECT_LE(best.time_s, collective_cost(Kind::kAllReduce, S, GroupShape{64, 8, 8, 1}, l,
                                               Choice{a, p}).time_s);
      }
    }
  }
}

// Tree: latency grows with log2(nodes), so at mid sizes on many servers it beats the ring.
TEST(Collective, TreeBeatsRingAtMidSizesOnManyServers) {
  const GroupShape g{1024, 8, 128, 1};
  const Cost tr = collective_cost(Kind::kAllReduce, 1 << 20, g, links(), Choice{Algorithm::kTree, {}});
  const Cost rg = collective_cost(Kind::kAllReduce, 1 << 20, g, links(), Choice{Algorithm::kRing, {}});
  EXPECT_LT(tr.time_s, rg.time_s);
}

TEST(Collective, UnsupportedChoicesAreErrors) {
  // NVLS on a GPU without NVLink SHARP (A100), tree for all-gather, a protocol for all-to-all.
  EXPECT_THROW(collective_cost(Kind::kAllReduce, 1e6, GroupShape{8, 8, 1, 1}, links(),
                               Choice{Algorithm::kNvls, {}}), Error);
  EXPECT_THROW(collective_cost(Kind::kAllGather, 1e6, GroupShape{16, 8, 2, 1}, links(),
                               Choice{Algorithm::kTree, {}}), Error);
  EXPECT_THROW(collective_cost(Kind::kAllToAll, 1e6, GroupShape{16, 8, 2, 1}, links(),
                               Choice{{}, Protocol::kLL}), Error);
}

TEST(Collective, TrivialGroupsCostNothing) {
  EXPECT_EQ(collective_cost(Kind::kAllReduce, 1e9, GroupShape{1, 1, 1, 1}, links()).time_s, 0);
  EXPECT_EQ(collective_cost(Kind::kAllReduce, 0, GroupShape{8, 8, 1, 1}, links()).time_s, 0);
}

}  // namespace
}  // namespace trainsim::coll

namespace trainsim::coll {
namespace {

// MegaScale §3.5 at 2,048 GPUs (TP 8 · PP 8 · DP 32): TCPStore ≈ 1,047 s and Redis ≈ 361 s are the
// two fitted anchors; the barrier-free ordering must come out under 5 s, and above 10,000 GPUs
// under 30 s, as published, without being fitted.
TEST(CommInit, MegaScaleRegimes) {
  const CommInitLayout l2048{2048, 8, 8, 32, 1, 1};
  const CommInitTime tcp = comm_init_time(l2048, StoreKind::kTcpStore, false);
  const CommInitTime redis = comm_init_time(l2048, StoreKind::kRedis, false);
  const CommInitTime ordered = comm_init_time(l2048, StoreKind::kRedis, true);
  EXPECT_EQ(tcp.groups_total, 256 + 256 + 64 + 32 + 256 + 256);
  EXPECT_NEAR(tcp.total_s, 1047, 0.01 * 1047);
  EXPECT_NEAR(redis.total_s, 361, 0.01 * 361);
  EXPECT_LT(ordered.total_s, 5.0);
  const CommInitTime big = comm_init_time({12288, 8, 8, 192, 1, 1}, StoreKind::kRedis, true);
  EXPECT_LT(big.total_s, 30.0);
  // The naive path is quadratic: 6× the GPUs costs far more than 6× the time.
  const CommInitTime big_tcp = comm_init_time({12288, 8, 8, 192, 1, 1}, StoreKind::kTcpStore, false);
  EXPECT_GT(big_tcp.total_s, 20 * tcp.total_s);
}

}  // namespace
}  // namespace trainsim::coll
