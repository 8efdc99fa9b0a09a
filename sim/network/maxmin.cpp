#include "sim/network/maxmin.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <sstream>

#include "sim/core/error.h"

namespace trainsim::net {


namespace {

// Min-heap order on (key, id) for std::push_heap and friends (which build max-heaps).
struct Later {
  template <class E>
  bool operator()(const E& a, const E& b) const {
    return a.key > b.key || (a.key == b.key && a.id > b.id);
  }
};

bool exceeds(double value, double limit, double rel_tol) {
  return value > limit + rel_tol * std::max(std::abs(limit), std::abs(value));
}

}  // namespace

MaxMinSolver::MaxMinSolver(std::vector<double> capacity_Bps) {
  for (std::size_t l = 0; l < capacity_Bps.size(); ++l) {
    if (!(capacity_Bps[l] >= 0) || !std::isfinite(capacity_Bps[l])) {
      throw_input("link " + std::to_string(l) + " has capacity " + std::to_string(capacity_Bps[l]) +
                  " B/s; capacities must be finite and >= 0");
    }
  }
  links_.resize(capacity_Bps.size());
  busy_.assign(capacity_Bps.size(), 0);
  link_check_.resize(capacity_Bps.size());
  for (std::size_t l = 0; l < capacity_Bps.size(); ++l) links_[l].capacity = capacity_Bps[l];
}

std::vector<FlowIndex> MaxMinSolver::flows_on(topo::LinkId l) const {
  std::vector<FlowIndex> out;
  for (const Entry& e : links_[static_cast<std::size_t>(l)].flows) out.push_back(e.flow);
  return out;
}

std::span<const topo::LinkId> MaxMinSolver::path(FlowIndex f) const {
  const auto i = static_cast<std::size_t>(f);
  return {pool_link_.data() + slots_[i].path_offset,
          static_cast<std::size_t>(slots_[i].path_length)};
}

void MaxMinSolver::mark_dirty(topo::LinkId l) {
  Link& link = links_[static_cast<std::size_t>(l)];
  if (link.dirty == 0) {
    link.dirty = 1;
    dirty_links_.push_back(l);
  }
}

std::int64_t MaxMinSolver::alloc_path(std::int32_t length, std::int8_t* size_class) {
  const auto cls = static_cast<std::int8_t>(std::bit_width(static_cast<std::uint32_t>(length - 1)));
  *size_class = cls;
  if (static_cast<std::size_t>(cls) >= free_blocks_.size()) free_blocks_.resize(cls + 1);
  std::vector<std::int64_t>& free = free_blocks_[static_cast<std::size_t>(cls)];
  if (!free.empty()) {
    const std::int64_t offset = free.back();
    free.pop_back();
    return offset;
  }
  const auto offset = static_cast<std::int64_t>(pool_link_.size());
  const std::size_t block = std::size_t{1} << cls;
  if (pool_link_.size() + block > std::numeric_limits<std::uint32_t>::max()) {
    throw_input("more than 2^32 path elements in flight: too many concurrent flows");
  }
  pool_link_.resize(pool_link_.size() + block, topo::kNoLink);
  pool_pos_.resize(pool_pos_.size() + block, -1);
  return offset;
}

void MaxMinSolver::free_path(std::int64_t offset, std::int8_t size_class) {
  free_blocks_[static_cast<std::size_t>(size_class)].push_back(offset);
}

FlowIndex MaxMinSolver::add_flow(std::span<const topo::LinkId> path, double cap_Bps) {
  const FlowIndex f = insert_flow(path, cap_Bps, kUnlimited);
  // A new flow gets at least min(bound, min over its links of C_l / n_l) (no link saturates
  // below its equal share), and adding it changes nothing below its new rate (the removal
  // argument read backwards), so nothing below that lower bound changes either. Every link of
  // the flow is a changed link; the flow itself is unsolved (rate +inf inside the solver), so
  // the search always takes it in.
  double level = cap_Bps;
  for (const topo::LinkId l : path) {
    const Link& link = links_[static_cast<std::size_t>(l)];
    level = std::min(level, link.capacity / static_cast<double>(link.flows.size()));
    mark_dirty(l);
  }
  lower_change_level(level);
  arrived_ = true;
  return f;
}

FlowIndex MaxMinSolver::add_solved_flow(std::span<const topo::LinkId> path, double cap_Bps,
                                        double rate) {
  if (!(rate >= 0) || rate > cap_Bps) throw_input("a solved flow's rate must be in [0, its bound]");
  const FlowIndex f = insert_flow(path, cap_Bps, rate);
  slots_[static_cast<std::size_t>(f)].next_rate = rate;
  return f;
}

FlowIndex MaxMinSolver::insert_flow(std::span<const topo::LinkId> path, double cap_Bps,
                                    double rate) {
  if (path.empty()) throw_input("a flow needs a non-empty path of links");
  if (!(cap_Bps >= 0)) throw_input("a flow's rate bound must be >= 0");
  for (std::size_t hop = 0; hop < path.size(); ++hop) {
    const topo::LinkId l = path[hop];
    if (l < 0 || l >= link_count()) {
      throw_input("flow path names link " + std::to_string(l) + ", but the network has " +
                  std::to_string(link_count()) + " links");
    }
  }
  FlowIndex f;
  if (free_flows_.empty()) {
    f = flow_slots();
    slots_.push_back(FlowSlot{});
    rate_.push_back(0);
    open_.push_back(0);
  } else {
    f = free_flows_.back();
    free_flows_.pop_back();
  }
  const auto i = static_cast<std::size_t>(f);
  const auto length = static_cast<std::int32_t>(path.size());
  std::int8_t cls = 0;
  const std::int64_t offset = alloc_path(length, &cls);
  FlowSlot& slot = slots_[i];
  slot.path_offset = offset;
  slot.path_length = length;
  slot.path_class = cls;
  slot.alive = 1;
  slot.next_rate = 0;
  slot.bottleneck = kUnknownBottleneck;
  slot.next_bottleneck = kUnknownBottleneck;
  rate_[i] = rate;
  slot.cap = cap_Bps;
  for (std::int32_t hop = 0; hop < length; ++hop) {
    const topo::LinkId l = path[static_cast<std::size_t>(hop)];
    auto& flows = links_[static_cast<std::size_t>(l)].flows;
    pool_link_[static_cast<std::size_t>(offset + hop)] = l;
    pool_pos_[static_cast<std::size_t>(offset + hop)] = static_cast<std::int32_t>(flows.size());
    flows.push_back(Entry{f, static_cast<std::uint32_t>(offset + hop), rate});
    busy_[static_cast<std::size_t>(l)] = 1;
  }
  ++flow_count_;
  return f;
}

void MaxMinSolver::remove_flow(FlowIndex f) {
  const auto i = static_cast<std::size_t>(f);
  // Nothing below the leaving flow's rate can change.
  lower_change_level(rate_[i]);
  const std::int64_t offset = slots_[i].path_offset;
  for (std::int32_t hop = 0; hop < slots_[i].path_length; ++hop) {
    const auto at = static_cast<std::size_t>(offset + hop);
    const topo::LinkId l = pool_link_[at];
    const auto li = static_cast<std::size_t>(l);
    const std::int32_t pos = pool_pos_[at];
    Link& link = links_[li];
    if (link.removed_stamp != epoch_) {
      link.removed_stamp = epoch_;
      link.removed_max = 0;
    }
    link.removed_max = std::max(link.removed_max, rate(f));
    auto& flows = link.flows;
    const Entry moved = flows.back();
    flows[static_cast<std::size_t>(pos)] = moved;
    pool_pos_[moved.at] = pos;
    flows.pop_back();
    // Removing a flow can split its component: every link it crossed that still carries flows
    // seeds a re-solve (a link left empty has nothing to re-solve).
    if (!flows.empty()) {
      mark_dirty(l);
    } else {
      busy_[li] = 0;
    }
  }
  free_path(offset, slots_[i].path_class);
  slots_[i].alive = 0;
  rate_[i] = 0;
  slots_[i].cap = 0;
  slots_[i].path_length = 0;
  free_flows_.push_back(f);
  --flow_count_;
}

void MaxMinSolver::set_link_capacity(topo::LinkId l, double capacity_Bps) {
  if (!(capacity_Bps >= 0) || !std::isfinite(capacity_Bps)) {
    throw_input("link " + std::to_string(l) + ": capacity must be finite and >= 0");
  }
  Link& link = links_[static_cast<std::size_t>(l)];
  if (link.capacity == capacity_Bps) return;
  if (capacity_Bps > link.capacity) {
    // More capacity matters only from the level where the link saturated in the last solve:
    // its largest rate then, counting the flows removed from it since (congestion control
    // raises a link's capacity when a flow leaves it, and the leaving flow may have been the
    // fastest).
    double level = link.removed_stamp == epoch_ ? link.removed_max : 0;
    for (const Entry& e : link.flows) level = std::max(level, rate(e.flow));
    lower_change_level(level);
  } else {
    // Less capacity matters only from the level where the link saturates with it: below the
    // water level λ at which Σ min(rate, λ) over its flows reaches the new capacity (flows not
    // solved yet count as rising at every level), the link is not tight and the filling makes
    // the same steps as before (congestion control derates a link at every arrival on it).
    scratch_rates_.clear();
    for (const Entry& e : link.flows) scratch_rates_.push_back(e.rate);
    std::sort(scratch_rates_.begin(), scratch_rates_.end());
    double left = capacity_Bps;
    double level = kUnlimited;
    const std::size_t n = scratch_rates_.size();
    for (std::size_t k = 0; k < n; ++k) {
      const double share = std::max(0.0, left) / static_cast<double>(n - k);
      if (scratch_rates_[k] >= share) {
        level = share;
        break;
      }
      left -= scratch_rates_[k];
    }
    lower_change_level(level);
  }
  link.capacity = capacity_Bps;
  mark_dirty(l);
}

void MaxMinSolver::set_flow_cap(FlowIndex f, double cap_Bps) {
  if (!(cap_Bps >= 0)) throw_input("a flow's rate bound must be >= 0");
  FlowSlot& slot = slots_[static_cast<std::size_t>(f)];
  if (slot.cap == cap_Bps) return;
  lower_change_level(std::min(rate_[static_cast<std::size_t>(f)], cap_Bps));
  slot.cap = cap_Bps;
  mark_dirty(pool_link_[static_cast<std::size_t>(slot.path_offset)]);
}

void MaxMinSolver::next_epoch() {
  if (++epoch_ == 0) {
    // Stamps wrapped around: clear them so that no old stamp equals a new epoch.
    for (Link& link : links_) link.stamp = link.removed_stamp = 0;
    for (LinkCheck& c : link_check_) c.stamp = c.changed = 0;
    std::fill(open_.begin(), open_.end(), 0u);
    for (FlowSlot& slot : slots_) {
      slot.visit_stamp = 0;
      slot.frozen_stamp = 0;
      slot.check_stamp = 0;
    }
    epoch_ = 1;
  }
}

std::span<const FlowIndex> MaxMinSolver::solve() {
  // Flows strictly below λ* keep their rates; the relative margin only adds flows (exact either
  // way) so that a flow frozen at λ* by a different rounding of the same sum is re-filled too.
  const double level = change_level_;
  const double threshold = level * (1 - 1e-9);
  change_level_ = kUnlimited;
  // The dirty flag keeps the list free of repeats.
  seeds_.clear();
  for (const topo::LinkId l : dirty_links_) {
    links_[static_cast<std::size_t>(l)].dirty = 0;
    seeds_.push_back(l);
  }
  dirty_links_.clear();
  // Not after an arrival: the new flow takes capacity from the flows at its links' level, which
  // gives it back elsewhere, so most of the component moves and a partial re-fill is only the
  // first of several rounds (on TP 16 across servers it cost a quarter more than the search).
  const bool arrived = arrived_;
  arrived_ = false;
  if (verified_refill_ && !arrived && threshold > 0 && threshold < kUnlimited &&
      solve_verified(threshold)) {
    return collect_changed();
  }
  return solve_search(level, threshold);
}

std::span<const FlowIndex> MaxMinSolver::solve_search(double level, double threshold) {
  next_epoch();
  comp_links_.clear();
  comp_flows_.clear();
  for (const topo::LinkId l : seeds_) {
    Link& link = links_[static_cast<std::size_t>(l)];
    if (link.stamp != epoch_) {
      link.stamp = epoch_;
      comp_links_.push_back(l);
    }
  }
  // The changed links come first in comp_links_. A flow at λ* itself (within the margin) that
  // crosses none of them keeps its rate too: it was frozen at λ* by a link (or its bound) whose
  // state at level λ* the change does not alter (every flow on that link is either frozen below
  // λ* as before or still rising at λ* as before), so that link saturates at λ* again. Only
  // flows at λ* on a changed link, and flows above λ*, are re-filled.
  const std::size_t seeds =
      threshold > 0 ? comp_links_.size() : std::numeric_limits<std::size_t>::max();
  // Breadth-first over link → flow → link: the union of the dirty components (restricted to the
  // flows at or above λ*). Each listed link is set up for the fill as it is scanned: its flows
  // below λ* keep their rates and leave their capacity, the others are counted. When the search
  // turns out to hold most of a large network, a full solve is cheaper: it skips the rest of the
  // search and walks flows and links in index order instead of search order (solving components
  // that did not change is exact too, they just come out the same). Not for a level-restricted
  // search: a full solve would re-fill the flows below λ* too.
  const std::int64_t full_solve_at = flow_count_ >= kFullSolveMinFlows && !(threshold > 0)
                                         ? flow_count_ / 2
                                         : flow_count_ + 1;
  for (std::size_t next = 0; next < comp_links_.size(); ++next) {
    // The search is bound by memory: each listed link is a record and a list elsewhere. Fetch
    // the record of the link eight places ahead and the list of the one four ahead (whose
    // record was fetched four links ago), while this one is scanned.
    if (next + 8 < comp_links_.size()) {
      __builtin_prefetch(&links_[static_cast<std::size_t>(comp_links_[next + 8])]);
    }
    if (next + 4 < comp_links_.size()) {
      __builtin_prefetch(links_[static_cast<std::size_t>(comp_links_[next + 4])].flows.data());
    }
    Link& link = links_[static_cast<std::size_t>(comp_links_[next])];
    double remaining = link.capacity;
    std::int32_t unfrozen = 0;
    for (const Entry& e : link.flows) {
      const double rate = e.rate;
      if (rate < threshold) {
        remaining -= rate;
        continue;
      }
      const FlowIndex f = e.flow;
      FlowSlot& slot = slots_[static_cast<std::size_t>(f)];
      if (rate <= level && next >= seeds && slot.visit_stamp != epoch_) {
        remaining -= rate;
        continue;
      }
      ++unfrozen;
      if (slot.visit_stamp == epoch_) continue;
      slot.visit_stamp = epoch_;
      comp_flows_.push_back(f);
      if (static_cast<std::int64_t>(comp_flows_.size()) > full_solve_at) return solve_all();
      const topo::LinkId* path = pool_link_.data() + slot.path_offset;
      for (std::int32_t hop = 0; hop < slot.path_length; ++hop) {
        Link& other = links_[static_cast<std::size_t>(path[hop])];
        if (other.stamp != epoch_) {
          other.stamp = epoch_;
          comp_links_.push_back(path[hop]);
        }
      }
    }
    link.remaining = std::max(0.0, remaining);
    link.unfrozen = unfrozen;
  }
  fill();
  return collect_changed();
}

std::span<const FlowIndex> MaxMinSolver::solve_all() {
  change_level_ = kUnlimited;
  next_epoch();
  for (const topo::LinkId l : dirty_links_) links_[static_cast<std::size_t>(l)].dirty = 0;
  dirty_links_.clear();
  comp_links_.clear();
  comp_flows_.clear();
  for (topo::LinkId l = 0; l < link_count(); ++l) {
    Link& link = links_[static_cast<std::size_t>(l)];
    if (link.flows.empty()) continue;
    link.stamp = epoch_;
    link.remaining = link.capacity;
    link.unfrozen = static_cast<std::int32_t>(link.flows.size());
    comp_links_.push_back(l);
  }
  for (FlowIndex f = 0; f < flow_slots(); ++f) {
    FlowSlot& slot = slots_[static_cast<std::size_t>(f)];
    if (slot.alive != 0) {
      slot.visit_stamp = epoch_;
      comp_flows_.push_back(f);
    }
  }
  fill();
  return collect_changed();
}

// Verified partial re-fills. A level-restricted search re-fills every flow at or above λ* that
// the change reaches through links carrying such flows; most of them come out as they were (on
// the default 12,288-GPU scenario, a completion's solve re-fills about 1,800 flows of a pipeline
// exchange and the DP rings it meets, and about 80 of them move). Here the re-fill starts from the
// flows at or above λ* on the changed links only (the open set), with every other flow held at its
// rate (its rate taken off its links' capacity), and the result is kept only when it is provably
// the max-min allocation of the whole network. A feasible allocation is max-min exactly when every
// flow is bottlenecked: at its bound, or on a saturated link where no flow is faster (Bertsekas &
// Gallager §6.5). Under the new rates only the changed links (the seeds, and the links of open
// flows whose rate moved) differ from the last solve, which was max-min, so the check is local:
//   * every open flow's bottleneck from the fill holds (a held flow on it may be faster);
//   * no changed link is above its capacity (held flows may need less);
//   * every held flow on a changed link still has a bottleneck (its recorded one first: the link
//     or bound that froze it in the fill that set its rate, then any link of its path).
// The checks read each link's load and largest rate under the new rates from a memo that the
// set-up (held flows) and the fill (open flows) complete for every link of the open set, so only
// a held flow whose recorded bottleneck fails scans links of its path.
// A held flow at or above λ* that fails a check joins the open set and the re-fill runs again.
// One below λ* that fails, or more than kVerifiedRounds rounds, falls back to the full search
// (flows below λ* keep their rates in the true allocation, so a failure there means the open set
// is not yet the right one; the full search is always exact). Checks use check()'s relative
// tolerance, 1e-9.

namespace {
// A bound on the work a partial re-fill may waste before the search takes over; the answer is
// the same at any value. On the default scenario 89 % of the kept solves need one round, and 413
// of its 68,917 solves reach the fourth without a proof and take the search.
constexpr int kVerifiedRounds = 4;
constexpr double kVerifyTol = 1e-9;
}  // namespace

const LinkCheck& MaxMinSolver::checked(topo::LinkId l) {
  LinkCheck& c = link_check_[static_cast<std::size_t>(l)];
  if (c.stamp == epoch_) return c;
  c.stamp = epoch_;
  c.load = 0;
  c.largest = 0;
  for (const Entry& e : links_[static_cast<std::size_t>(l)].flows) {
    const double r = open_[static_cast<std::size_t>(e.flow)] == epoch_
                         ? slots_[static_cast<std::size_t>(e.flow)].next_rate
                         : e.rate;
    c.load += r;
    c.largest = std::max(c.largest, r);
  }
  return c;
}

std::int32_t MaxMinSolver::bottleneck_under_new_rates(FlowIndex f, double rate,
                                                      std::int32_t hint) {
  const FlowSlot& slot = slots_[static_cast<std::size_t>(f)];
  if (slot.cap < kUnlimited) {
    if (exceeds(rate, slot.cap, kVerifyTol)) return kUnknownBottleneck;  // above its bound
    if (!exceeds(slot.cap, rate, kVerifyTol)) return kBoundBottleneck;
  }
  const auto holds = [&](topo::LinkId l) {
    const LinkCheck& c = checked(l);
    return !exceeds(links_[static_cast<std::size_t>(l)].capacity, c.load, kVerifyTol) &&
           !exceeds(c.largest, rate, kVerifyTol);
  };
  if (hint >= 0) {
    // A recorded bottleneck on a link nothing changed still holds (the last solve was max-min).
    if (link_check_[static_cast<std::size_t>(hint)].changed != epoch_ || holds(hint)) return hint;
  }
  const topo::LinkId* path = pool_link_.data() + slot.path_offset;
  for (std::int32_t hop = 0; hop < slot.path_length; ++hop) {
    if (path[hop] != hint && holds(path[hop])) return path[hop];
  }
  return kUnknownBottleneck;
}

bool MaxMinSolver::open_faster(topo::LinkId l, double above, double threshold) {
  bool any = false;
  for (const Entry& e : links_[static_cast<std::size_t>(l)].flows) {
    if (open_[static_cast<std::size_t>(e.flow)] == epoch_ || e.rate < threshold ||
        !exceeds(e.rate, above, kVerifyTol)) {
      continue;
    }
    FlowSlot& slot = slots_[static_cast<std::size_t>(e.flow)];
    any = true;
    // A held flow is never frozen by the fill, so the stamp marks it as queued.
    if (slot.frozen_stamp != epoch_) {
      slot.frozen_stamp = epoch_;
      violators_.push_back(e.flow);
    }
  }
  return any;
}

bool MaxMinSolver::solve_verified(double threshold) {
  next_epoch();
  comp_flows_.clear();
  // The open set starts as the flows at or above the level on the changed links, less those
  // bottlenecked elsewhere: at their bound, or on a link that is not a seed (a lock-step ring
  // flow lists its whole ring). Looking for another link that holds a flow whose recorded
  // bottleneck is a seed was tried: on the default scenario it kept a tenth of the rings out and
  // cost more in scans than it saved.
  // Which flows start open changes only the work, not the answer: the checks below are complete.
  for (const topo::LinkId l : seeds_) link_check_[static_cast<std::size_t>(l)].changed = epoch_;
  const auto changed = [&](topo::LinkId l) {
    return link_check_[static_cast<std::size_t>(l)].changed == epoch_;
  };
  violators_.clear();
  for (const topo::LinkId l : seeds_) {
    for (const Entry& e : links_[static_cast<std::size_t>(l)].flows) {
      FlowSlot& slot = slots_[static_cast<std::size_t>(e.flow)];
      if (e.rate < threshold || slot.check_stamp == epoch_) continue;
      slot.check_stamp = epoch_;
      if (!exceeds(e.rate, slot.cap, kVerifyTol)) {
        const std::int32_t b = slot.bottleneck;
        if (b == kBoundBottleneck ? !exceeds(slot.cap, e.rate, kVerifyTol) : b >= 0 && !changed(b)) {
          continue;
        }
      }
      violators_.push_back(e.flow);
    }
  }
  // A fresh epoch for the rounds.
  next_epoch();
  for (const FlowIndex f : violators_) {
    slots_[static_cast<std::size_t>(f)].visit_stamp = epoch_;
    open_[static_cast<std::size_t>(f)] = epoch_;
    comp_flows_.push_back(f);
  }
  for (int round = 0; round < kVerifiedRounds; ++round) {
    if (round > 0) {
      next_epoch();
      for (const FlowIndex f : comp_flows_) {
        slots_[static_cast<std::size_t>(f)].visit_stamp = epoch_;
        open_[static_cast<std::size_t>(f)] = epoch_;
      }
    }
    // The links: the seeds and every link of an open flow, each with the open flows counted and
    // the held flows' rates taken off its capacity.
    comp_links_.clear();
    const auto list = [&](topo::LinkId l) {
      Link& link = links_[static_cast<std::size_t>(l)];
      if (link.stamp != epoch_) {
        link.stamp = epoch_;
        comp_links_.push_back(l);
      }
    };
    for (const topo::LinkId l : seeds_) list(l);
    for (const FlowIndex f : comp_flows_) {
      const FlowSlot& slot = slots_[static_cast<std::size_t>(f)];
      const topo::LinkId* path = pool_link_.data() + slot.path_offset;
      for (std::int32_t hop = 0; hop < slot.path_length; ++hop) list(path[hop]);
    }
    // The memo of the checks starts with the held flows' load and largest rate on each link.
    for (const topo::LinkId l : comp_links_) {
      Link& link = links_[static_cast<std::size_t>(l)];
      double remaining = link.capacity;
      double held = 0;
      double held_largest = 0;
      std::int32_t unfrozen = 0;
      for (const Entry& e : link.flows) {
        if (open_[static_cast<std::size_t>(e.flow)] == epoch_) {
          ++unfrozen;
        } else {
          remaining -= e.rate;
          held += e.rate;
          held_largest = std::max(held_largest, e.rate);
        }
      }
      link.remaining = std::max(0.0, remaining);
      link.unfrozen = unfrozen;
      LinkCheck& c = link_check_[static_cast<std::size_t>(l)];
      c.stamp = epoch_;
      c.load = held;
      c.largest = held_largest;
    }
    fill();
    // ... and the open flows' new rates complete it: every link of an open flow is listed.
    for (const FlowIndex f : comp_flows_) {
      const FlowSlot& slot = slots_[static_cast<std::size_t>(f)];
      const topo::LinkId* path = pool_link_.data() + slot.path_offset;
      for (std::int32_t hop = 0; hop < slot.path_length; ++hop) {
        LinkCheck& c = link_check_[static_cast<std::size_t>(path[hop])];
        c.load += slot.next_rate;
        c.largest = std::max(c.largest, slot.next_rate);
      }
    }

    // The changed links: the seeds, and the links of the open flows whose rate moved.
    violators_.clear();
    rechecked_.clear();
    for (const topo::LinkId l : seeds_) link_check_[static_cast<std::size_t>(l)].changed = epoch_;
    for (const FlowIndex f : comp_flows_) {
      const FlowSlot& slot = slots_[static_cast<std::size_t>(f)];
      if (slot.next_rate == rate_[static_cast<std::size_t>(f)]) continue;
      const topo::LinkId* path = pool_link_.data() + slot.path_offset;
      for (std::int32_t hop = 0; hop < slot.path_length; ++hop) {
        link_check_[static_cast<std::size_t>(path[hop])].changed = epoch_;
      }
    }
    bool gave_up = false;
    // Every open flow's bottleneck from the fill holds, unless a held flow on it is faster.
    for (const FlowIndex f : comp_flows_) {
      const FlowSlot& slot = slots_[static_cast<std::size_t>(f)];
      const std::int32_t b = slot.next_bottleneck;
      if (b == kBoundBottleneck) continue;
      if (b < 0) {
        gave_up = true;
        break;
      }
      const LinkCheck& c = checked(b);
      if (!exceeds(links_[static_cast<std::size_t>(b)].capacity, c.load, kVerifyTol) &&
          !exceeds(c.largest, slot.next_rate, kVerifyTol)) {
        continue;
      }
      if (!open_faster(b, slot.next_rate, threshold)) {
        gave_up = true;
        break;
      }
    }
    // No changed link above its capacity, and every held flow on one still bottlenecked.
    for (std::size_t k = 0; !gave_up && k < comp_links_.size(); ++k) {
      const topo::LinkId l = comp_links_[k];
      if (link_check_[static_cast<std::size_t>(l)].changed != epoch_) continue;
      if (exceeds(checked(l).load, links_[static_cast<std::size_t>(l)].capacity, kVerifyTol)) {
        // The next round re-checks the link's other flows.
        if (!open_faster(l, -1.0, threshold)) gave_up = true;
        continue;
      }
      for (const Entry& e : links_[static_cast<std::size_t>(l)].flows) {
        if (open_[static_cast<std::size_t>(e.flow)] == epoch_) continue;
        FlowSlot& slot = slots_[static_cast<std::size_t>(e.flow)];
        if (slot.check_stamp == epoch_ || slot.frozen_stamp == epoch_) continue;
        slot.check_stamp = epoch_;
        const std::int32_t b = bottleneck_under_new_rates(e.flow, e.rate, slot.bottleneck);
        if (b != kUnknownBottleneck) {
          if (b != slot.bottleneck) rechecked_.emplace_back(e.flow, b);
          continue;
        }
        if (e.rate < threshold) {
          gave_up = true;
          break;
        }
        slot.frozen_stamp = epoch_;
        violators_.push_back(e.flow);
      }
    }
    if (gave_up) break;
    if (violators_.empty()) {
      for (const auto& [f, b] : rechecked_) slots_[static_cast<std::size_t>(f)].bottleneck = b;
      ++verified_solves_;
      return true;
    }
    comp_flows_.insert(comp_flows_.end(), violators_.begin(), violators_.end());
  }
  ++verified_fallbacks_;
  return false;
}

// Ascending keys. Large lists (the components an arrival re-solves) go through a
// least-significant-digit radix sort: keys are finite and >= 0, so their IEEE bit patterns order
// as unsigned integers. The sort is stable, so equal keys keep the order they were listed in
// (links in search order, then flow bounds), which is deterministic; small lists are ordered by
// (key, id). The order among equal keys does not change the allocation mathematically (they
// saturate at the same level); on the default scenario at 3,072 and 12,288 GPUs the results are
// the same to the last bit either way.
//
// The radix passes cover the upper 32 bits only (sign, exponent and the mantissa's top 20 bits),
// skipping bytes every key shares; a stable insertion pass on the whole key then orders keys
// that agree in those bits (relative differences below 2^-20, a handful of near-ties). Both
// phases are stable, so the order is exactly that of a stable sort on the whole key, which the
// eight-byte radix sort gave before (it spent most of its passes on the low mantissa bytes,
// which nearly every key differs in).
void MaxMinSolver::sort_keys() {
  const std::size_t n = sorted_.size();
  if (n < 1024) {
    std::sort(sorted_.begin(), sorted_.end(),
              [](const HeapEntry& a, const HeapEntry& b) { return Later{}(b, a); });
    return;
  }
  radix_tmp_.resize(n);
  const auto high_of = [](const HeapEntry& e) {
    return static_cast<std::uint32_t>(std::bit_cast<std::uint64_t>(e.key + 0.0) >> 32);
  };
  // The four byte histograms in one pass over the keys, then one scatter pass per byte that
  // not every key shares.
  std::array<std::array<std::uint32_t, 256>, 4> count{};
  for (const HeapEntry& e : sorted_) {
    const std::uint32_t k = high_of(e);
    for (int b = 0; b < 4; ++b) ++count[static_cast<std::size_t>(b)][(k >> (8 * b)) & 0xff];
  }
  for (int b = 0; b < 4; ++b) {
    std::array<std::uint32_t, 256>& c = count[static_cast<std::size_t>(b)];
    const int shift = 8 * b;
    if (c[(high_of(sorted_.front()) >> shift) & 0xff] == n) continue;  // the pass would not move them
    std::uint32_t sum = 0;
    for (std::uint32_t& v : c) {
      const std::uint32_t here = v;
      v = sum;
      sum += here;
    }
    for (const HeapEntry& e : sorted_) radix_tmp_[c[(high_of(e) >> shift) & 0xff]++] = e;
    sorted_.swap(radix_tmp_);
  }
  // Stable insertion on the whole key: an entry moves back only past larger keys (never past an
  // equal one), and only within its run of equal upper bits, which the passes above left in
  // listing order. Many keys that differ only in their last bits (shares rounded differently)
  // and are listed out of order would make this quadratic: past a budget of moves, a stable
  // sort on the whole key finishes it (equal keys are still in listing order, so the order is
  // the same).
  std::size_t budget = 8 * n;
  for (std::size_t i = 1; i < n; ++i) {
    if (!(sorted_[i].key < sorted_[i - 1].key)) continue;
    const HeapEntry e = sorted_[i];
    std::size_t j = i;
    do {
      sorted_[j] = sorted_[j - 1];
      --j;
    } while (j > 0 && e.key < sorted_[j - 1].key);
    sorted_[j] = e;
    const std::size_t moved = i - j;
    if (moved > budget) {
      std::stable_sort(sorted_.begin(), sorted_.end(),
                       [](const HeapEntry& a, const HeapEntry& b) { return a.key < b.key; });
      return;
    }
    budget -= moved;
  }
}

void MaxMinSolver::freeze(FlowIndex f, double rate, std::int32_t bottleneck) {
  FlowSlot& slot = slots_[static_cast<std::size_t>(f)];
  slot.frozen_stamp = epoch_;
  slot.next_rate = rate;
  slot.next_bottleneck = bottleneck;
  const topo::LinkId* path = pool_link_.data() + slot.path_offset;
  for (std::int32_t hop = 0; hop < slot.path_length; ++hop) {
    Link& link = links_[static_cast<std::size_t>(path[hop])];
    link.remaining -= rate;
    --link.unfrozen;
  }
}

// Progressive filling over comp_links_/comp_flows_ (the flows stamped by this solve), whose
// `remaining` and `unfrozen` the search set up: every link of a listed flow is listed, and every
// flow on a listed link is listed or keeps its rate (below the level-restricted solve's λ*; its
// rate was subtracted from the link's capacity: the residual problem). With λ* = 0 the lists
// are closed components.
//
// The initial keys are sorted once; keys refreshed during the fill go to a small heap, and the
// next key is the smaller of the two fronts. Sorting once is cheaper than a heap of all links,
// most of which are never refreshed. Two exact reductions keep the sorted list short:
//   * a link crossed by one (unfrozen) flow is just a bound on that flow (x_f ≤ C_l), so it gets
//     no key of its own: it lowers the flow's bound instead (most NIC, PCIe and ToR-port links of
//     ring-like traffic carry one flow);
//   * a flow's bound gets a key only when it is below the capacity of every shared link on its
//     path: otherwise a shared link it crosses never lets it reach the bound, or saturates
//     with it exactly there and bottlenecks it just as well.
void MaxMinSolver::fill() {
  sorted_.clear();
  heap_.clear();
  for (const topo::LinkId l : comp_links_) {
    const Link& link = links_[static_cast<std::size_t>(l)];
    if (link.unfrozen > 1) sorted_.push_back(HeapEntry{link.remaining / link.unfrozen, l});
  }
  for (const FlowIndex f : comp_flows_) {
    FlowSlot& slot = slots_[static_cast<std::size_t>(f)];
    const topo::LinkId* path = pool_link_.data() + slot.path_offset;
    double bound = slot.cap;
    std::int32_t bound_by = kBoundBottleneck;
    double shared = kUnlimited;
    for (std::int32_t hop = 0; hop < slot.path_length; ++hop) {
      const Link& link = links_[static_cast<std::size_t>(path[hop])];
      if (link.unfrozen == 1) {
        if (link.remaining < bound) {
          bound = link.remaining;
          bound_by = path[hop];
        }
      } else {
        shared = std::min(shared, link.remaining);
      }
    }
    if (bound < shared) {
      sorted_.push_back(HeapEntry{bound, ~f});
      // What freezes the flow if this key does: its bound, or the link it alone crosses.
      slot.next_bottleneck = bound_by;
    }
  }
  sort_keys();
  std::size_t next = 0;
  std::size_t unfrozen = comp_flows_.size();
  while (unfrozen > 0) {
    HeapEntry top;
    if (next < sorted_.size() && (heap_.empty() || !Later{}(sorted_[next], heap_.front()))) {
      top = sorted_[next++];
    } else if (!heap_.empty()) {
      std::pop_heap(heap_.begin(), heap_.end(), Later{});
      top = heap_.back();
      heap_.pop_back();
    } else {
      break;
    }
    if (top.id < 0) {
      // A flow's bound (its own or a link it alone crosses): it is below every shared link's
      // share (keys are lower bounds), so it is final.
      const FlowIndex f = ~top.id;
      const FlowSlot& slot = slots_[static_cast<std::size_t>(f)];
      if (slot.frozen_stamp != epoch_) {
        freeze(f, top.key, slot.next_bottleneck);
        --unfrozen;
      }
      continue;
    }
    const Link& link = links_[static_cast<std::size_t>(top.id)];
    if (link.unfrozen == 0) continue;
    const double share = std::max(0.0, link.remaining) / link.unfrozen;
    double next_key = kUnlimited;
    if (next < sorted_.size()) next_key = sorted_[next].key;
    if (!heap_.empty()) next_key = std::min(next_key, heap_.front().key);
    if (share > next_key) {
      // The key was stale (flows froze elsewhere since it was set): refresh and retry.
      heap_.push_back(HeapEntry{share, top.id});
      std::push_heap(heap_.begin(), heap_.end(), Later{});
      continue;
    }
    for (const Entry& e : link.flows) {
      const FlowIndex f = e.flow;
      const FlowSlot& slot = slots_[static_cast<std::size_t>(f)];
      if (slot.visit_stamp == epoch_ && slot.frozen_stamp != epoch_) {
        freeze(f, share, top.id);
        --unfrozen;
      }
    }
  }
}

void MaxMinSolver::set_rate(FlowIndex f, double rate) {
  const auto i = static_cast<std::size_t>(f);
  rate_[i] = rate;
  const FlowSlot& slot = slots_[i];
  for (std::int32_t hop = 0; hop < slot.path_length; ++hop) {
    const auto at = static_cast<std::size_t>(slot.path_offset + hop);
    links_[static_cast<std::size_t>(pool_link_[at])].flows[static_cast<std::size_t>(pool_pos_[at])].rate =
        rate;
  }
}

std::span<const FlowIndex> MaxMinSolver::collect_changed() {
  changed_.clear();
  for (const FlowIndex f : comp_flows_) {
    FlowSlot& slot = slots_[static_cast<std::size_t>(f)];
    slot.bottleneck = slot.next_bottleneck;
    if (slot.next_rate != rate_[static_cast<std::size_t>(f)]) {
      set_rate(f, slot.next_rate);
      changed_.push_back(f);
    }
  }
  return changed_;
}

std::string MaxMinSolver::check_invariants(double rel_tol) const {
  std::vector<topo::LinkId> links(static_cast<std::size_t>(link_count()));
  for (topo::LinkId l = 0; l < link_count(); ++l) links[static_cast<std::size_t>(l)] = l;
  std::vector<FlowIndex> flows;
  for (FlowIndex f = 0; f < flow_slots(); ++f) {
    if (alive(f)) flows.push_back(f);
  }
  return check(links, flows, rel_tol);
}

std::string MaxMinSolver::check_last_solve(double rel_tol) const {
  return check(comp_links_, comp_flows_, rel_tol);
}

std::string MaxMinSolver::check(std::span<const topo::LinkId> links,
                                std::span<const FlowIndex> flows, double rel_tol) const {
  std::ostringstream out;
  // Per link: total rate and largest rate of the flows on it.
  std::vector<double> load(links_.size(), 0.0);
  std::vector<double> largest(links_.size(), 0.0);
  for (const topo::LinkId l : links) {
    const auto li = static_cast<std::size_t>(l);
    for (const Entry& e : links_[li].flows) {
      const FlowIndex f = e.flow;
      load[li] += rate(f);
      largest[li] = std::max(largest[li], rate(f));
    }
    if (exceeds(load[li], links_[li].capacity, rel_tol)) {
      out << "link " << l << " carries " << load[li] << " B/s, above its capacity " << links_[li].capacity
          << " B/s";
      return out.str();
    }
  }
  for (const FlowIndex f : flows) {
    const double r = rate(f);
    if (!(r >= 0) || exceeds(r, flow_cap(f), rel_tol)) {
      out << "flow " << f << " has rate " << r << " B/s outside [0, bound " << flow_cap(f) << "]";
      return out.str();
    }
    if (flow_cap(f) < kUnlimited && !exceeds(flow_cap(f), r, rel_tol)) continue;  // at its bound
    bool bottlenecked = false;
    for (const topo::LinkId l : path(f)) {
      const auto li = static_cast<std::size_t>(l);
      const bool saturated = !exceeds(links_[li].capacity, load[li], rel_tol);
      if (saturated && !exceeds(largest[li], r, rel_tol)) {
        bottlenecked = true;
        break;
      }
    }
    if (!bottlenecked) {
      out << "flow " << f << " (rate " << r << " B/s) has no bottleneck: it could grow";
      return out.str();
    }
  }
  return "";
}

std::size_t MaxMinSolver::memory_bytes() const {
  std::size_t bytes = links_.capacity() * sizeof(Link) + busy_.capacity() +
                      dirty_links_.capacity() * sizeof(topo::LinkId);
  for (const Link& link : links_) bytes += link.flows.capacity() * sizeof(Entry);
  bytes += slots_.capacity() * sizeof(FlowSlot) + rate_.capacity() * sizeof(double) + free_flows_.capacity() * sizeof(FlowIndex);
  bytes += link_check_.capacity() * sizeof(LinkCheck) + open_.capacity() * sizeof(std::uint32_t) +
           (seeds_.capacity() + violators_.capacity()) * sizeof(std::int32_t) +
           rechecked_.capacity() * sizeof(std::pair<FlowIndex, std::int32_t>);
  bytes +=
      pool_link_.capacity() * sizeof(topo::LinkId) + pool_pos_.capacity() * sizeof(std::int32_t);
  for (const auto& v : free_blocks_) bytes += v.capacity() * sizeof(std::int64_t);
  bytes += comp_links_.capacity() * sizeof(topo::LinkId) +
           comp_flows_.capacity() * sizeof(FlowIndex) +
           (heap_.capacity() + sorted_.capacity()) * sizeof(HeapEntry) +
           changed_.capacity() * sizeof(FlowIndex);
  return bytes;
}

}  // namespace trainsim::net
