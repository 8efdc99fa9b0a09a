// ECMP hashing (topology/hash.h): the RoCEv2 UDP source port, QP numbers, purity of the hash
// functions, and the balls-into-bins statistics of hashed flows against the exact expectation.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "topology/hash.h"

namespace trainsim::topo {
namespace {

// Linux rdma_get_udp_sport, by hand:
// 0x12 * 0x34 = 0x3A8, no bits above 20, so fl = 0x3A8 and port = 0x3A8 | 0xC000 = 50088.
// 0xABCDE * 0x12345 = 0xC379541D6; fl ^= fl >> 20 (0xC379) = 0xC379582AF; fl >> 40 = 0;
// fl & 0xFFFFF = 0x582AF; low 14 bits 0x2AF XOR high 6 bits 0x16 = 0x2B9; | 0xC000 = 0xC2B9.
TEST(RoceSourcePort, MatchesTheKernelFormula) {
  EXPECT_EQ(roce_udp_source_port(0x12, 0x34), 50088);
  EXPECT_EQ(roce_udp_source_port(0xABCDE, 0x12345), 0xC2B9);
  EXPECT_EQ(roce_udp_source_port(0x34, 0x12), 50088);  // symmetric in the two QPs
  for (std::uint32_t q = 2; q < 5000; q += 7) {
    const std::uint16_t p = roce_udp_source_port(q, q * 3 + 1);
    EXPECT_GE(p, 49152);
  }
}

TEST(QpNumbers, ConsecutivePerConnectionAnd24Bit) {
  for (GpuId a : {0, 7, 12287}) {
    for (GpuId b : {1, 8, 4096}) {
      const std::uint32_t base = qp_number(a, b, 0);
      EXPECT_GE(base, 2u);
      EXPECT_LT(base, 1u << 24);
      for (int q = 1; q < 16; ++q)
        EXPECT_EQ(qp_number(a, b, q), base + static_cast<std::uint32_t>(q));
    }
  }
  EXPECT_NE(qp_number(0, 1, 0), qp_number(1, 0, 0));  // each side has its own QP
}

FiveTuple tuple_of(int i) {
  FiveTuple t;
  t.src_ip = 0x0A000001u + static_cast<std::uint32_t>(i % 64);
  t.dst_ip = 0x0A000101u + static_cast<std::uint32_t>(i / 64);
  t.src_port =
      roce_udp_source_port(qp_number(i % 64, 64 + i / 64, 0), qp_number(64 + i / 64, i % 64, 0));
  return t;
}

TEST(EcmpHash, IsAPureFunctionOfTupleAndSeed) {
  for (HashKind kind : {HashKind::kCrc32, HashKind::kXorFold, HashKind::kToeplitz}) {
    int differ = 0;
    for (int i = 0; i < 200; ++i) {
      const FiveTuple t = tuple_of(i);
      const HashParams a = HashParams::from_seed(17);
      const HashParams b = HashParams::from_seed(17);
      EXPECT_EQ(ecmp_hash(kind, t, a), ecmp_hash(kind, t, b));
      differ += ecmp_hash(kind, t, a) != ecmp_hash(kind, t, HashParams::from_seed(18)) ? 1 : 0;
    }
    EXPECT_GE(differ, 195) << to_string(kind);
  }
}

// CRC-32C's standard check value; the per-switch fast path (a flow's digest XOR the seed's term,
// by the CRC's linearity) equals the CRC of the tuple's bytes with the seed as initial value.
TEST(EcmpHash, Crc32cAndTheDigestPath) {
  const std::string check = "123456789";
  EXPECT_EQ(crc32c({reinterpret_cast<const std::uint8_t*>(check.data()), check.size()}, 0),
            0xE3069283u);
  for (int i = 0; i < 100; ++i) {
    const FiveTuple t = tuple_of(i);
    const HashParams p = HashParams::from_seed(static_cast<std::uint32_t>(i) * 40503u);
    const auto bytes = tuple_bytes(t);
    EXPECT_EQ(ecmp_hash(HashKind::kCrc32, t, p), fmix32(crc32c(bytes, p.seed) ^ p.mix));
    for (HashKind kind : {HashKind::kCrc32, HashKind::kXorFold, HashKind::kToeplitz}) {
      EXPECT_EQ(ecmp_hash(kind, digest(t), p), ecmp_hash(kind, t, p));
    }
  }
  EXPECT_EQ(tuple_bytes(tuple_of(0))[11], 4791 & 0xFF);
  EXPECT_EQ(tuple_bytes(tuple_of(0))[12], 17);
}

TEST(EcmpHash, Names) {
  for (HashKind kind : {HashKind::kCrc32, HashKind::kXorFold, HashKind::kToeplitz}) {
    EXPECT_EQ(hash_kind_from(to_string(kind)), kind);
  }
  EXPECT_FALSE(hash_kind_from("md5").has_value());
}

// Exact E[max load] of N balls thrown uniformly into M bins. P(every bin <= m) by conditioning
// bin by bin: with n balls spread over the first j bins, bin j holds Binomial(n, 1/j) of them, so
// h_j(n) = sum_c Binom(n, 1/j)(c) h_{j-1}(n - c), h_1(n) = [n <= m], P = h_M(N); then
// E[max] = sum_m P(max > m).
double expected_max_load(int N, int M) {
  const auto at = [](int i) { return static_cast<std::size_t>(i); };
  std::vector<double> lf(at(N) + 1, 0.0);
  for (int i = 1; i <= N; ++i) lf[at(i)] = lf[at(i - 1)] + std::log(i);
  // Loads beyond the mean + 10 standard deviations have probability below 1e-20.
  const double mean = static_cast<double>(N) / M;
  const int cmax = std::min(N, static_cast<int>(mean + 10 * std::sqrt(mean) + 10));
  // binom[j][n][c] for c <= cmax, computed once from log-factorials.
  std::vector<std::vector<double>> binom(at(M) + 1);
  for (int j = 2; j <= M; ++j) {
    const double lp = std::log(1.0 / j);
    const double lq = std::log1p(-1.0 / j);
    auto& b = binom[at(j)];
    b.assign((at(N) + 1) * (at(cmax) + 1), 0.0);
    for (int n = 0; n <= N; ++n) {
      for (int c = 0; c <= std::min(cmax, n); ++c) {
        b[at(n) * (at(cmax) + 1) + at(c)] =
            std::exp(lf[at(n)] - lf[at(c)] - lf[at(n - c)] + c * lp + (n - c) * lq);
      }
    }
  }
  double expected = 0;
  for (int m = 0; m < N; ++m) {
    if (static_cast<long>(m) * M < N) {  // some bin must hold more than m
      expected += 1;
      continue;
    }
    if (m > cmax) break;
    std::vector<double> h(at(N) + 1);
    for (int n = 0; n <= N; ++n) h[at(n)] = n <= m ? 1.0 : 0.0;
    for (int j = 2; j <= M; ++j) {
      const auto& b = binom[at(j)];
      std::vector<double> next(at(N) + 1, 0.0);
      for (int n = 0; n <= N; ++n) {
        double s = 0;
        for (int c = 0; c <= std::min(m, n); ++c) {
          s += b[at(n) * (at(cmax) + 1) + at(c)] * h[at(n - c)];
        }
        next[at(n)] = s;
      }
      h = std::move(next);
    }
    const double tail = 1.0 - h[at(N)];
    expected += tail;
    if (tail < 1e-12) break;
  }
  return expected;
}

TEST(BallsIntoBins, ExactExpectationMatchesTheReferenceFigure) {
  // network-models.md §2.2 quotes a Monte Carlo 1.23 for 1,000 flows on 16 links; the exact
  // value is 1.2296 (mean 62.5, expected busiest link 76.85 flows).
  const double ratio = expected_max_load(1000, 16) / (1000.0 / 16);
  std::printf("exact E[max]/mean, 1000 flows on 16 links: %.4f\n", ratio);
  EXPECT_NEAR(ratio, 1.23, 0.005);
  // Sanity: 8 balls in 8 bins, E[max] = 2.60 relative to a mean of 1 (same table).
  EXPECT_NEAR(expected_max_load(8, 8), 2.60, 0.01);
}

// 1,000 distinct RoCE flows hashed onto 16 uplinks, averaged over 200 switch seeds: the hashes
// behave like uniform throws, so the mean max/mean ratio is the exact expectation (1.2296) within
// 0.02 (the ratio's standard deviation over seeds is about 0.06, so the mean of 200 is within
// 0.005 one sigma).
TEST(BallsIntoBins, HashedFlowsOnSixteenUplinks) {
  const double expected = expected_max_load(1000, 16) / (1000.0 / 16);
  for (HashKind kind : {HashKind::kCrc32, HashKind::kToeplitz, HashKind::kXorFold}) {
    double sum = 0;
    const int trials = 200;
    for (int seed = 1; seed <= trials; ++seed) {
      const HashParams p = HashParams::from_seed(static_cast<std::uint32_t>(seed) * 2654435761u);
      std::vector<int> bins(16, 0);
      for (int i = 0; i < 1000; ++i)
        ++bins[static_cast<std::size_t>(ecmp_pick(ecmp_hash(kind, tuple_of(i), p), 16))];
      sum += *std::max_element(bins.begin(), bins.end()) / (1000.0 / 16);
    }
    std::printf("%s: mean max/mean over %d seeds %.4f (exact %.4f)\n", to_string(kind), trials,
                sum / trials, expected);
    EXPECT_NEAR(sum / trials, expected, 0.02) << to_string(kind);
  }
}

}  // namespace
}  // namespace trainsim::topo
