// The flow-level communication backend: collectives and transfers that leave a server become
// fluid flows on the cluster graph (each queue pair of each channel on its own ECMP-hashed path,
// coll::route_collective_flows), max-min rates under the scenario's congestion control, every
// job's flows sharing one FlowNetwork; groups inside one server use NVLink through the closed form
// (NVLink ports are not shared between groups). A communication completes its protocol latency
// after its last flow.
//
// The same communication of the same endpoint (a DP bucket of one size, a TP all-gather, the
// activations a stage sends on) starts the same flows every time: they are planned and routed
// once per job, endpoint and (dimension, kind, bytes) or direction, and started as a group under
// one key (FlowNetwork::start_group), which lets the network replay components that run alone.
// Their link bytes are added once, at the end, times the number of starts.
//
// At packet fidelity (NetworkBackend::kPacket) the same routed flows, full paths with every
// link's latency, run through a net::PacketNetwork instead (ports, ECN, PFC, DCQCN), one flow at
// a time (no groups to replay).
//
// Statistics: every link's bytes over the iteration (Result::iteration_time_s: the executed
// timeline plus slowest-GPU pacing and global sync; utilisation, ECMP imbalance, per link class),
// NVLink's closed-form bytes per GPU over the same, flows started, solver counters.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <unordered_map>
#include <vector>

#include "sim/collective/flow.h"
#include "sim/exec/closed_form_backend.h"
#include "sim/network/flow_network.h"
#include "sim/network/packet_network.h"
#include "topology/graph.h"

namespace trainsim::exec {

/// The packet level's priority class of a job's collective or transfer of dimension `dim`
/// (network.packet.priority_by): 0; the job's index; or TP, CP, EP, PP, DP → 0, 1, 2, 3, 4. Classes
/// beyond the last (priority_classes − 1) share it.
int priority_class(const net::PacketConfig& packet, int job, plan::Dim dim);

class FlowBackend final : public CommBackend {
 public:
  /// Builds the cluster's graph, router and flow network on `sim`. Throws trainsim::Error(kInput)
  /// for packet spraying (a flow needs one path) and for an all-reduce algorithm other than ring.
  FlowBackend(Simulation& sim, const RunConfig& cfg, const ExecOptions& options,
              const Result& analytic);

  int add_job(const CommEndpoints& endpoints) override;
  void start_collective(const CommRequest& req) override;
  void start_transfer(const CommRequest& req) override;
  const char* fidelity() const override { return packets_ != nullptr ? "packet" : "flow"; }
  void report(double executed_s, Result& r) const override;

 private:
  // Routed flows of one cached communication, and how often they started.
  struct Cached {
    bool ready = false;
    bool inside = false;  // inside one server: priced in closed form instead
    coll::RoutedFlows flows;
    long starts = 0;
    // The copy (rank pair of a transfer, rank group of a collective) each flow belongs to.
    std::vector<std::uint32_t> copy_of;
    std::uint32_t copies = 1;
    // The flows as the network takes them, built at the first start (spans into `flows`),
    // each tagged with its copy << 32; a start adds its in-flight slot as the tag base.
    std::vector<net::FlowSpec> specs;
  };
  // Collectives by (endpoint, dimension, kind, bytes).
  struct CollKey {
    int endpoint, dim, kind;
    std::int64_t bytes;  // the task's bytes, bit for bit
    int pieces;          // slices of one collective (CommRequest::pieces)
    bool operator==(const CollKey&) const = default;
  };
  struct CollKeyHash {
    std::size_t operator()(const CollKey& k) const {
      std::uint64_t h = static_cast<std::uint64_t>(k.bytes) * 0x9E3779B97F4A7C15ull;
      h ^= (static_cast<std::uint64_t>(k.endpoint) << 16) ^
           (static_cast<std::uint64_t>(k.dim) << 8) ^ static_cast<std::uint64_t>(k.kind) ^
           (static_cast<std::uint64_t>(k.pieces) << 40);
      return static_cast<std::size_t>(h ^ (h >> 29));
    }
  };
  struct Job {
    const CommEndpoints* endpoints = nullptr;
    // Whether every group endpoint e stands for in dimension d stays inside one server
    // ((e·8 + d) → 0/1, −1 unknown).
    std::vector<std::int8_t> inside;
    std::vector<Cached> transfers;  // by (sending endpoint · 2 + direction)
    std::unordered_map<CollKey, std::size_t, CollKeyHash> coll_index;
    std::deque<Cached> collectives;
  };
  // A communication in flight: its flows still running, then its latency.
  struct InFlight {
    EventTarget* target = nullptr;
    std::uint64_t tag = 0;
    int flows_left = 0;
    TimePs latency;
    double* copy_spread_s = nullptr;
    std::vector<TimePs> copy_end;  // per copy, its last flow's end (several copies only)
  };

  bool inside_server(int a, int b) const;
  bool group_inside_server(Job& job, int e, plan::Dim d) const;
  void start(const CommRequest& req, Cached& flows, std::uint64_t group_key);
  void count_link_bytes(const Cached& c, std::vector<double>& link_bytes) const;
  void flow_done(const net::FlowDone& d);

  Simulation& sim_;
  const RunConfig& cfg_;
  ClosedFormBackend closed_form_;
  coll::LinkModel links_;
  std::optional<topo::ClusterGraph> graph_;
  std::optional<topo::FailureSet> failures_;  // cluster.fabric.failed_* (before the router)
  std::optional<topo::Router> router_;
  net::FlowNetwork* network_ = nullptr;
  net::PacketConfig packet_config_;  // its classes (network.packet.priority_*)
  net::PacketNetwork* packets_ = nullptr;  // packet fidelity instead of network_
  // Links whose max-min constraint another link on every path through them implies
  // (coll::implied_links): left out of the paths the flow network solves, kept in the statistics.
  std::vector<std::uint8_t> implied_;
  bool ring_lockstep_ = false;  // network.ring_lockstep (flow level only)
  std::deque<Job> jobs_;  // a deque: jobs never move once added (their cached specs point into them)
  std::vector<InFlight> in_flight_;
  std::vector<std::uint32_t> free_in_flight_;
  long flows_started_ = 0;
};

}  // namespace trainsim::exec
