// Exact max-min fair rates of flows over capacitated links, re-solved incrementally.
//
// The model (network-models.md §1.1): one rate x_f per flow, one constraint per link,
// Σ_{f∋l} m_{f,l}·x_f ≤ C_l, where m_{f,l} is how often f's path lists l (1 for a routed
// path; a ring run in lock step crosses a link once per edge routed over it, see
// sim/collective/flow.h), and an optional per-flow bound x_f ≤ b_f (NIC line rate, a congestion-control
// hold). The solution is the max-min fair allocation: no rate can grow without shrinking a rate
// that is already smaller or equal. It is computed exactly by progressive filling (Bertsekas &
// Gallager, "Data Networks", 2nd ed., §6.5) over a heap of link fair shares: the link with the
// smallest share remaining/unfrozen saturates first and freezes its flows; since freezing a flow
// at the smallest share never lowers another link's share, a stale heap key is a lower bound and
// is refreshed only when it reaches the top ("lazy" keys: no heap update per path element).
//
// Incremental use: adding or removing a flow, changing a capacity or a bound marks links dirty;
// `solve()` re-solves only the connected components (links ↔ flows) that contain a dirty link and
// returns the flows whose rate changed. Max-min allocations of disjoint components are
// independent, so this equals a full re-solve (the tests check that).
//
// Level-restricted re-solves. Progressive filling freezes flows in increasing order of rate, and
// a change that can only free capacity leaves the filling unchanged below the level λ* where it
// first matters: removing flow f (λ* ≤ its rate), raising link l's capacity (λ* ≤ the largest
// rate on l, its saturation level), lowering it (λ* ≤ the water level at which l saturates with
// the rates as they are), changing f's bound to b (λ* ≤ min(rate, b)). Every flow
// frozen strictly below λ* keeps its rate (up to λ*, the filling of the changed problem makes
// exactly the same steps), so `solve()` re-fills only the flows at or above λ* that are
// connected to a change through links carrying such flows, over the capacity the lower flows
// leave. Adding a flow sets λ* to its equal share on its links. This is what
// keeps completions cheap: the copies of a transfer finish fastest-first, and each completion
// re-fills only the flows at least as fast as the one that left, not the whole fabric.
//
// Verified partial re-fills. After removals, capacity and bound changes (not arrivals), a solve
// first re-fills only the flows at or above λ* on the changed links, holding every other flow at
// its rate, and keeps the result when local checks prove it max-min; otherwise it widens the
// re-fill, and at worst runs the search above (solve_verified in maxmin.cpp,
// docs/network-model.md §2.2).
//
// Storage is flat and reused: flow paths live in one pool with power-of-two size classes and free
// lists, each link keeps the list of its flows (swap-remove, with back-pointers), and all solve
// scratch is preallocated per link and per flow slot. After warm-up nothing allocates.
// Not thread-safe.
#pragma once

#include <cstddef>
#include <algorithm>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "topology/ids.h"

namespace trainsim::net {

/// Slot of a flow inside the solver; reused after the flow is removed.
using FlowIndex = std::int32_t;

inline constexpr double kUnlimited = std::numeric_limits<double>::infinity();

/// An incremental solve whose components hold more than half of at least this many flows
/// becomes a full solve (same answer, better memory locality).
inline constexpr std::int64_t kFullSolveMinFlows = 10000;

/// A link's state under a partial re-fill's new rates (solve_verified's memo).
struct LinkCheck {
  std::uint32_t changed = 0;  // == the round's epoch: a seed, or a re-filled flow on it moved
  std::uint32_t stamp = 0;    // == the round's epoch: load and largest are this round's
  double load = 0;
  double largest = 0;
};

class MaxMinSolver {
 public:
  /// `capacity_Bps[l]` is the capacity of link l (finite, >= 0), indexed by topo::LinkId.
  explicit MaxMinSolver(std::vector<double> capacity_Bps);

  std::int32_t link_count() const { return static_cast<std::int32_t>(links_.size()); }

  /// Adds a flow over `path` (non-empty, valid link ids; a link listed k times carries k times
  /// the flow's rate) with rate bound
  /// `cap_Bps` (>= 0). Its rate is 0 until the next solve.
  /// Throws trainsim::Error (input) on a bad path or bound.
  FlowIndex add_flow(std::span<const topo::LinkId> path, double cap_Bps = kUnlimited);
  /// Adds a flow with its rate already known, without a solve: for a group of flows that starts
  /// on links no other flow crosses (so that the group is its own components) with the rates an
  /// earlier solve of the same group gave. The caller guarantees both; later changes that reach
  /// these flows re-solve them as usual.
  FlowIndex add_solved_flow(std::span<const topo::LinkId> path, double cap_Bps, double rate);
  void remove_flow(FlowIndex f);
  void set_link_capacity(topo::LinkId l, double capacity_Bps);
  void set_flow_cap(FlowIndex f, double cap_Bps);

  /// True when a change awaits a solve.
  bool dirty() const { return !dirty_links_.empty(); }
  /// Re-solves the components touched since the last solve; returns the flows of those
  /// components whose rate changed (valid until the next call).
  std::span<const FlowIndex> solve();
  /// Re-solves everything from scratch; returns the flows whose rate changed.
  std::span<const FlowIndex> solve_all();

  bool alive(FlowIndex f) const {
    return f >= 0 && f < flow_slots() && slots_[static_cast<std::size_t>(f)].alive != 0;
  }
  /// The rate of the last solve (0 for a flow added since).
  double rate(FlowIndex f) const {
    const double r = rate_[static_cast<std::size_t>(f)];
    return r < kUnlimited ? r : 0.0;
  }
  double flow_cap(FlowIndex f) const { return slots_[static_cast<std::size_t>(f)].cap; }
  std::span<const topo::LinkId> path(FlowIndex f) const;
  double link_capacity(topo::LinkId l) const { return links_[static_cast<std::size_t>(l)].capacity; }
  /// The flows crossing link l (a copy, in no particular order).
  std::vector<FlowIndex> flows_on(topo::LinkId l) const;
  std::int32_t flow_count_on(topo::LinkId l) const {
    return static_cast<std::int32_t>(links_[static_cast<std::size_t>(l)].flows.size());
  }
  /// Whether link l carries a flow: flow_count_on(l) != 0, read from one byte per link (a dense
  /// array that stays in cache, where the link's record is a likely miss).
  bool carries_flows(topo::LinkId l) const { return busy_[static_cast<std::size_t>(l)] != 0; }
  /// One past the largest flow index in use.
  std::int32_t flow_slots() const { return static_cast<std::int32_t>(slots_.size()); }
  std::int64_t flow_count() const { return flow_count_; }

  /// Links and flows of the components the last solve covered.
  std::span<const topo::LinkId> last_links() const { return comp_links_; }
  std::span<const FlowIndex> last_flows() const { return comp_flows_; }

  /// Checks the max-min invariants over every flow: rates >= 0 and within bounds, no link above
  /// capacity, and every flow bottlenecked (at its bound, or on a saturated link where no other
  /// flow has a larger rate), which characterises max-min fairness (Bertsekas & Gallager §6.5).
  /// Returns "" when they hold, else a description of the first violation. Tolerance is
  /// relative.
  std::string check_invariants(double rel_tol = 1e-9) const;
  /// The same, restricted to the components of the last solve (O(component), used after every
  /// solve in debug builds).
  std::string check_last_solve(double rel_tol = 1e-9) const;

  /// Bytes held by the solver's containers (capacity, not size).
  std::size_t memory_bytes() const;

  /// Verified partial re-fills (on by default; see solve_verified): off, every level-restricted
  /// solve re-fills all flows at or above its level that the change reaches, as before. For tests
  /// and benchmarks that compare the two.
  void set_verified_refill(bool on) { verified_refill_ = on; }
  /// Level-restricted solves settled by a verified partial re-fill, and those that fell back to
  /// the full re-fill of the level's component after trying.
  std::int64_t verified_solves() const { return verified_solves_; }
  std::int64_t verified_fallbacks() const { return verified_fallbacks_; }

 private:
  struct HeapEntry {
    double key;
    std::int32_t id;  // >= 0: a link's fair share; < 0: ~flow, that flow's bound
  };

  void mark_dirty(topo::LinkId l);
  FlowIndex insert_flow(std::span<const topo::LinkId> path, double cap_Bps, double rate);
  /// Sets the rate of the last solve, in `rate_` and in the flow's entries on its links.
  void set_rate(FlowIndex f, double rate);
  void lower_change_level(double level) { change_level_ = std::min(change_level_, level); }
  std::int64_t alloc_path(std::int32_t length, std::int8_t* size_class);
  void free_path(std::int64_t offset, std::int8_t size_class);
  void next_epoch();
  /// The level-restricted search over the seeds (every flow at or above the level that the
  /// change reaches), then the fill.
  std::span<const FlowIndex> solve_search(double level, double threshold);
  /// Re-fills a growing open set of flows with every other flow held at its rate, and keeps the
  /// result only when it is provably the max-min allocation; false when it gives up.
  bool solve_verified(double threshold);
  /// Load and largest rate of link l under the open set's new rates (memoised per round).
  const LinkCheck& checked(topo::LinkId l);
  /// Whether flow f at `rate` is bottlenecked under the open set's new rates: at its bound, or on
  /// a saturated link where no flow is faster. `hint` is tried first (its recorded bottleneck).
  std::int32_t bottleneck_under_new_rates(FlowIndex f, double rate, std::int32_t hint);
  /// Adds the flows of link l outside the open set that are at or above `threshold` and faster
  /// than `above` to the violators; false when there is none.
  bool open_faster(topo::LinkId l, double above, double threshold);
  void fill();
  void sort_keys();
  void freeze(FlowIndex f, double rate, std::int32_t bottleneck);
  std::span<const FlowIndex> collect_changed();
  std::string check(std::span<const topo::LinkId> links, std::span<const FlowIndex> flows,
                    double rel_tol) const;

  // Links, indexed by topo::LinkId. What a solve reads and writes per link sits in one 64-byte
  // record, so that visiting a link costs one cache miss, not five.
  // A flow on a link's list, with the pool position of its path element for that link (which
  // holds the entry's position in the list: swap-removal updates it without visiting the flow).
  // The entry also mirrors the flow's rate of the last solve (`rate_`): the search reads the rate
  // of every flow on every link it scans, and most of them only to subtract it, so reading it from
  // the list it is walking saves a random access per entry.
  struct Entry {
    FlowIndex flow;
    std::uint32_t at;
    double rate;
  };
  struct alignas(64) Link {
    std::vector<Entry> flows;      // flows crossing the link
    double capacity = 0;
    double remaining = 0;          // solve scratch: capacity not yet given to frozen flows
    std::int32_t unfrozen = 0;     // solve scratch: flows on the link not frozen yet
    std::uint32_t stamp = 0;       // == epoch_: listed in comp_links_ by the current solve
    std::uint8_t dirty = 0;
    // The largest last-solve rate of the flows removed from the link since the last solve
    // (valid while removed_stamp == epoch_): with the flows still on it, the link's largest
    // rate in the last solve, which bounds its saturation level there (set_link_capacity).
    std::uint32_t removed_stamp = 0;
    double removed_max = 0;
  };
  std::vector<Link> links_;
  std::vector<std::uint8_t> busy_;  // per link: 1 while its list of flows is not empty
  std::vector<topo::LinkId> dirty_links_;
  // λ* of the changes since the last solve (see above); kUnlimited when nothing lowered it.
  double change_level_ = kUnlimited;

  // Flows, indexed by FlowIndex; likewise one 64-byte record per flow.
  struct alignas(64) FlowSlot {
    std::int64_t path_offset = 0;
    std::int32_t path_length = 0;
    std::uint32_t visit_stamp = 0;   // == epoch_: reached by the current solve's search
    std::uint32_t frozen_stamp = 0;  // == epoch_: rate fixed by the current fill
    std::int8_t path_class = 0;      // size class of its block in the path pool
    std::uint8_t alive = 0;
    double next_rate = 0;
    double cap = 0;
    // What froze the flow in the fill that set its rate: a link that saturated with it at the
    // largest rate, kBoundBottleneck (its own bound), or kUnknownBottleneck (a solved flow added
    // without a fill). next_bottleneck is the current fill's, copied when its rates are kept.
    std::int32_t bottleneck = kUnknownBottleneck;
    std::int32_t next_bottleneck = kUnknownBottleneck;
    std::uint32_t check_stamp = 0;   // == epoch_: its bottleneck was checked this round
  };
  static constexpr std::int32_t kBoundBottleneck = -1;
  static constexpr std::int32_t kUnknownBottleneck = -2;
  std::vector<FlowSlot> slots_;
  // Rates of the last solve, dense: the search reads the rate of every flow on a link it scans,
  // and 8 bytes per flow stay in cache where the 64-byte records do not.
  std::vector<double> rate_;
  std::vector<FlowIndex> free_flows_;
  std::int64_t flow_count_ = 0;

  // Path pool: link ids and, per hop, the position of the flow in that link's list.
  std::vector<topo::LinkId> pool_link_;
  std::vector<std::int32_t> pool_pos_;
  std::vector<std::vector<std::int64_t>> free_blocks_;  // by size class

  // Solve scratch.
  std::uint32_t epoch_ = 0;
  std::vector<topo::LinkId> comp_links_;
  std::vector<FlowIndex> comp_flows_;
  std::vector<HeapEntry> sorted_;  // initial keys, ascending
  std::vector<HeapEntry> heap_;    // refreshed keys, a min-heap
  std::vector<HeapEntry> radix_tmp_;
  std::vector<FlowIndex> changed_;
  std::vector<double> scratch_rates_;  // set_link_capacity

  // Verified partial re-fills (solve_verified).
  std::vector<topo::LinkId> seeds_;        // the changed links of the solve in progress
  std::vector<LinkCheck> link_check_;      // per link, the round's memo
  // Per flow slot, == epoch_ while the flow is open (its visit_stamp, dense: the checks read it
  // for every flow on a scanned link, and 4 bytes per flow stay in cache where the records do not).
  std::vector<std::uint32_t> open_;
  std::vector<FlowIndex> violators_;       // flows to open in the next round
  std::vector<std::pair<FlowIndex, std::int32_t>> rechecked_;  // bottlenecks found anew
  bool verified_refill_ = true;
  bool arrived_ = false;                   // a flow was added since the last solve
  std::int64_t verified_solves_ = 0;
  std::int64_t verified_fallbacks_ = 0;
};

}  // namespace trainsim::net
