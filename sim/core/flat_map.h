// A hash map from 64-bit keys to small values in one flat array: open addressing with linear
// probing, kept at most half full (probes stay short and an empty cell always ends one), and
// backward-shift deletion (no tombstones, so a table that sees many inserts and erases never
// degrades). For hot lookups whose std::unordered_map node allocation and pointer chase cost
// more than the work around them (the executor's collective rendezvous). Key ~0 is reserved.
// Not thread-safe.
#pragma once

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace trainsim {

template <class V>
class FlatU64Map {
 public:
  static constexpr std::uint64_t kReserved = ~0ull;  // marks an empty cell; never a key

  /// The value of `key`, inserted as `fresh` when absent. The reference stays valid until the
  /// next insert or erase.
  V& find_or_insert(std::uint64_t key, const V& fresh) {
    assert(key != kReserved);
    if (2 * (used_ + 1) > cells_.size()) grow();
    const std::size_t mask = cells_.size() - 1;
    std::size_t i = home(key);
    for (; cells_[i].key != kReserved; i = (i + 1) & mask) {
      if (cells_[i].key == key) return cells_[i].value;
    }
    cells_[i].key = key;
    cells_[i].value = fresh;
    ++used_;
    return cells_[i].value;
  }

  /// The value of `key`, or null.
  V* find(std::uint64_t key) {
    if (cells_.empty()) return nullptr;
    const std::size_t mask = cells_.size() - 1;
    for (std::size_t i = home(key); cells_[i].key != kReserved; i = (i + 1) & mask) {
      if (cells_[i].key == key) return &cells_[i].value;
    }
    return nullptr;
  }

  /// Removes `key`; returns whether it was there.
  bool erase(std::uint64_t key) {
    if (cells_.empty()) return false;
    const std::size_t mask = cells_.size() - 1;
    std::size_t hole = home(key);
    while (cells_[hole].key != key) {
      if (cells_[hole].key == kReserved) return false;
      hole = (hole + 1) & mask;
    }
    for (std::size_t j = (hole + 1) & mask; cells_[j].key != kReserved; j = (j + 1) & mask) {
      const std::size_t want = home(cells_[j].key);
      // j's cell may move back to the hole unless its home lies in (hole, j], cyclically.
      const bool between = hole < j ? (want > hole && want <= j) : (want > hole || want <= j);
      if (!between) {
        cells_[hole] = cells_[j];
        hole = j;
      }
    }
    cells_[hole].key = kReserved;
    --used_;
    return true;
  }

  std::size_t size() const { return used_; }
  std::size_t capacity() const { return cells_.size(); }

 private:
  struct Cell {
    std::uint64_t key = kReserved;
    V value{};
  };
  // Fibonacci hashing into a power-of-two table.
  std::size_t home(std::uint64_t key) const {
    return static_cast<std::size_t>((key * 0x9E3779B97F4A7C15ull) >> 32) & (cells_.size() - 1);
  }
  void grow() {
    std::vector<Cell> old;
    old.swap(cells_);
    cells_.assign(old.empty() ? 64 : 2 * old.size(), Cell{});
    const std::size_t mask = cells_.size() - 1;
    for (const Cell& c : old) {
      if (c.key == kReserved) continue;
      std::size_t i = home(c.key);
      while (cells_[i].key != kReserved) i = (i + 1) & mask;
      cells_[i] = c;
    }
  }

  std::vector<Cell> cells_;
  std::size_t used_ = 0;
};

}  // namespace trainsim
