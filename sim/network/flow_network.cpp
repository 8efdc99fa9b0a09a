#include "sim/network/flow_network.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "sim/core/error.h"

namespace trainsim::net {
namespace {

// Empties the first `n` per-flow lists of a recording owner, keeping their storage: owners are
// reused for component after component, and freeing each flow's list and allocating it again at
// its first rate was 3-4 % of the default 12,288-GPU flow run (malloc under record_rate).
// Lists beyond `n` stay as they are; only the first `n` (the recording's flows) are read.
template <class V>
void reset_lists(std::vector<std::vector<V>>& lists, std::size_t n) {
  if (lists.size() < n) lists.resize(n);
  for (std::size_t k = 0; k < n; ++k) lists[k].clear();
}

// Rises smaller than this (relative) are rounding noise of a re-solve, not a freed share.
constexpr double kRiseTolerance = 1e-9;
// Distinct composites kept at most (each holds its flows' paths and, once recorded, trajectory).
constexpr std::size_t kMaxComposites = 1 << 14;
// Tag bit of the events that end a replayed group (the rest of the tag is the owner).
constexpr std::uint64_t kReplayTag = std::uint64_t{1} << 62;
constexpr std::uint64_t kReplayBatchTag = std::uint64_t{1} << 61;
// Bound on the congestion-control hold rounds of one batch (each round holds at least one more
// flow; in practice one or two rounds suffice).
constexpr int kMaxHoldRounds = 32;

// A free index of `items` (its old contents left for the caller to reset), or a new one.
template <class T>
std::int32_t take_slot(std::vector<T>& items, std::vector<std::int32_t>& free) {
  if (free.empty()) {
    items.emplace_back();
    return static_cast<std::int32_t>(items.size()) - 1;
  }
  const std::int32_t i = free.back();
  free.pop_back();
  return i;
}

}  // namespace

FlowNetwork::FlowNetwork(Simulation& sim, std::vector<double> link_capacity_Bps,
                         FlowNetworkOptions options)
    : sim_(sim),
      cc_(options.config),
      check_invariants_(options.check_invariants),
      merge_replays_(options.merge_replayed_completions),
      solver_(link_capacity_Bps),
      base_capacity_(std::move(link_capacity_Bps)),
      down_(base_capacity_.size(), 0),
      sender_link_(base_capacity_.size(), 0),
      link_owner_(base_capacity_.size(), -1) {
  for (const topo::LinkId l : options.sender_links) {
    if (l < 0 || static_cast<std::size_t>(l) >= base_capacity_.size()) {
      throw_input("sender link " + std::to_string(l) + " is not a link of the network");
    }
    sender_link_[static_cast<std::size_t>(l)] = 1;
  }
}

void FlowNetwork::ensure_slot(FlowId f) {
  const auto need = static_cast<std::size_t>(f) + 1;
  if (st_.size() < need) st_.resize(need);
}

double FlowNetwork::effective_cap(FlowId f) const {
  const auto i = static_cast<std::size_t>(f);
  if (st_[i].stalled != 0) return 0.0;
  return std::min(st_[i].user_cap, st_[i].hold_cap);
}

void FlowNetwork::refresh_cap(FlowId f) { solver_.set_flow_cap(f, effective_cap(f)); }

void FlowNetwork::refresh_link_efficiency(topo::LinkId l) {
  const auto li = static_cast<std::size_t>(l);
  if (!cc_.derates() || sender_link_[li] != 0) return;
  const int n = solver_.flow_count_on(l);
  solver_.set_link_capacity(l, base_capacity_[li] * cc_.link_efficiency(n));
}

FlowId FlowNetwork::start_flow(const FlowSpec& spec) {
  if (spec.bytes < 0) throw_input("a flow's size must be >= 0 bytes");
  std::int32_t down = 0;
  for (const topo::LinkId l : spec.path) {
    // Bad ids are reported by the solver below.
    if (l >= 0 && static_cast<std::size_t>(l) < down_.size()) {
      down += down_[static_cast<std::size_t>(l)];
    }
  }
  touch_links(spec.path);
  const FlowId f = solver_.add_flow(spec.path, down > 0 ? 0.0 : spec.cap_Bps);
  init_flow(f, spec, down);
  if (cc_.derates()) {
    for (const topo::LinkId l : spec.path) refresh_link_efficiency(l);
  }
  return f;
}

void FlowNetwork::init_flow(FlowId f, const FlowSpec& spec, std::int32_t down) {
  const TimePs now = sim_.now();
  ensure_slot(f);
  FlowState& st = st_[static_cast<std::size_t>(f)];
  st.bytes = spec.bytes;
  st.remaining = static_cast<double>(spec.bytes);
  st.last_update = now;
  st.applied_rate = 0;
  st.start = now;
  st.tag = spec.tag;
  st.user_cap = spec.cap_Bps;
  st.hold_cap = kUnlimited;
  st.timer_kind = Timer::kNone;
  st.down_links = down;
  st.stalled = down > 0 ? 1 : 0;
  st.exempt_batch = 0;
  st.touched_batch = 0;
  st.owner = -1;
  if (down > 0) {
    st.stall_start = now;
    set_timer(f, Timer::kDeadline, now + cc_.retry_budget());
  }
  if (spec.bytes == 0) completion_.set(f, now);
  ++stats_.flows_started;
  stats_.bytes_started += spec.bytes;
  request_flush();
}

// The flows of a group split into connected components (flows sharing a link, transitively):
// computed once per key, as the unit of isolation, recording and replay.
FlowNetwork::Shape& FlowNetwork::shape_of(std::uint64_t key, std::span<const FlowSpec> specs) {
  auto& slot = shapes_[key];
  if (slot) return *slot;
  slot = std::make_unique<Shape>();
  Shape& sh = *slot;
  sh.serial = next_serial_++;
  const std::size_t n = specs.size();
  sh.offset.push_back(0);
  for (const FlowSpec& spec : specs) {
    sh.links.insert(sh.links.end(), spec.path.begin(), spec.path.end());
    sh.offset.push_back(static_cast<std::uint32_t>(sh.links.size()));
    sh.bytes.push_back(spec.bytes);
    sh.caps.push_back(spec.cap_Bps);
    sh.tags.push_back(spec.tag);
  }
  // Union-find over flows, joined through the first flow seen on each link.
  std::vector<std::uint32_t> parent(n);
  for (std::size_t k = 0; k < n; ++k) parent[k] = static_cast<std::uint32_t>(k);
  const auto find = [&](std::uint32_t x) {
    while (parent[x] != x) x = parent[x] = parent[parent[x]];
    return x;
  };
  std::unordered_map<topo::LinkId, std::uint32_t> first;
  for (std::size_t k = 0; k < n; ++k) {
    for (std::uint32_t e = sh.offset[k]; e < sh.offset[k + 1]; ++e) {
      const auto [it, fresh] = first.emplace(sh.links[e], static_cast<std::uint32_t>(k));
      if (!fresh) parent[find(static_cast<std::uint32_t>(k))] = find(it->second);
    }
  }
  std::unordered_map<std::uint32_t, std::uint32_t> comp_of_root;
  std::vector<std::uint32_t> comp(n);
  for (std::size_t k = 0; k < n; ++k) {
    const auto [it, fresh] = comp_of_root.emplace(find(static_cast<std::uint32_t>(k)),
                                                  static_cast<std::uint32_t>(comp_of_root.size()));
    comp[k] = it->second;
  }
  const std::size_t comps = comp_of_root.size();
  sh.comp_offset.assign(comps + 1, 0);
  for (std::size_t k = 0; k < n; ++k) ++sh.comp_offset[comp[k] + 1];
  for (std::size_t c = 0; c < comps; ++c) sh.comp_offset[c + 1] += sh.comp_offset[c];
  sh.comp_flows.resize(n);
  std::vector<std::uint32_t> fill(sh.comp_offset.begin(), sh.comp_offset.end() - 1);
  for (std::size_t k = 0; k < n; ++k) sh.comp_flows[fill[comp[k]]++] = static_cast<std::uint32_t>(k);
  // Each component's links, each once, in the order its flows first cross them (a mark per
  // link: a component merged by ECMP collisions can hold thousands of links).
  sh.comp_link_offset.push_back(0);
  std::vector<std::uint32_t> listed_in(static_cast<std::size_t>(solver_.link_count()),
                                       std::numeric_limits<std::uint32_t>::max());
  for (std::size_t c = 0; c < comps; ++c) {
    for (std::uint32_t i = sh.comp_offset[c]; i < sh.comp_offset[c + 1]; ++i) {
      const std::uint32_t k = sh.comp_flows[i];
      for (std::uint32_t e = sh.offset[k]; e < sh.offset[k + 1]; ++e) {
        std::uint32_t& mark = listed_in[static_cast<std::size_t>(sh.links[e])];
        if (mark != c) {
          mark = static_cast<std::uint32_t>(c);
          sh.comp_links.push_back(sh.links[e]);
        }
      }
    }
    sh.comp_link_offset.push_back(static_cast<std::uint32_t>(sh.comp_links.size()));
  }
  sh.comp_bytes.assign(comps, 0);
  for (std::size_t c = 0; c < comps; ++c) {
    for (std::uint32_t i = sh.comp_offset[c]; i < sh.comp_offset[c + 1]; ++i) {
      sh.comp_bytes[c] += sh.bytes[sh.comp_flows[i]];
    }
  }
  sh.trajectory.assign(comps, nullptr);
  sh.recording.assign(comps, -1);
  return sh;
}

std::span<const FlowId> FlowNetwork::start_group(std::span<const FlowSpec> specs,
                                                 std::uint64_t group_key,
                                                 std::uint64_t tag_base) {
  // A local list: starting a flow can bring a replayed component back, whose completions'
  // observers may start another group before this one is done (hence tag_base_ restored).
  std::vector<FlowId> ids;
  struct Base {
    std::uint64_t& slot;
    std::uint64_t was;
    ~Base() { slot = was; }
  } base_guard{tag_base_, tag_base_};
  tag_base_ = tag_base;
  bool same_tags = false;
  bool eligible = group_key != 0 && !specs.empty();
  Shape* sh = nullptr;
  if (eligible) {
    const auto known = shapes_.find(group_key);
    if (known != shapes_.end()) {
      // The caller promises the same flows under a key; a different count or size is refused.
      // (The shape's flows were checked when it was made: positive sizes, links of the network.)
      sh = known->second.get();
      eligible = sh->bytes.size() == specs.size();
      same_tags = eligible;
      for (std::size_t k = 0; eligible && k < specs.size(); ++k) {
        eligible = sh->bytes[k] == specs[k].bytes &&
                   sh->offset[k + 1] - sh->offset[k] == specs[k].path.size();
        same_tags = same_tags && sh->tags[k] == specs[k].tag;
      }
    } else {
      for (const FlowSpec& spec : specs) {
        if (spec.bytes <= 0) eligible = false;
        for (const topo::LinkId l : spec.path) {
          if (l < 0 || l >= solver_.link_count()) eligible = false;
        }
      }
      if (eligible) sh = &shape_of(group_key, specs);
      same_tags = eligible;
    }
  }
  if (!eligible) {
    for (const FlowSpec& spec : specs) ids.push_back(start_spec(spec));
    group_ids_ = std::move(ids);
    return group_ids_;
  }
  std::shared_ptr<std::vector<std::uint64_t>> tags;
  const std::size_t comps = sh->comp_offset.size() - 1;
  // Components whose links are free or held by replays only. Those that reach replays start
  // together with them as composites: units of components joined through the replays they
  // reach (start_composite). A unit with a component that meets anything else starts plainly.
  std::vector<std::uint8_t> kind(comps);
  std::vector<std::int32_t> reached;
  std::vector<std::uint32_t> reached_offset(comps + 1, 0);
  bool any_reached = false;
  for (std::uint32_t c = 0; c < comps; ++c) {
    kind[c] = classify(*sh, c, &reached);
    reached_offset[c + 1] = static_cast<std::uint32_t>(reached.size());
    any_reached = any_reached || kind[c] == 1;
  }
  std::vector<std::uint32_t> unit;  // per component: its unit's root component
  std::vector<std::uint8_t> unit_ok;
  if (any_reached) {
    unit.resize(comps);
    for (std::uint32_t c = 0; c < comps; ++c) unit[c] = c;
    const auto find = [&](std::uint32_t x) {
      while (unit[x] != x) x = unit[x] = unit[unit[x]];
      return x;
    };
    if (owner_mark_.size() < owners_.size()) owner_mark_.resize(owners_.size(), -1);
    for (std::uint32_t c = 0; c < comps; ++c) {
      for (std::uint32_t i = reached_offset[c]; i < reached_offset[c + 1]; ++i) {
        std::int32_t& mark = owner_mark_[static_cast<std::size_t>(reached[i])];
        if (mark < 0) {
          mark = static_cast<std::int32_t>(c);
        } else {
          unit[find(c)] = find(static_cast<std::uint32_t>(mark));
        }
      }
    }
    for (const std::int32_t o : reached) owner_mark_[static_cast<std::size_t>(o)] = -1;
    unit_ok.assign(comps, 1);
    for (std::uint32_t c = 0; c < comps; ++c) {
      unit[c] = find(c);
      if (kind[c] != 1) unit_ok[unit[c]] = 0;
    }
  }
  std::vector<std::uint32_t> unit_comps;
  std::vector<std::int32_t> unit_owners;
  for (std::uint32_t c = 0; c < comps; ++c) {
    const std::uint32_t b = sh->comp_offset[c], e = sh->comp_offset[c + 1];
    if (kind[c] == 1 && unit_ok[unit[c]] != 0) {
      if (unit_ok[unit[c]] == 2) continue;  // started with its unit
      unit_comps.clear();
      unit_owners.clear();
      for (std::uint32_t d = c; d < comps; ++d) {
        if (unit[d] != unit[c]) continue;
        unit_comps.push_back(d);
        for (std::uint32_t i = reached_offset[d]; i < reached_offset[d + 1]; ++i) {
          if (std::find(unit_owners.begin(), unit_owners.end(), reached[i]) == unit_owners.end()) {
            unit_owners.push_back(reached[i]);
          }
        }
      }
      unit_ok[unit[c]] = 2;
      if (start_composite(*sh, specs, unit_comps, unit_owners, &ids)) continue;
      for (const std::uint32_t d : unit_comps) {
        for (std::uint32_t i = sh->comp_offset[d]; i < sh->comp_offset[d + 1]; ++i) {
          ids.push_back(start_spec(specs[sh->comp_flows[i]]));
        }
      }
      continue;
    }
    const bool alone = kind[c] == 0;
    if (alone && sh->trajectory[c]) {
      if (!same_tags && !tags) {
        tags = std::make_shared<std::vector<std::uint64_t>>();
        for (const FlowSpec& spec : specs) tags->push_back(spec.tag | tag_base);
      }
      const std::int32_t o = new_owner(sh, c, true);
      Owner& ow = owners_[static_cast<std::size_t>(o)];
      ow.tags = tags;
      ow.tag_base = tag_base;
      ow.trajectory = sh->trajectory[c];
      schedule_replay_end(o, sim_.now() + TimePs{ow.trajectory->last_end});
      stats_.flows_started += e - b;
      stats_.bytes_started += sh->comp_bytes[c];
      stats_.flows_replayed += e - b;
      continue;
    }
    const std::size_t first = ids.size();
    for (std::uint32_t i = b; i < e; ++i) ids.push_back(start_spec(specs[sh->comp_flows[i]]));
    if (alone && sh->recording[c] < 0) {
      // Record this component: its links are its own until its last flow ends or something
      // reaches them; its rates are written down as they are applied (the first at this
      // batch's solve).
      const std::int32_t o = new_owner(sh, c, false);
      Owner& ow = owners_[static_cast<std::size_t>(o)];
      ow.ids.assign(ids.begin() + static_cast<std::ptrdiff_t>(first), ids.end());
      reset_lists(ow.segs, e - b);
      reset_lists(ow.holds, e - b);
      ow.ends.assign(e - b, -1);
      for (std::size_t k = 0; k < ow.ids.size(); ++k) {
        FlowState& st = st_[static_cast<std::size_t>(ow.ids[k])];
        st.owner = o;
        st.owner_index = static_cast<std::int32_t>(k);
      }
      sh->recording[c] = o;
    }
  }
  group_ids_ = std::move(ids);
  return group_ids_;
}

// 0: component c's links are up and carry nothing (it runs alone); 1: they are up, carry no
// flow in the solver and are held by replays only (appended to `owners`, each once); 2: anything
// else (the owners it reaches are appended too).
std::uint8_t FlowNetwork::classify(const Shape& sh, std::uint32_t c,
                                   std::vector<std::int32_t>* owners) const {
  std::uint8_t kind = 0;
  const std::size_t first = owners->size();
  for (std::uint32_t e = sh.comp_link_offset[c]; e < sh.comp_link_offset[c + 1]; ++e) {
    const auto l = static_cast<std::size_t>(sh.comp_links[e]);
    if (down_[l] != 0 || solver_.carries_flows(sh.comp_links[e])) kind = 2;
    const std::int32_t o = link_owner_[l];
    if (o < 0) continue;
    if (!owners_[static_cast<std::size_t>(o)].replay) kind = 2;
    if (kind == 0) kind = 1;
    if (std::find(owners->begin() + static_cast<std::ptrdiff_t>(first), owners->end(), o) ==
        owners->end()) {
      owners->push_back(o);
    }
  }
  return kind;
}

namespace {

// Bytes a replayed flow has left `elapsed` ps after its component's start, and its rate then,
// from its recorded segments (a segment starting now gives the rate now). The same operations,
// in the same order, as the flow's own updates would have made.
double replay_left(std::span<const std::int64_t> seg_start, std::span<const double> seg_rate,
                   double left, std::int64_t elapsed, double* rate) {
  *rate = 0;
  for (std::size_t i = 0; i < seg_start.size(); ++i) {
    if (seg_start[i] > elapsed) break;
    const std::int64_t until = i + 1 < seg_start.size() ? std::min(seg_start[i + 1], elapsed) : elapsed;
    *rate = seg_rate[i];
    left -= *rate * TimePs{until - seg_start[i]}.seconds();
  }
  return left;
}

}  // namespace

// The composite of replays `owners` (reached by components `comps` of the group `sh` starting
// now) and those components: flows still under way in each replay (by owner, in component
// order), then the components' flows. One component; one part per replay and one for the group.
std::unique_ptr<FlowNetwork::Shape> FlowNetwork::composite_shape(
    std::span<const std::int32_t> owners, const Shape& sh, std::span<const FlowSpec> specs,
    std::span<const std::uint32_t> comps) {
  auto csh = std::make_unique<Shape>();
  csh->serial = next_serial_++;
  csh->offset.push_back(0);
  const TimePs now = sim_.now();
  const auto add = [&](const Shape& from, std::uint32_t flow, double left, std::int64_t start0,
                       std::uint32_t part) {
    csh->links.insert(csh->links.end(), from.links.begin() + from.offset[flow],
                      from.links.begin() + from.offset[flow + 1]);
    csh->offset.push_back(static_cast<std::uint32_t>(csh->links.size()));
    csh->bytes.push_back(from.bytes[flow]);
    csh->caps.push_back(from.caps[flow]);
    csh->left0.push_back(left);
    csh->start0.push_back(start0);
    csh->part.push_back(part);
  };
  std::uint32_t part = 0;
  for (const std::int32_t o : owners) {
    const Owner& ow = owners_[static_cast<std::size_t>(o)];
    const Shape& from = *ow.shape;
    const Trajectory& t = *ow.trajectory;
    const std::int64_t elapsed = (now - ow.start).ps;
    const std::uint32_t b = from.comp_offset[ow.comp];
    for (std::uint32_t k = 0; k < from.comp_offset[ow.comp + 1] - b; ++k) {
      if (t.end[k] <= elapsed) continue;
      const std::uint32_t flow = from.comp_flows[b + k];
      double rate = 0;
      const double left = replay_left(
          std::span(t.seg_start).subspan(t.seg_offset[k], t.seg_offset[k + 1] - t.seg_offset[k]),
          std::span(t.seg_rate).subspan(t.seg_offset[k], t.seg_offset[k + 1] - t.seg_offset[k]),
          from.left0.empty() ? static_cast<double>(from.bytes[flow]) : from.left0[flow], elapsed,
          &rate);
      const std::int64_t start0 =
          (ow.start - now).ps + (from.start0.empty() ? 0 : from.start0[flow]);
      add(from, flow, left, start0, part);
    }
    ++part;
  }
  for (const std::uint32_t c : comps) {
    for (std::uint32_t i = sh.comp_offset[c]; i < sh.comp_offset[c + 1]; ++i) {
      add(sh, sh.comp_flows[i], static_cast<double>(specs[sh.comp_flows[i]].bytes), 0, part);
    }
  }
  const auto n = static_cast<std::uint32_t>(csh->bytes.size());
  csh->comp_offset = {0, n};
  csh->comp_flows.resize(n);
  for (std::uint32_t k = 0; k < n; ++k) csh->comp_flows[k] = k;
  csh->comp_links = csh->links;
  std::sort(csh->comp_links.begin(), csh->comp_links.end());
  csh->comp_links.erase(std::unique(csh->comp_links.begin(), csh->comp_links.end()),
                        csh->comp_links.end());
  csh->comp_link_offset = {0, static_cast<std::uint32_t>(csh->comp_links.size())};
  csh->trajectory.assign(1, nullptr);
  csh->recording.assign(1, -1);
  return csh;
}

// Components `comps` of group `sh` start now and reach the replays `owners` (and nothing else):
// replays that a group reaches at the same age are reached the same way each time, so the
// replays' remaining flows and the group's run together as one composite, recorded the first
// time it runs alone to its end and replayed afterwards (nested composites alike). Returns false
// when the composite is being recorded by another start (the caller starts the flows plainly).
bool FlowNetwork::start_composite(const Shape& sh, std::span<const FlowSpec> specs,
                                  std::span<const std::uint32_t> comps,
                                  std::vector<std::int32_t> owners, std::vector<FlowId>* ids) {
  // Re-checked here: an observer of an earlier component's start may have changed the links.
  std::vector<std::int32_t> now_reached;
  for (const std::uint32_t c : comps) {
    if (classify(sh, c, &now_reached) != 1) return false;
  }
  for (const std::int32_t o : now_reached) {
    if (std::find(owners.begin(), owners.end(), o) == owners.end()) return false;
  }
  if (now_reached.size() < owners.size()) {
    for (const std::int32_t o : owners) {
      if (std::find(now_reached.begin(), now_reached.end(), o) == now_reached.end()) return false;
    }
  }
  std::sort(owners.begin(), owners.end(), [&](std::int32_t a, std::int32_t b) {
    const Owner& x = owners_[static_cast<std::size_t>(a)];
    const Owner& y = owners_[static_cast<std::size_t>(b)];
    return std::pair(x.shape->serial, x.comp) < std::pair(y.shape->serial, y.comp);
  });
  const TimePs now = sim_.now();
  std::vector<std::int64_t> key{static_cast<std::int64_t>(sh.serial), in_batch_ ? 1 : 0,
                                static_cast<std::int64_t>(comps.size())};
  key.insert(key.end(), comps.begin(), comps.end());
  for (const std::int32_t o : owners) {
    const Owner& ow = owners_[static_cast<std::size_t>(o)];
    key.push_back(static_cast<std::int64_t>(ow.shape->serial));
    key.push_back(ow.comp);
    key.push_back((now - ow.start).ps);
  }
  // Meetings that do not repeat (jitter, stragglers, aperiodic traffic) would each leave a shape
  // behind: past kMaxComposites distinct keys, unknown ones start plainly.
  if (composites_.size() >= kMaxComposites && composites_.find(key) == composites_.end()) {
    return false;
  }
  std::unique_ptr<Shape>& csh = composites_[std::move(key)];
  if (csh && csh->trajectory[0]) {
    replay_composite(*csh, sh, specs, comps, owners);
    return true;
  }
  if (csh && csh->recording[0] >= 0) return false;
  if (!csh) csh = composite_shape(owners, sh, specs, comps);
  // Record: the replays' flows enter the solver as they are now, the group's flows start.
  struct Was {
    const Shape* shape;
    std::uint32_t comp;
    TimePs start;
  };
  std::vector<Was> was;
  for (const std::int32_t o : owners) {
    const Owner& ow = owners_[static_cast<std::size_t>(o)];
    was.push_back({ow.shape, ow.comp, ow.start});
  }
  std::vector<FlowId> cids;
  bool same = true;
  for (std::size_t i = 0; i < owners.size(); ++i) {
    const Owner& ow = owners_[static_cast<std::size_t>(owners[i])];
    // (The completions one replay reports could, through an observer, reach the next.)
    if (!ow.live || !ow.replay || ow.shape != was[i].shape || ow.comp != was[i].comp ||
        ow.start != was[i].start) {
      same = false;
      continue;
    }
    end_replay(owners[i], true);
    for (const FlowId f : replay_ids_) {
      if (f >= 0) cids.push_back(f);
    }
  }
  const std::size_t from_group = cids.size();
  for (const std::uint32_t c : comps) {
    for (std::uint32_t i = sh.comp_offset[c]; i < sh.comp_offset[c + 1]; ++i) {
      const FlowId f = start_spec(specs[sh.comp_flows[i]]);
      cids.push_back(f);
      ids->push_back(f);
    }
  }
  // Not what the shape holds (cannot happen unless an observer intervened): not recorded.
  if (!same || cids.size() != csh->bytes.size()) return true;
  for (std::size_t k = 0; k < from_group; ++k) {
    const FlowState& st = st_[static_cast<std::size_t>(cids[k])];
    if (!solver_.alive(cids[k]) || st.remaining != csh->left0[k]) return true;
  }
  const std::int32_t o = new_owner(csh.get(), 0, false);
  Owner& ow = owners_[static_cast<std::size_t>(o)];
  ow.ids = std::move(cids);
  reset_lists(ow.segs, ow.ids.size());
  reset_lists(ow.holds, ow.ids.size());
  ow.ends.assign(ow.ids.size(), -1);
  for (std::size_t k = 0; k < ow.ids.size(); ++k) {
    const FlowId f = ow.ids[k];
    FlowState& st = st_[static_cast<std::size_t>(f)];
    st.owner = o;
    st.owner_index = static_cast<std::int32_t>(k);
    if (k >= from_group) continue;
    // A flow under way starts the recording with its rate and any hold in progress.
    ow.segs[k].emplace_back(0, st.applied_rate);
    if (st.timer_kind == Timer::kHold) {
      ow.holds[k].push_back({0, (timers_.key(f) - now).ps, st.hold_cap});
    }
  }
  csh->recording[0] = o;
  ++stats_.composites_recorded;
  return true;
}

// A recorded composite starts again: its replays stop (reporting the completions they have
// reached) and one replay of the composite carries their remaining flows and the group's.
void FlowNetwork::replay_composite(Shape& csh, const Shape& sh, std::span<const FlowSpec> specs,
                                   std::span<const std::uint32_t> comps,
                                   std::span<const std::int32_t> owners) {
  const TimePs now = sim_.now();
  auto tags = std::make_shared<std::vector<std::uint64_t>>();
  std::vector<FlowDone> done;
  for (const std::int32_t o : owners) {
    Owner& ow = owners_[static_cast<std::size_t>(o)];
    const Trajectory& t = *ow.trajectory;
    const Shape& from = *ow.shape;
    const std::uint32_t b = from.comp_offset[ow.comp];
    const std::int64_t elapsed = (now - ow.start).ps;
    for (std::uint32_t k = 0; k < from.comp_offset[ow.comp + 1] - b; ++k) {
      if (t.end[k] > elapsed) tags->push_back(tag_of(ow, from.comp_flows[b + k]));
    }
    replay_done(ow, ow.emitted, elapsed, &done);
    cancel_replay_end(o);
    release_owner(o);
  }
  std::int64_t flows = 0;
  for (const std::uint32_t c : comps) {
    for (std::uint32_t i = sh.comp_offset[c]; i < sh.comp_offset[c + 1]; ++i) {
      const FlowSpec& spec = specs[sh.comp_flows[i]];
      tags->push_back(spec.tag | tag_base_);
      ++stats_.flows_started;
      stats_.bytes_started += spec.bytes;
      ++flows;
    }
  }
  stats_.flows_replayed += flows;
  ++stats_.composites_replayed;
  const std::int32_t o = new_owner(&csh, 0, true);
  Owner& ow = owners_[static_cast<std::size_t>(o)];
  ow.tags = std::move(tags);
  ow.trajectory = csh.trajectory[0];
  ow.end_event = sim_.schedule(now + TimePs{ow.trajectory->breaks.front()}, *this,
                               kReplayTag | static_cast<std::uint64_t>(o));
  report_done(done);
}

std::int32_t FlowNetwork::new_owner(Shape* sh, std::uint32_t comp, bool replay) {
  const std::int32_t o = take_slot(owners_, free_owners_);
  Owner& ow = owners_[static_cast<std::size_t>(o)];
  ow.live = true;
  ow.replay = replay;
  ow.batch = -1;
  ++ow.gen;
  ow.shape = sh;
  ow.comp = comp;
  ow.start = sim_.now();
  ow.ids.clear();
  // (Its per-flow segment and hold lists keep their storage: a recording sizes and empties
  // them, reset_lists.)
  ow.ends.clear();
  ow.ended = 0;
  ow.tags.reset();
  ow.tag_base = 0;
  ow.trajectory.reset();
  ow.emitted = 0;
  ow.next_break = 0;
  for (std::uint32_t e = sh->comp_link_offset[comp]; e < sh->comp_link_offset[comp + 1]; ++e) {
    link_owner_[static_cast<std::size_t>(sh->comp_links[e])] = o;
  }
  return o;
}

void FlowNetwork::release_owner(std::int32_t o) {
  Owner& ow = owners_[static_cast<std::size_t>(o)];
  const Shape& sh = *ow.shape;
  for (std::uint32_t e = sh.comp_link_offset[ow.comp]; e < sh.comp_link_offset[ow.comp + 1]; ++e) {
    const auto l = static_cast<std::size_t>(sh.comp_links[e]);
    if (link_owner_[l] == o) link_owner_[l] = -1;
  }
  if (!ow.replay && ow.shape->recording[ow.comp] == o) ow.shape->recording[ow.comp] = -1;
  ow.live = false;
  ow.tags.reset();
  ow.trajectory.reset();
  free_owners_.push_back(o);
}

// Something is about to use links of `path`: the groups owning any of them lose their isolation.
void FlowNetwork::touch_links(std::span<const topo::LinkId> path) {
  for (const topo::LinkId l : path) {
    if (l < 0 || static_cast<std::size_t>(l) >= link_owner_.size()) continue;
    const std::int32_t o = link_owner_[static_cast<std::size_t>(l)];
    if (o >= 0) contact(o);
  }
}

void FlowNetwork::contact(std::int32_t o) {
  Owner& ow = owners_[static_cast<std::size_t>(o)];
  if (ow.replay) {
    end_replay(o, true);
    return;
  }
  // A recording that is no longer isolated: its flows carry on as ordinary flows.
  for (const FlowId f : ow.ids) {
    if (solver_.alive(f) && st_[static_cast<std::size_t>(f)].owner == o) {
      st_[static_cast<std::size_t>(f)].owner = -1;
    }
  }
  release_owner(o);
}

void FlowNetwork::record_rate(FlowId f, double rate) {
  FlowState& st = st_[static_cast<std::size_t>(f)];
  Owner& ow = owners_[static_cast<std::size_t>(st.owner)];
  ow.segs[static_cast<std::size_t>(st.owner_index)].emplace_back((sim_.now() - ow.start).ps, rate);
}

void FlowNetwork::record_end(FlowId f) {
  FlowState& st = st_[static_cast<std::size_t>(f)];
  const std::int32_t o = st.owner;
  st.owner = -1;
  if (o < 0) return;
  Owner& ow = owners_[static_cast<std::size_t>(o)];
  ow.ends[static_cast<std::size_t>(st.owner_index)] = (sim_.now() - ow.start).ps;
  if (++ow.ended < static_cast<std::int64_t>(ow.ends.size())) return;
  // The whole component ran alone: keep its trajectory (flows in component order).
  auto t = std::make_shared<Trajectory>();
  for (std::size_t k = 0; k < ow.ends.size(); ++k) {
    for (const auto& [at, rate] : ow.segs[k]) {
      t->seg_start.push_back(at);
      t->seg_rate.push_back(rate);
    }
    t->seg_offset.push_back(static_cast<std::uint32_t>(t->seg_start.size()));
    for (const Owner::Hold& h : ow.holds[k]) {
      t->hold_set.push_back(h.set);
      t->hold_until.push_back(h.until);
      t->hold_cap.push_back(h.cap);
    }
    t->hold_offset.push_back(static_cast<std::uint32_t>(t->hold_set.size()));
    t->end.push_back(ow.ends[k]);
    t->last_end = std::max(t->last_end, ow.ends[k]);
  }
  // Completions are reported at each part's last end (one part unless composite).
  if (ow.shape->part.empty()) {
    t->breaks.push_back(t->last_end);
  } else {
    for (std::size_t k = 0; k < ow.ends.size(); ++k) {
      const std::uint32_t p = ow.shape->part[k];
      if (t->breaks.size() <= p) t->breaks.resize(p + 1, 0);
      t->breaks[p] = std::max(t->breaks[p], ow.ends[k]);
    }
    std::sort(t->breaks.begin(), t->breaks.end());
    t->breaks.erase(std::unique(t->breaks.begin(), t->breaks.end()), t->breaks.end());
  }
  t->order.resize(ow.ends.size());
  for (std::size_t k = 0; k < t->order.size(); ++k) t->order[k] = static_cast<std::uint32_t>(k);
  std::stable_sort(t->order.begin(), t->order.end(),
                   [&](std::uint32_t a, std::uint32_t b) { return t->end[a] < t->end[b]; });
  if (ow.shape->part.empty() && !ow.shape->tags.empty()) {
    const Shape& sh = *ow.shape;
    const std::uint32_t b = sh.comp_offset[ow.comp];
    const auto n = static_cast<std::uint32_t>(t->order.size());
    const auto flow = [&](std::uint32_t pos) { return sh.comp_flows[b + t->order[pos]]; };
    t->run_end.resize(n);
    t->bytes_before.assign(n + 1, 0);
    for (std::uint32_t pos = 0; pos < n; ++pos) {
      t->bytes_before[pos + 1] = t->bytes_before[pos] + sh.bytes[flow(pos)];
    }
    for (std::uint32_t pos = n; pos-- > 0;) {
      t->run_end[pos] = pos + 1 < n && sh.tags[flow(pos + 1)] == sh.tags[flow(pos)]
                            ? t->run_end[pos + 1]
                            : pos + 1;
    }
  }
  ow.shape->trajectory[ow.comp] = std::move(t);
  release_owner(o);
}

std::uint64_t FlowNetwork::tag_of(const Owner& ow, std::uint32_t flow) const {
  return ow.tags ? (*ow.tags)[flow] : ow.shape->tags[flow] | ow.tag_base;
}

FlowId FlowNetwork::start_spec(const FlowSpec& spec) {
  if (tag_base_ == 0) return start_flow(spec);
  FlowSpec tagged = spec;
  tagged.tag |= tag_base_;
  return start_flow(tagged);
}

// Appends the completions of replay `ow` from position `from` of its trajectory's order up to
// `elapsed` ps after its start; returns the position of the first flow still running.
std::size_t FlowNetwork::replay_done(const Owner& ow, std::size_t from, std::int64_t elapsed,
                                     std::vector<FlowDone>* done) const {
  const Trajectory& t = *ow.trajectory;
  const Shape& sh = *ow.shape;
  const std::uint32_t b = sh.comp_offset[ow.comp];
  const std::size_t first = done->size();
  if (merge_replays_ && !ow.tags && !t.run_end.empty()) {
    // One completion per run of equal tags, as the loop below would merge them (a plain
    // shape: every flow started with the component).
    while (from < t.order.size() && t.end[t.order[from]] <= elapsed) {
      const std::uint32_t run = t.run_end[from];
      std::uint32_t to = run;
      if (t.end[t.order[run - 1]] > elapsed) {
        // Ends ascend along `order`: the first of the run still running.
        to = static_cast<std::uint32_t>(
            std::upper_bound(t.order.begin() + static_cast<std::ptrdiff_t>(from),
                             t.order.begin() + run, elapsed,
                             [&](std::int64_t at, std::uint32_t k) { return at < t.end[k]; }) -
            t.order.begin());
      }
      const std::uint32_t flow = sh.comp_flows[b + t.order[from]];
      FlowDone d{-1, sh.tags[flow] | ow.tag_base, ow.start, ow.start + TimePs{t.end[t.order[to - 1]]},
                 t.bytes_before[to] - t.bytes_before[from]};
      d.count = static_cast<std::int32_t>(to - from);
      done->push_back(d);
      from = to;
    }
    return from;
  }
  for (; from < t.order.size() && t.end[t.order[from]] <= elapsed; ++from) {
    const std::uint32_t k = t.order[from];
    const std::uint32_t flow = sh.comp_flows[b + k];
    const TimePs start = ow.start + TimePs{sh.start0.empty() ? 0 : sh.start0[flow]};
    const TimePs end = ow.start + TimePs{t.end[k]};
    const std::uint64_t tag = tag_of(ow, flow);
    if (merge_replays_ && done->size() > first && done->back().tag == tag) {
      // Completions come in end order: the merged one ends at this flow's end.
      FlowDone& m = done->back();
      m.start = std::min(m.start, start);
      m.end = end;
      m.bytes += sh.bytes[flow];
      ++m.count;
      continue;
    }
    done->push_back(FlowDone{-1, tag, start, end, sh.bytes[flow]});
  }
  return from;
}

void FlowNetwork::report_done(std::span<const FlowDone> done) {
  for (const FlowDone& d : done) {
    stats_.flows_done += d.count;
    stats_.bytes_done += d.bytes;
    flow_done_.emit(d);
  }
}

// A replayed component ends at `now`: at its last recorded completion (`early` false), or
// because something reached its links first. Its unfinished flows enter the solver with the rate
// and the bytes left that the recording gives for this moment; the finished ones report their
// completions at their recorded offsets.
void FlowNetwork::end_replay(std::int32_t o, bool early) {
  Owner& ow = owners_[static_cast<std::size_t>(o)];
  const std::uint64_t tag_base = ow.tag_base;
  const Shape& sh = *ow.shape;
  const std::uint32_t b = sh.comp_offset[ow.comp];
  const TimePs now = sim_.now();
  const TimePs start = ow.start;
  const std::int64_t elapsed = (now - start).ps;
  DoneScratch scratch(*this);
  std::vector<FlowDone>& done = scratch.done;
  const std::size_t running = replay_done(ow, ow.emitted, elapsed, &done);
  const std::shared_ptr<const Trajectory> t = std::move(ow.trajectory);
  const std::shared_ptr<std::vector<std::uint64_t>> tags = std::move(ow.tags);
  if (early) {
    cancel_replay_end(o);
    ++stats_.replays_materialized;
  }
  release_owner(o);
  if (!early && running == t->order.size()) {
    // The normal end: every flow done, nothing comes back (replay_ids_ is read only after an
    // early end).
    report_done(done);
    return;
  }
  std::vector<FlowId> ids(sh.comp_offset[ow.comp + 1] - b, -1);
  for (std::size_t i = running; i < t->order.size(); ++i) {
    const std::uint32_t k = t->order[i];
    const std::uint32_t flow = sh.comp_flows[b + k];
    const TimePs flow_start = start + TimePs{sh.start0.empty() ? 0 : sh.start0[flow]};
    double rate = 0;
    const double left = replay_left(
        std::span(t->seg_start).subspan(t->seg_offset[k], t->seg_offset[k + 1] - t->seg_offset[k]),
        std::span(t->seg_rate).subspan(t->seg_offset[k], t->seg_offset[k + 1] - t->seg_offset[k]),
        sh.left0.empty() ? static_cast<double>(sh.bytes[flow]) : sh.left0[flow], elapsed, &rate);
    const FlowSpec spec{std::span<const topo::LinkId>(sh.links.data() + sh.offset[flow],
                                                      sh.offset[flow + 1] - sh.offset[flow]),
                        sh.bytes[flow], sh.caps[flow],
                        tags ? (*tags)[flow] : sh.tags[flow] | tag_base};
    const FlowId f = solver_.add_solved_flow(spec.path, spec.cap_Bps, rate);
    ids[k] = f;
    init_flow(f, spec, 0);
    --stats_.flows_started;  // counted when the replay started
    stats_.bytes_started -= spec.bytes;
    FlowState& st = st_[static_cast<std::size_t>(f)];
    st.start = flow_start;
    st.remaining = left;
    // A congestion-control hold in progress comes back with its rate and its end; one ending
    // now has ended (a moment's events count as done, as for the rate segments above), and the
    // flow is exempt from a new hold in the batch that released it.
    for (std::uint32_t h = t->hold_offset[k]; h < t->hold_offset[k + 1]; ++h) {
      if (t->hold_set[h] > elapsed) break;
      if (t->hold_until[h] > elapsed) {
        st.hold_cap = t->hold_cap[h];
        set_timer(f, Timer::kHold, start + TimePs{t->hold_until[h]});
        refresh_cap(f);
      } else if (t->hold_until[h] == elapsed) {
        st.exempt_batch = in_batch_ ? batch_ : batch_ + 1;
      }
    }
    apply_rate(f, rate);
    if (cc_.derates()) materialized_.push_back(f);
  }
  // The links' congestion-control derating counts the flows now back on them.
  for (const FlowId f : materialized_) {
    for (const topo::LinkId l : solver_.path(f)) refresh_link_efficiency(l);
  }
  materialized_.clear();
  report_done(done);
  replay_ids_ = std::move(ids);  // after the observers, which may end other replays
}

// A replay reaches one of its breaks before the last: the completions up to now are reported
// and it goes on to the next break.
void FlowNetwork::replay_break(std::int32_t o) {
  Owner& ow = owners_[static_cast<std::size_t>(o)];
  const Trajectory& t = *ow.trajectory;
  if (ow.next_break + 1 >= t.breaks.size()) {
    end_replay(o, false);
    return;
  }
  DoneScratch scratch(*this);
  std::vector<FlowDone>& done = scratch.done;
  ow.emitted = replay_done(ow, ow.emitted, (sim_.now() - ow.start).ps, &done);
  ++ow.next_break;
  ow.end_event = sim_.schedule(ow.start + TimePs{t.breaks[ow.next_break]}, *this,
                               kReplayTag | static_cast<std::uint64_t>(o));
  report_done(done);
}

void FlowNetwork::remove(FlowId f) {
  if (cc_.derates()) {
    const std::span<const topo::LinkId> path = solver_.path(f);
    path_scratch_.assign(path.begin(), path.end());
  }
  solver_.remove_flow(f);
  completion_.erase(f);
  timers_.erase(f);
  const auto i = static_cast<std::size_t>(f);
  st_[i].timer_kind = Timer::kNone;
  st_[i].applied_rate = 0;
  if (cc_.derates()) {
    for (const topo::LinkId l : path_scratch_) refresh_link_efficiency(l);
  }
  request_flush();
}

void FlowNetwork::abort_flow(FlowId id) {
  if (!solver_.alive(id)) return;
  remove(id);
}

void FlowNetwork::set_link_capacity(topo::LinkId l, double capacity_Bps) {
  if (l < 0 || static_cast<std::size_t>(l) >= base_capacity_.size()) {
    throw_input("link " + std::to_string(l) + " is not a link of the network");
  }
  if (!(capacity_Bps >= 0) || !std::isfinite(capacity_Bps)) {
    throw_input("link " + std::to_string(l) + ": capacity must be finite and >= 0");
  }
  base_capacity_[static_cast<std::size_t>(l)] = capacity_Bps;
  // Recorded trajectories assumed the old capacity; a group on this link is no longer alone
  // with what it recorded.
  touch_links(std::span<const topo::LinkId>(&l, 1));
  for (auto& [key, sh] : shapes_) std::fill(sh->trajectory.begin(), sh->trajectory.end(), nullptr);
  for (auto& [key, sh] : composites_) sh->trajectory[0] = nullptr;
  if (cc_.derates() && sender_link_[static_cast<std::size_t>(l)] == 0) {
    refresh_link_efficiency(l);
  } else {
    solver_.set_link_capacity(l, capacity_Bps);
  }
  request_flush();
}

void FlowNetwork::set_link_up(topo::LinkId l, bool up) {
  if (l < 0 || static_cast<std::size_t>(l) >= down_.size()) {
    throw_input("link " + std::to_string(l) + " is not a link of the network");
  }
  const auto li = static_cast<std::size_t>(l);
  if ((down_[li] == 0) == up) return;
  down_[li] = up ? 0 : 1;
  touch_links(std::span<const topo::LinkId>(&l, 1));
  const TimePs now = sim_.now();
  const TimePs rto = cc_.retransmit_timeout();
  for (const FlowId f : solver_.flows_on(l)) {
    const auto i = static_cast<std::size_t>(f);
    if (!up) {
      if (++st_[i].down_links > 1) continue;
      if (st_[i].stalled == 0) {
        // A new stall episode: the in-flight data is lost and the retransmit timer starts.
        st_[i].stalled = 1;
        st_[i].stall_start = now;
        st_[i].hold_cap = kUnlimited;
        refresh_cap(f);
      }
      // Down again before the resuming retransmission: the same episode, same retry budget.
      set_timer(f, Timer::kDeadline, st_[i].stall_start + cc_.retry_budget());
    } else {
      if (--st_[i].down_links > 0) continue;
      // Retransmissions happen every RTO after the stall began; the first one after the link
      // is back gets through.
      const std::int64_t elapsed = (now - st_[i].stall_start).ps;
      const std::int64_t attempts = std::max<std::int64_t>(1, ceil_div(elapsed, rto.ps));
      set_timer(f, Timer::kResume, st_[i].stall_start + rto * attempts);
    }
  }
  request_flush();
}

void FlowNetwork::schedule_link_flap(topo::LinkId l, TimePs down_at, TimePs duration) {
  sim_.schedule_call(down_at, [this, l] { set_link_up(l, false); });
  sim_.schedule_call(down_at + duration, [this, l] { set_link_up(l, true); });
}

double FlowNetwork::remaining_bytes(FlowId id) const {
  const auto i = static_cast<std::size_t>(id);
  const double elapsed_s = (sim_.now() - st_[i].last_update).seconds();
  return std::max(0.0, st_[i].remaining - st_[i].applied_rate * elapsed_s);
}

void FlowNetwork::advance(FlowId f, TimePs now) {
  const auto i = static_cast<std::size_t>(f);
  if (st_[i].applied_rate > 0) st_[i].remaining -= st_[i].applied_rate * (now - st_[i].last_update).seconds();
  st_[i].last_update = now;
}

void FlowNetwork::set_timer(FlowId f, Timer kind, TimePs at) {
  st_[static_cast<std::size_t>(f)].timer_kind = kind;
  timers_.set(f, at);
}

void FlowNetwork::clear_timer(FlowId f) {
  st_[static_cast<std::size_t>(f)].timer_kind = Timer::kNone;
  timers_.erase(f);
}

void FlowNetwork::schedule_replay_end(std::int32_t o, TimePs at) {
  Owner& ow = owners_[static_cast<std::size_t>(o)];
  if (open_batch_ >= 0) {
    ReplayBatch& b = batches_[static_cast<std::size_t>(open_batch_)];
    if (b.at == at && b.scheduled_after == sim_.scheduled_events() && b.live > 0) {
      b.members.emplace_back(o, ow.gen);
      ++b.live;
      ow.batch = open_batch_;
      return;
    }
  }
  const std::int32_t i = take_slot(batches_, free_batches_);
  ReplayBatch& b = batches_[static_cast<std::size_t>(i)];
  b.at = at;
  b.members.assign(1, {o, ow.gen});
  b.live = 1;
  b.event = sim_.schedule(at, *this, kReplayBatchTag | static_cast<std::uint64_t>(i));
  b.scheduled_after = sim_.scheduled_events();
  ow.batch = i;
  open_batch_ = i;
}

// A replay's end no longer comes (it ended early): its batch's event is cancelled with its last
// member, as its own event would have been.
void FlowNetwork::cancel_replay_end(std::int32_t o) {
  Owner& ow = owners_[static_cast<std::size_t>(o)];
  if (ow.batch < 0) {
    sim_.cancel(ow.end_event);
    return;
  }
  const std::int32_t i = ow.batch;
  ow.batch = -1;
  ReplayBatch& b = batches_[static_cast<std::size_t>(i)];
  if (--b.live == 0) {
    sim_.cancel(b.event);
    b.members.clear();
    if (open_batch_ == i) open_batch_ = -1;
    free_batches_.push_back(i);
  }
}

void FlowNetwork::fire_replay_batch(std::int32_t i) {
  if (open_batch_ == i) open_batch_ = -1;
  batches_[static_cast<std::size_t>(i)].live = 0;  // a member ended meanwhile frees nothing
  // Members are taken one by one (an observer of one may end a later one early); the batch is
  // freed only after the last, so that no new batch takes its index meanwhile.
  for (std::size_t k = 0; k < batches_[static_cast<std::size_t>(i)].members.size(); ++k) {
    const auto [o, gen] = batches_[static_cast<std::size_t>(i)].members[k];
    Owner& ow = owners_[static_cast<std::size_t>(o)];
    if (!ow.live || ow.gen != gen || ow.batch != i) continue;
    ow.batch = -1;
    replay_break(o);
  }
  ReplayBatch& b = batches_[static_cast<std::size_t>(i)];
  b.members.clear();
  b.live = 0;
  free_batches_.push_back(i);
}

void FlowNetwork::on_event(std::uint64_t tag) {
  if ((tag & kReplayBatchTag) != 0) {
    fire_replay_batch(static_cast<std::int32_t>(tag & ~kReplayBatchTag));
    return;
  }
  if ((tag & kReplayTag) != 0) {
    replay_break(static_cast<std::int32_t>(tag & ~kReplayTag));
    return;
  }
  request_flush();
}

void FlowNetwork::handle_timer(FlowId f) {
  const auto i = static_cast<std::size_t>(f);
  const Timer kind = st_[i].timer_kind;
  st_[i].timer_kind = Timer::kNone;
  switch (kind) {
    case Timer::kNone:
      break;
    case Timer::kHold:
      st_[i].hold_cap = kUnlimited;
      st_[i].exempt_batch = batch_;
      refresh_cap(f);
      break;
    case Timer::kResume:
      st_[i].stalled = 0;
      st_[i].exempt_batch = batch_;
      refresh_cap(f);
      break;
    case Timer::kDeadline:
      fail(f);
      break;
  }
}

void FlowNetwork::complete(FlowId f) {
  const auto i = static_cast<std::size_t>(f);
  const TimePs now = sim_.now();
  advance(f, now);
  const double residual = std::abs(st_[i].remaining);
  stats_.max_residual_bytes = std::max(stats_.max_residual_bytes, residual);
  if (check_invariants_ && !(residual < 1.0)) {
    throw std::logic_error("flow " + std::to_string(f) + " completed with " +
                           std::to_string(st_[i].remaining) + " bytes unaccounted");
  }
  const FlowDone done{f, st_[i].tag, st_[i].start, now, st_[i].bytes};
  record_end(f);
  remove(f);
  ++stats_.flows_done;
  stats_.bytes_done += done.bytes;
  flow_done_.emit(done);
}

void FlowNetwork::fail(FlowId f) {
  const auto i = static_cast<std::size_t>(f);
  const TimePs now = sim_.now();
  advance(f, now);
  const FlowFailed failed{
      f, st_[i].tag, st_[i].start, st_[i].stall_start, now, std::llround(std::max(0.0, st_[i].remaining))};
  remove(f);
  ++stats_.flows_failed;
  flow_failed_.emit(failed);
}

void FlowNetwork::on_batch_end() {
  ++batch_;
  in_batch_ = true;
  const TimePs now = sim_.now();
  // Timers first (a resume or a hold release changes a bound), then completions. Callbacks may
  // start flows that are due at once (zero bytes), hence the loop.
  while (true) {
    if (!timers_.empty() && timers_.top_key() <= now) {
      handle_timer(timers_.pop());
    } else if (!completion_.empty() && completion_.top_key() <= now) {
      complete(completion_.pop());
    } else {
      break;
    }
  }
  solve_and_apply();
  in_batch_ = false;
  reschedule_wakeup();
}

void FlowNetwork::note_solve() {
  ++stats_.solves;
  stats_.solves_partial = solver_.verified_solves();
  stats_.solves_partial_given_up = solver_.verified_fallbacks();
  stats_.flows_resolved += static_cast<std::int64_t>(solver_.last_flows().size());
  stats_.links_resolved += static_cast<std::int64_t>(solver_.last_links().size());
  if (check_invariants_) {
    const std::string violation = solver_.check_last_solve();
    if (!violation.empty()) throw std::logic_error("max-min invariant violated: " + violation);
  }
}

void FlowNetwork::solve_and_apply() {
  touched_.clear();
  if (!solver_.dirty()) return;
  std::span<const FlowId> changed = solver_.solve();
  note_solve();
  for (int round = 0;; ++round) {
    bool new_hold = false;
    for (const FlowId f : changed) {
      const auto i = static_cast<std::size_t>(f);
      if (st_[i].touched_batch != batch_) {
        st_[i].touched_batch = batch_;
        touched_.push_back(f);
      }
      // Congestion-control lag: a running flow whose share rose keeps its old rate for τ_up.
      const double old_rate = st_[i].applied_rate;
      const double target = solver_.rate(f);
      if (!cc_.active() || old_rate <= 0 || st_[i].exempt_batch == batch_ || st_[i].stalled != 0 ||
          st_[i].hold_cap < kUnlimited || !(target > old_rate * (1 + kRiseTolerance))) {
        continue;
      }
      const TimePs lag = cc_.increase_lag(old_rate, target);
      if (lag.ps <= 0) continue;
      st_[i].hold_cap = old_rate;
      set_timer(f, Timer::kHold, sim_.now() + lag);
      refresh_cap(f);
      new_hold = true;
      if (st_[i].owner >= 0) {
        Owner& ow = owners_[static_cast<std::size_t>(st_[i].owner)];
        const std::int64_t at = (sim_.now() - ow.start).ps;
        ow.holds[static_cast<std::size_t>(st_[i].owner_index)].push_back(
            {at, at + lag.ps, old_rate});
      }
    }
    if (!new_hold || round + 1 >= kMaxHoldRounds) break;
    changed = solver_.solve();
    note_solve();
  }
  for (const FlowId f : touched_) {
    if (!solver_.alive(f)) continue;
    const double rate = solver_.rate(f);
    if (rate != st_[static_cast<std::size_t>(f)].applied_rate) apply_rate(f, rate);
  }
}

void FlowNetwork::apply_rate(FlowId f, double rate) {
  const auto i = static_cast<std::size_t>(f);
  const TimePs now = sim_.now();
  advance(f, now);
  st_[i].applied_rate = rate;
  ++stats_.rate_changes;
  if (st_[i].owner >= 0) record_rate(f, rate);
  if (rate > 0) {
    // Round the completion up to the picosecond, ignoring relative rounding noise (1e-12) of
    // the byte count, so that at completion the flow has delivered its size to far less than
    // a byte.
    const double exact_ps = std::max(0.0, st_[i].remaining) * 1e12 / rate;
    const double ps = std::ceil(exact_ps * (1 - 1e-12) - 1e-6);
    const double horizon = static_cast<double>(TimePs::never().ps - now.ps);
    if (ps < horizon) {
      completion_.set(f, now + TimePs{static_cast<std::int64_t>(std::max(0.0, ps))});
    } else {
      completion_.erase(f);
    }
  } else {
    completion_.erase(f);
  }
  if (!rate_changed_.empty()) rate_changed_.emit(FlowRateChanged{f, st_[i].tag, now, rate});
}

void FlowNetwork::reschedule_wakeup() {
  TimePs next = TimePs::never();
  if (!completion_.empty()) next = completion_.top_key();
  if (!timers_.empty()) next = std::min(next, timers_.top_key());
  if (next == TimePs::never()) {
    sim_.cancel(wakeup_);
    return;
  }
  if (sim_.pending(wakeup_)) {
    sim_.reschedule(wakeup_, next);
  } else {
    wakeup_ = sim_.schedule(next, *this);
  }
}

std::size_t FlowNetwork::memory_bytes() const {
  const auto bytes_of = [](const auto& v) { return v.capacity() * sizeof(v[0]); };
  std::size_t bytes = solver_.memory_bytes() + completion_.memory_bytes() +
                      timers_.memory_bytes() + bytes_of(base_capacity_) + bytes_of(down_) +
                      bytes_of(sender_link_) + bytes_of(st_) + bytes_of(touched_) +
                      bytes_of(path_scratch_) + bytes_of(group_ids_) + bytes_of(owners_) +
                      bytes_of(free_owners_) + bytes_of(link_owner_);
  // Groups: their shapes and recorded trajectories (trajectories shared with replays once).
  std::vector<const Shape*> all;
  for (const auto& [key, sh] : shapes_) all.push_back(sh.get());
  for (const auto& [key, sh] : composites_) {
    all.push_back(sh.get());
    bytes += key.capacity() * sizeof(std::int64_t) + bytes_of(sh->left0) + bytes_of(sh->start0) +
             bytes_of(sh->part);
  }
  for (const Shape* sh : all) {
    bytes += sizeof(Shape) + bytes_of(sh->links) + bytes_of(sh->offset) + bytes_of(sh->bytes) +
             bytes_of(sh->caps) + bytes_of(sh->comp_flows) + bytes_of(sh->comp_offset) +
             bytes_of(sh->comp_links) + bytes_of(sh->comp_link_offset) +
             bytes_of(sh->trajectory) + bytes_of(sh->recording);
    for (const auto& t : sh->trajectory) {
      if (!t) continue;
      bytes += sizeof(Trajectory) + bytes_of(t->seg_offset) + bytes_of(t->seg_start) +
               bytes_of(t->seg_rate) + bytes_of(t->end) + bytes_of(t->order) +
               bytes_of(t->breaks) + bytes_of(t->hold_offset) + bytes_of(t->hold_set) +
               bytes_of(t->hold_until) + bytes_of(t->hold_cap);
    }
  }
  for (const Owner& ow : owners_) {
    bytes += bytes_of(ow.ids) + bytes_of(ow.segs) + bytes_of(ow.ends);
    for (const auto& seg : ow.segs) bytes += bytes_of(seg);
  }
  return bytes;
}

}  // namespace trainsim::net
