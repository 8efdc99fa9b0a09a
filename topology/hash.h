// ECMP hashing: the RoCEv2 5-tuple, the switch hash functions, and NCCL-style queue pairs.
//
// Every function here is pure: the same tuple and seed give the same value on every platform.
//
// A RoCEv2 packet's only per-connection entropy is its UDP source port, which the sender derives
// from the queue-pair numbers (Linux `rdma_get_udp_sport`, include/rdma/ib_verbs.h), so one QP
// follows one path; NCCL opens `NCCL_IB_QPS_PER_CONNECTION` QPs per connection to spread a
// connection over several paths (docs/topology.md, "Hashing").
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "topology/ids.h"

namespace trainsim::topo {

inline constexpr std::uint16_t kRoceV2Port = 4791;  // IANA port of RoCEv2
inline constexpr std::uint8_t kUdpProtocol = 17;

struct FiveTuple {
  std::uint32_t src_ip = 0;
  std::uint32_t dst_ip = 0;
  std::uint16_t src_port = 0;
  std::uint16_t dst_port = kRoceV2Port;
  std::uint8_t protocol = kUdpProtocol;
  bool operator==(const FiveTuple&) const = default;
};

/// The switch hash functions a fabric can select (vendor menus offer CRC variants and XOR folds;
/// NICs use Toeplitz for RSS).
enum class HashKind : std::uint8_t {
  kCrc32,     // CRC-32C (Castagnoli) of the 13 tuple bytes, the seed as initial value
  kXorFold,   // the tuple's 32-bit words XORed together, folded to 16 bits (many collisions)
  kToeplitz,  // Toeplitz hash (Microsoft RSS) with a 192-bit key generated from the seed
};

const char* to_string(HashKind kind);
std::optional<HashKind> hash_kind_from(std::string_view name);  // "crc32", "xor-fold", "toeplitz"

/// A switch's hash setting, derived from its seed. The seed enters twice: as the function's own
/// parameter (CRC initial value, Toeplitz key) and through a final avalanche mix (fmix32 of the
/// hash XOR a seed-derived word) that stands for the hash-bit selection of switch ASICs. Without
/// the mix, CRC and XOR, being linear, would leave two switches with different seeds correlated
/// (a CRC's initial value only XORs a constant into the result). Equal seeds give identical
/// functions, hence hash polarization across tiers.
struct HashParams {
  std::uint32_t seed = 0;
  std::uint32_t mix = 0;                  // word XORed in before the final mix
  std::uint32_t crc_seed_term = 0;        // the seed's share of the CRC register (see TupleDigest)
  std::array<std::uint64_t, 3> key = {};  // Toeplitz key (192 bits)

  static HashParams from_seed(std::uint32_t seed);
};

/// The part of a tuple's hash that no switch setting changes, computed once per flow: CRC-32C
/// is linear, so the register after the tuple is (seed's share) XOR (tuple's share), and
/// XOR-fold ignores the seed.
struct TupleDigest {
  FiveTuple tuple;
  std::uint32_t crc_tuple_term = 0;
  std::uint32_t fold = 0;
};

TupleDigest digest(const FiveTuple& t);

/// The 32-bit hash of `t` (bytes in network order: source IP, destination IP, source port,
/// destination port, protocol) under setting `p`. Pure.
std::uint32_t ecmp_hash(HashKind kind, const FiveTuple& t, const HashParams& p);
/// The same from a digest (the fast path when one flow meets several switches).
std::uint32_t ecmp_hash(HashKind kind, const TupleDigest& d, const HashParams& p);

/// The tuple's 13 bytes in network order.
std::array<std::uint8_t, 13> tuple_bytes(const FiveTuple& t);
/// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78, RFC 3720) of `bytes` with initial value
/// `seed` (0 is the standard CRC-32C: "123456789" gives 0xE3069283).
std::uint32_t crc32c(std::span<const std::uint8_t> bytes, std::uint32_t seed);
/// MurmurHash3's 32-bit finalizer (Appleby): a bijection in which each input bit flips about half
/// of the output bits.
std::uint32_t fmix32(std::uint32_t h);

/// The next hop among `n` equal-cost candidates: hash mod n (as the HPCC ns-3 switch does).
inline int ecmp_pick(std::uint32_t hash, int n) {
  return static_cast<int>(hash % static_cast<std::uint32_t>(n));
}

/// The UDP source port a RoCEv2 sender uses for a QP pair: the 20-bit flow label
/// fl = lqpn*rqpn folded (fl ^= fl>>20, fl ^= fl>>40), then its 14 low bits XOR its 6 high bits,
/// with the top two port bits set (49152..65535). Linux `rdma_calc_flow_label` and
/// `rdma_get_udp_sport`.
std::uint16_t roce_udp_source_port(std::uint32_t local_qpn, std::uint32_t remote_qpn);

/// The 24-bit number of QP `qp` on `local`'s side of the connection local -> remote. A
/// connection's QPs are created one after another, so they have consecutive numbers from a base
/// that stands in for the driver's allocation order (a hash of the two endpoints).
std::uint32_t qp_number(GpuId local, GpuId remote, int qp);

/// 32-bit mixing of two values (SplitMix64 finalizer); the seeds of switches come from it.
std::uint32_t mix32(std::uint64_t a, std::uint64_t b);

}  // namespace trainsim::topo
