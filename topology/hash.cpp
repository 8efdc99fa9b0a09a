#include "topology/hash.h"

#include "sim/core/rng.h"

namespace trainsim::topo {
namespace {

// CRC-32C, reflected polynomial 0x82F63B78 (Castagnoli, RFC 3720), one byte per step.
constexpr std::array<std::uint32_t, 256> make_crc_table() {
  std::array<std::uint32_t, 256> table{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    table[i] = c;
  }
  return table;
}
constexpr std::array<std::uint32_t, 256> kCrcTable = make_crc_table();

constexpr int kTupleBytes = 13;

// The CRC register after `bytes` from `state`, before the final inversion. The update is linear
// over GF(2) in the register and the data together (table[x ^ y] = table[x] ^ table[y]).
std::uint32_t crc_register(std::span<const std::uint8_t> bytes, std::uint32_t state) {
  for (const std::uint8_t b : bytes) state = kCrcTable[(state ^ b) & 0xFF] ^ (state >> 8);
  return state;
}

std::uint32_t xor_fold(const FiveTuple& t) {
  std::uint32_t h = t.src_ip ^ t.dst_ip ^
                    ((static_cast<std::uint32_t>(t.src_port) << 16) | t.dst_port) ^ t.protocol;
  h ^= h >> 16;
  return h & 0xFFFF;
}

// Toeplitz: for every set bit i of the input (most significant first), XOR in the 32 key bits
// that start at bit i of the key (Microsoft RSS specification). 104 input bits need a key of at
// least 136 bits; the key here has 192.
std::uint32_t toeplitz(const FiveTuple& t, const std::array<std::uint64_t, 3>& key) {
  std::uint32_t h = 0;
  const auto bytes = tuple_bytes(t);
  for (int byte = 0; byte < kTupleBytes; ++byte) {
    const std::uint8_t v = bytes[static_cast<std::size_t>(byte)];
    if (v == 0) continue;
    for (int bit = 0; bit < 8; ++bit) {
      if (!(v & (0x80u >> bit))) continue;
      const int i = byte * 8 + bit;
      const int w = i / 64;
      const int o = i % 64;
      const std::uint64_t chunk = o == 0 ? key[static_cast<std::size_t>(w)]
                                         : (key[static_cast<std::size_t>(w)] << o) |
                                               (key[static_cast<std::size_t>(w) + 1] >> (64 - o));
      h ^= static_cast<std::uint32_t>(chunk >> 32);
    }
  }
  return h;
}

}  // namespace

std::array<std::uint8_t, 13> tuple_bytes(const FiveTuple& t) {
  return {static_cast<std::uint8_t>(t.src_ip >> 24),
          static_cast<std::uint8_t>(t.src_ip >> 16),
          static_cast<std::uint8_t>(t.src_ip >> 8),
          static_cast<std::uint8_t>(t.src_ip),
          static_cast<std::uint8_t>(t.dst_ip >> 24),
          static_cast<std::uint8_t>(t.dst_ip >> 16),
          static_cast<std::uint8_t>(t.dst_ip >> 8),
          static_cast<std::uint8_t>(t.dst_ip),
          static_cast<std::uint8_t>(t.src_port >> 8),
          static_cast<std::uint8_t>(t.src_port),
          static_cast<std::uint8_t>(t.dst_port >> 8),
          static_cast<std::uint8_t>(t.dst_port),
          t.protocol};
}

std::uint32_t crc32c(std::span<const std::uint8_t> bytes, std::uint32_t seed) {
  return ~crc_register(bytes, ~seed);
}

std::uint32_t fmix32(std::uint32_t h) {
  h ^= h >> 16;
  h *= 0x85EBCA6Bu;
  h ^= h >> 13;
  h *= 0xC2B2AE35u;
  h ^= h >> 16;
  return h;
}

const char* to_string(HashKind kind) {
  switch (kind) {
    case HashKind::kCrc32:
      return "crc32";
    case HashKind::kXorFold:
      return "xor-fold";
    case HashKind::kToeplitz:
      return "toeplitz";
  }
  return "?";
}

std::optional<HashKind> hash_kind_from(std::string_view name) {
  if (name == "crc32") return HashKind::kCrc32;
  if (name == "xor-fold") return HashKind::kXorFold;
  if (name == "toeplitz") return HashKind::kToeplitz;
  return std::nullopt;
}

HashParams HashParams::from_seed(std::uint32_t seed) {
  HashParams p;
  p.seed = seed;
  std::uint64_t state = seed;
  p.mix = static_cast<std::uint32_t>(splitmix64(state) >> 32);
  for (auto& word : p.key) word = splitmix64(state);
  const std::array<std::uint8_t, kTupleBytes> zeros{};
  p.crc_seed_term = crc_register(zeros, ~seed);
  return p;
}

TupleDigest digest(const FiveTuple& t) {
  TupleDigest d;
  d.tuple = t;
  d.crc_tuple_term = crc_register(tuple_bytes(t), 0);
  d.fold = xor_fold(t);
  return d;
}

std::uint32_t ecmp_hash(HashKind kind, const TupleDigest& d, const HashParams& p) {
  std::uint32_t h = 0;
  switch (kind) {
    case HashKind::kCrc32:
      h = ~(p.crc_seed_term ^ d.crc_tuple_term);
      break;
    case HashKind::kXorFold:
      h = d.fold;
      break;
    case HashKind::kToeplitz:
      h = toeplitz(d.tuple, p.key);
      break;
  }
  return fmix32(h ^ p.mix);
}

std::uint32_t ecmp_hash(HashKind kind, const FiveTuple& t, const HashParams& p) {
  return ecmp_hash(kind, digest(t), p);
}

std::uint16_t roce_udp_source_port(std::uint32_t local_qpn, std::uint32_t remote_qpn) {
  std::uint64_t fl = static_cast<std::uint64_t>(local_qpn) * remote_qpn;
  fl ^= fl >> 20;
  fl ^= fl >> 40;
  fl &= 0xFFFFF;
  const std::uint64_t port = ((fl & 0x3FFF) ^ ((fl & 0xFC000) >> 14)) | 0xC000;
  return static_cast<std::uint16_t>(port);
}

std::uint32_t mix32(std::uint64_t a, std::uint64_t b) {
  std::uint64_t state = a * 0xD6E8FEB86659FD93ull ^ b;
  return static_cast<std::uint32_t>(splitmix64(state) >> 32);
}

std::uint32_t qp_number(GpuId local, GpuId remote, int qp) {
  // QPNs 0 and 1 are reserved (SMI, GSI); bases leave room for 1,024 QPs per connection.
  constexpr std::uint32_t kFirst = 2;
  constexpr std::uint32_t kSpan = 0xFFFFFFu - kFirst - 1024;
  const std::uint32_t base =
      kFirst + mix32(static_cast<std::uint32_t>(local), static_cast<std::uint32_t>(remote)) % kSpan;
  return (base + static_cast<std::uint32_t>(qp)) & 0xFFFFFFu;
}

}  // namespace trainsim::topo
