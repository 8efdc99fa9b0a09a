#include "scenarios/validation_runs.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "scenarios/presets.h"
#include "scenarios/run_config.h"
#include "scenarios/scenario.h"
#include "scenarios/schema.h"
#include "sim/core/error.h"
#include "sim/core/units.h"

namespace trainsim::scen {
namespace {

const std::vector<std::string> kColumns = {
    "id",     "source", "gpu",       "precision", "cluster", "gpus",     "layers",    "hidden",
    "heads",  "kv_heads", "ffn",     "seq",       "vocab",   "tp",       "pp",        "dp",
    "vpp",    "cp",     "ep",        "mbs",       "gbs",     "zero",     "recompute", "system",
    "iter_s", "tokens_s", "mfu",     "tflops_gpu", "notes"};

// RFC 4180 fields: commas inside double quotes, "" for a literal quote.
std::vector<std::string> split_csv_line(const std::string& line) {
  std::vector<std::string> out;
  std::string cur;
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char ch = line[i];
    if (quoted) {
      if (ch == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        cur += '"';
        ++i;
      } else if (ch == '"') {
        quoted = false;
      } else {
        cur += ch;
      }
    } else if (ch == '"') {
      quoted = true;
    } else if (ch == ',') {
      out.push_back(cur);
      cur.clear();
    } else if (ch != '\r') {
      cur += ch;
    }
  }
  out.push_back(cur);
  return out;
}

std::string trim(std::string s) {
  const auto b = s.find_first_not_of(" \t");
  const auto e = s.find_last_not_of(" \t");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

std::optional<double> number(const std::string& text, const std::string& file, int line,
                             const std::string& column) {
  if (text.empty()) return std::nullopt;
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || !std::isfinite(v)) {
    throw_input("`" + text + "` is not a number", {file, line, column});
  }
  return v;
}

}  // namespace

const std::vector<std::string>& validation_columns() { return kColumns; }

std::vector<ValidationRow> validate_runs(const std::string& csv_path, const std::string& fidelity) {
  std::ifstream in(csv_path);
  if (!in) throw_input("cannot open the runs file", {csv_path, 0, ""});
  std::stringstream ss;
  ss << in.rdbuf();
  return validate_runs_text(ss.str(), csv_path, fidelity);
}

std::vector<ValidationRow> validate_runs_text(const std::string& text, const std::string& file,
                                              const std::string& fidelity) {
  std::istringstream in(text);
  std::string line;
  int line_no = 0;
  std::vector<std::string> header;
  while (header.empty() && std::getline(in, line)) {
    ++line_no;
    if (trim(line).empty()) continue;
    header = split_csv_line(line);
    for (auto& h : header) h = trim(h);
  }
  if (header.empty()) throw_input("empty file: expected a header row", {file, 0, ""});
  std::map<std::string, size_t> col;
  for (size_t i = 0; i < header.size(); ++i) {
    if (std::find(kColumns.begin(), kColumns.end(), header[i]) == kColumns.end()) {
      const std::string hint = did_you_mean(header[i], kColumns);
      throw_input("unknown column `" + header[i] + "`", {file, line_no, header[i]}, hint);
    }
    col[header[i]] = i;
  }
  for (const auto& c : kColumns) {
    if (!col.count(c)) throw_input("missing column `" + c + "`", {file, line_no, c});
  }

  std::vector<ValidationRow> rows;
  while (std::getline(in, line)) {
    ++line_no;
    if (trim(line).empty() || trim(line)[0] == '#') continue;
    std::vector<std::string> cells = split_csv_line(line);
    if (cells.size() != header.size()) {
      throw_input("row has " + std::to_string(cells.size()) + " cells, the header has " +
                      std::to_string(header.size()),
                  {file, line_no, ""});
    }
    auto cell = [&](const std::string& c) { return trim(cells[col.at(c)]); };
    ValidationRow row;
    row.id = cell("id");
    row.source = cell("source");
    row.line = line_no;
    if (row.id.empty()) throw_input("empty id", {file, line_no, "id"});

    // Published figures (numbers checked even when the row cannot be simulated).
    const auto pub_iter = number(cell("iter_s"), file, line_no, "iter_s");
    const auto pub_tokens = number(cell("tokens_s"), file, line_no, "tokens_s");
    const auto pub_mfu = number(cell("mfu"), file, line_no, "mfu");
    const auto pub_tflops = number(cell("tflops_gpu"), file, line_no, "tflops_gpu");
    for (const char* c : {"gpus", "layers", "hidden", "heads", "kv_heads", "ffn", "seq", "vocab",
                          "tp", "pp", "dp", "vpp", "cp", "ep", "mbs", "gbs", "zero"}) {
      number(cell(c), file, line_no, c);
    }

    // Columns no rule can fill: the row is reported, not guessed.
    std::string missing;
    for (const char* c : {"gpu", "gpus", "layers", "hidden", "heads", "ffn", "seq", "vocab", "tp",
                          "pp", "gbs"}) {
      if (cell(c).empty()) missing += (missing.empty() ? "" : ", ") + std::string(c);
    }
    if (!missing.empty()) {
      row.error_message = file + ":" + std::to_string(line_no) + ": blank " + missing +
                          ": these columns have no stated default";
      row.published = {pub_iter, pub_tokens, pub_mfu, pub_tflops, std::nullopt};
      rows.push_back(std::move(row));
      continue;
    }

    // Scenario keys from the columns; blanks filled by the rules below and recorded.
    std::map<std::string, std::string> v;
    const std::string gpu = cell("gpu");
    std::string system = cell("system");
    if (system.empty()) {
      system = "megatron";
      row.assumed["system"] = "megatron (blank: the plain Megatron-LM baseline)";
    }
    v["cluster.preset"] = cell("cluster");
    if (v["cluster.preset"].empty()) {
      v["cluster.preset"] = default_cluster_for_gpu(gpu);
      row.assumed["cluster"] = v["cluster.preset"] + " (blank: the GPU's default cluster)";
    }
    v["cluster.gpu"] = gpu;
    v["cluster.gpus"] = cell("gpus");
    v["model.layers"] = cell("layers");
    v["model.hidden"] = cell("hidden");
    v["model.heads"] = cell("heads");
    v["model.kv_heads"] = cell("kv_heads");
    v["model.ffn_hidden"] = cell("ffn");
    v["model.seq_len"] = cell("seq");
    v["model.vocab"] = cell("vocab");
    const bool swiglu_like = !cell("kv_heads").empty() && cell("kv_heads") != cell("heads");
    if (swiglu_like) {
      // GQA models in use (Llama family) pair it with SwiGLU, RMSNorm, RoPE, no biases.
      v["model.mlp"] = "swiglu";
      v["model.norm"] = "rmsnorm";
      v["model.position"] = "rope";
      v["model.bias"] = "false";
      v["model.tied_embeddings"] = "false";
      row.assumed["model"] = "Llama-style block (SwiGLU, RMSNorm, RoPE) because kv_heads < heads";
    }
    for (const char* c : {"tp", "pp", "dp", "vpp", "cp", "ep"}) {
      v[std::string("parallel.") + c] = cell(c);
    }
    if (v["parallel.dp"].empty()) {
      v["parallel.dp"] = "auto";
      row.assumed["dp"] = "gpus / (tp·pp·cp)";
    }
    if (v["parallel.vpp"].empty()) v["parallel.vpp"] = "1";
    if (v["parallel.cp"].empty()) v["parallel.cp"] = "1";
    if (v["parallel.ep"].empty()) v["parallel.ep"] = "1";
    v["training.micro_batch"] = cell("mbs");
    if (v["training.micro_batch"].empty()) {
      v["training.micro_batch"] = "1";
      row.assumed["mbs"] = "1 (blank: the smallest micro-batch)";
    }
    v["training.global_batch"] = cell("gbs");
    v["training.precision"] = cell("precision").empty() ? "bf16" : cell("precision");
    if (cell("precision").empty()) row.assumed["precision"] = "bf16";
    const bool modern = system == "nemo" || system == "megascale";
    v["parallel.zero"] = cell("zero");
    if (v["parallel.zero"].empty()) {
      v["parallel.zero"] = modern ? "1" : "0";
      row.assumed["zero"] = modern ? "1 (the distributed optimizer of Megatron-Core/NeMo)"
                                   : "0 (no distributed optimizer in this system)";
    }
    const int tp = cell("tp").empty() ? 1 : std::stoi(cell("tp"));
    v["parallel.sp"] = (modern && tp > 1) ? "true" : "false";
    row.assumed["sp"] = v["parallel.sp"] + (modern ? " (on with TP in Megatron-Core/NeMo/MegaScale)"
                                                   : " (not in this system)");
    v["optimizations.system"] = system;
    v["simulation.fidelity"] = "analytic";

    std::string recompute = cell("recompute");
    std::vector<std::string> tries =
        recompute.empty() ? std::vector<std::string>{"none", "selective", "full"}
                          : std::vector<std::string>{recompute};
    for (auto it = v.begin(); it != v.end();) {
      it = it->second.empty() ? v.erase(it) : std::next(it);
    }
    try {
      exec::Result res;
      Scenario chosen;
      bool found = false;
      std::string shortfall;
      for (const auto& rc : tries) {
        v["training.recompute"] = rc;
        Scenario s = build_scenario(v, file + ":" + std::to_string(line_no));
        const exec::RunConfig cfg = make_run_config(s);
        exec::AnalyticOptions opts;
        opts.enforce_memory = false;
        res = run_scenario(s, cfg, opts);
        if (res.memory.fits()) {
          chosen = s;
          found = true;
          if (recompute.empty()) row.assumed["recompute"] = rc + " (the least recompute that fits)";
          break;
        }
        shortfall = exec::memory_shortfall_message(res.memory);
      }
      if (!found) throw_infeasible(shortfall, {file, line_no, "recompute"});
      if (fidelity != "analytic") {
        // The recompute choice is a memory question (fidelity-independent); the timing is
        // re-run at the asked fidelity.
        chosen.fidelity = fidelity;
        exec::AnalyticOptions opts;
        opts.enforce_memory = false;
        res = run_scenario(chosen, make_run_config(chosen), opts);
      }

      const double tokens_per_iter = std::stod(v["training.global_batch"]) * chosen.model.seq_len;
      const double gpus = chosen.cluster.gpus;
      const double peak = res.peak_flops_per_gpu;
      row.predicted.iter_s = res.iteration_time_s;
      row.predicted.tokens_s = res.tokens_per_s;
      row.predicted.mfu = res.mfu;
      row.predicted.hfu = res.hfu;
      row.predicted_breakdown = res.breakdown;
      row.tflops_counts_recompute =
          row.source.find("SC21") != std::string::npos ||
          cell("notes").find("counts the recompute") != std::string::npos;
      row.predicted.tflops_gpu =
          row.tflops_counts_recompute ? res.hw_tflops_per_gpu : res.tflops_per_gpu;
      if (row.tflops_counts_recompute) {
        row.assumed["tflops_gpu"] =
            "compared with predicted TFLOP/s counting recompute (Megatron-LM SC21 Eq. 3)";
      }

      // Published figures, and what follows from them by the model's FLOP accounting.
      row.published.iter_s = pub_iter;
      row.published.tokens_s = pub_tokens;
      row.published.mfu = pub_mfu;
      row.published.tflops_gpu = pub_tflops;
      if (!row.published.iter_s && pub_tokens) {
        row.published.iter_s = tokens_per_iter / *pub_tokens;
        row.derived.push_back("iter_s = gbs·seq / tokens_s");
      }
      if (!row.published.iter_s && pub_tflops) {
        const double flops = row.tflops_counts_recompute ? res.hardware_flops_per_iteration
                                                         : res.model_flops_per_iteration;
        row.published.iter_s = flops / (*pub_tflops * kTera * gpus);
        row.derived.push_back(std::string("iter_s = ") +
                              (row.tflops_counts_recompute ? "hardware" : "model") +
                              " FLOPs per iteration / (tflops_gpu · gpus)");
      }
      if (!row.published.tokens_s && row.published.iter_s) {
        row.published.tokens_s = tokens_per_iter / *row.published.iter_s;
      }
      if (!row.published.mfu && row.published.iter_s) {
        row.published.mfu = res.model_flops_per_iteration / (*row.published.iter_s * gpus * peak);
        row.derived.push_back("mfu = model FLOPs per iteration / (iter_s · gpus · peak)");
      }
      if (row.published.iter_s) {
        row.published.hfu =
            res.hardware_flops_per_iteration / (*row.published.iter_s * gpus * peak);
      }
      if (row.published.mfu) row.mfu_err_pts = 100.0 * (res.mfu - *row.published.mfu);
      if (row.published.iter_s) {
        row.iter_err_pct = 100.0 * (res.iteration_time_s - *row.published.iter_s) /
                           *row.published.iter_s;
      }
      if (row.published.tflops_gpu) {
        row.tflops_err_pct = 100.0 * (*row.predicted.tflops_gpu - *row.published.tflops_gpu) /
                             *row.published.tflops_gpu;
      }
    } catch (const Error& e) {
      row.error_message = e.what();
      row.published.iter_s = pub_iter;
      row.published.tokens_s = pub_tokens;
      row.published.mfu = pub_mfu;
      row.published.tflops_gpu = pub_tflops;
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

ValidationSummary summarize(const std::vector<ValidationRow>& rows) {
  ValidationSummary s;
  s.rows = static_cast<int>(rows.size());
  std::vector<double> mfu_errs;
  double ape_sum = 0;
  for (const auto& r : rows) {
    if (!r.error_message.empty()) continue;
    ++s.simulated;
    if (r.mfu_err_pts) mfu_errs.push_back(std::fabs(*r.mfu_err_pts));
    if (r.iter_err_pct) {
      ape_sum += std::fabs(*r.iter_err_pct);
      ++s.iter_rows;
    }
  }
  s.mfu_rows = static_cast<int>(mfu_errs.size());
  if (!mfu_errs.empty()) {
    std::sort(mfu_errs.begin(), mfu_errs.end());
    const size_t n = mfu_errs.size();
    s.median_abs_mfu_err_pts =
        n % 2 ? mfu_errs[n / 2] : 0.5 * (mfu_errs[n / 2 - 1] + mfu_errs[n / 2]);
    s.max_abs_mfu_err_pts = mfu_errs.back();
  }
  if (s.iter_rows > 0) s.iter_time_mape = ape_sum / s.iter_rows;
  return s;
}

}  // namespace trainsim::scen
