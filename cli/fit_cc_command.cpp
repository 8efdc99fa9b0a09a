#include "cli/fit_cc_command.h"

#include <fmt/format.h>

#include <cmath>
#include <iostream>
#include <nlohmann/json.hpp>

#include "scenarios/scenario.h"
#include "scenarios/sizes.h"
#include "sim/core/error.h"
#include "sim/network/congestion_fit.h"

namespace trainsim::cli {

void add_fit_cc_command(CLI::App* calibrate, FitCcArgs& a) {
  a.cmd = calibrate->add_subcommand(
      "fit-cc",
      "Fit the flow level's contention efficiency of a congestion-control algorithm to "
      "packet-level n -> 1 incasts on the scenario's NICs and network.packet.* parameters");
  a.cmd->add_option("--scenario", a.scenario, "Scenario whose NICs and network keys to use");
  a.cmd->add_option("--set", a.sets, "Override a scenario key (network.*, cluster.*)")
      ->type_name("KEY=VALUE");
  a.cmd->add_option("--cc", a.cc, "dcqcn | swift | megascale (default: the scenario's)")
      ->check(CLI::IsMember({"ideal", "dcqcn", "swift", "megascale"}));
  a.cmd->add_option("--senders", a.senders, "Incast sizes n (senders into one link), >= 2")
      ->check(CLI::Range(2, 1024))
      ->delimiter(',');
  a.cmd->add_option("--sizes", a.sizes, "Bytes per sender (4M, 16M, ...)")->delimiter(',');
  a.cmd->add_option("--latency-us", a.latency_us, "Latency of every link, µs")
      ->check(CLI::Range(0.0, 1e6));
  a.cmd->add_option("--format", a.format, "text | json")->check(CLI::IsMember({"text", "json"}));
}

int run_fit_cc_command(const FitCcArgs& a) {
  std::vector<std::string> sets = a.sets;
  if (!a.cc.empty()) sets.push_back("network.congestion_control=" + a.cc);
  const scen::Scenario s = a.scenario.empty() ? scen::load_scenario_string("", "<default>", sets)
                                              : scen::load_scenario_file(a.scenario, sets);
  const net::CongestionControl cc = s.network.congestion_control;
  if (cc == net::CongestionControl::kIdeal) {
    throw_input("`ideal` has no efficiency to fit; name an algorithm", {"", 0, "--cc"},
                "--cc dcqcn, swift or megascale");
  }
  net::IncastGrid grid;
  grid.senders = a.senders;
  grid.bytes.clear();
  for (const std::string& size : a.sizes) {
    const std::int64_t b = scen::parse_size(size, {"", 0, "--sizes"});
    if (b <= 0) throw_input("`" + size + "` is not a positive size", {"", 0, "--sizes"});
    grid.bytes.push_back(b);
  }
  {
    // Every packet of every incast is simulated, each incast twice (under the algorithm and at
    // line rate): bound the work, as `run --fidelity packet` is bounded.
    double packets = 0;
    for (const int n : grid.senders) {
      for (const std::int64_t b : grid.bytes) {
        packets += 2.0 * n * std::ceil(static_cast<double>(b) / s.packet.mtu_bytes);
      }
    }
    constexpr double kMaxFitPackets = 1e8;
    if (packets > kMaxFitPackets) {
      throw_input(fmt::format("the incasts move {:.3g} packets; at most {:.0e} (each is simulated)",
                              packets, kMaxFitPackets),
                  {"", 0, "--sizes"}, "smaller sizes or fewer senders");
    }
  }
  grid.link_Bps = s.cluster.nic_Gbps * 1e9 / 8;
  grid.latency = TimePs::from_seconds(a.latency_us * 1e-6);
  net::PacketNetworkOptions options;
  options.config = s.network;
  options.packet = s.packet;
  const net::EfficiencyFit fit = net::fit_link_efficiency(options, grid, s.seed);
  const std::string name = net::to_string(cc);
  const std::string e_key = "network." + name + ".contended_efficiency";
  const std::string p_key = "network." + name + ".incast_penalty";

  if (a.format == "json") {
    nlohmann::ordered_json j;
    j["congestion_control"] = name;
    j["link_Bps"] = grid.link_Bps;
    j["latency_us"] = a.latency_us;
    j["points"] = nlohmann::ordered_json::array();
    for (const net::IncastPoint& p : fit.points) {
      j["points"].push_back({{"senders", p.senders}, {"bytes", p.bytes}, {"line_s", p.line_s},
                             {"cc_s", p.cc_s}, {"efficiency", p.efficiency}});
    }
    j[e_key] = fit.contended_efficiency;
    j[p_key] = fit.incast_penalty;
    j["max_relative_error"] = fit.max_relative_error;
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::cout << fmt::format(
      "{} at the packet level: n -> 1 incasts over {:.1f} GB/s links ({} µs each), line rate "
      "against {}\n\n",
      name, grid.link_Bps / 1e9, a.latency_us, name);
  std::cout << fmt::format("{:>8}  {:>14}  {:>14}  {:>14}  {:>8}\n", "senders", "bytes/sender",
                           "line rate µs", name + " µs", "η");
  for (const net::IncastPoint& p : fit.points) {
    std::cout << fmt::format("{:>8}  {:>14}  {:>14.3f}  {:>14.3f}  {:>8.4f}\n", p.senders, p.bytes,
                             p.line_s * 1e6, p.cc_s * 1e6, p.efficiency);
  }
  std::cout << fmt::format("\nfitted: --set {}={:.4f} --set {}={:.4f}\n", e_key,
                           fit.contended_efficiency, p_key, fit.incast_penalty);
  std::cout << fmt::format(
      "the flow level with them is within {:.2f} % of every run{}\n",
      100 * fit.max_relative_error,
      fit.max_relative_error > 0.05
          ? " (above 5 %: these runs do not follow η(n) = e / (1 + p·log2(n/2)))"
          : "");
  return 0;
}

}  // namespace trainsim::cli
