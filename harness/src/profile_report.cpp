// What `stagecraft profile` prints (profile_job.h): the layers' table and the calibration's.
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "stagecraft/base/format.h"
#include "stagecraft/base/printable.h"
#include "stagecraft/harness/profile_job.h"
#include "stagecraft/sim/costs.h"
#include "stagecraft/scenario/units.h"

namespace stagecraft::harness {
namespace {

// A scale as the table shows it: "-" for a kind no calibration run had on that rank.
std::string ScaleText(double scale, const ScaleSums* sums, int kind) {
  if (sums == nullptr || sums->isolated[kind] <= 0) return "-";
  return fmt::format("{:.3f}", scale);
}

std::string LayerRow(const std::string& name, const sim::LayerProfile& m) {
  return fmt::format("{:<6} {:>12} {:>15} {:>16} {:>12} {:>14}\n", name, FormatDuration(m.forward_ns),
                     FormatDuration(m.backward_input_ns), FormatDuration(m.backward_weight_ns),
                     FormatDuration(m.step_ns), FormatBytes(m.activation_bytes));
}

// The point-to-point fit, and the in-pipeline transfer rate the runs saw.
std::string P2pText(const sim::Profile& profile, const RunsReport& runs) {
  if (!profile.p2p) {
    return "p2p: no bandwidth could be fitted (the larger messages were not slower); the topology's links stay\n";
  }
  std::string out = fmt::format(
      "p2p: latency {}, bandwidth {:.2f} GB/s, {:.0f}% of a {} transfer overlaps the receiver's compute\n",
      FormatDuration(profile.p2p->latency_ns), profile.p2p->bytes_per_s * 1e-9, 100 * profile.p2p->overlap,
      FormatBytes(profile.send_bytes));
  if (runs.waited > 0) {
    out += fmt::format("p2p in the pipeline: {} transfers waited through, median {}", runs.waited,
                       FormatDuration(runs.waited_median_ns));
    out += profile.p2p->pipeline_bytes_per_s > 0
               ? fmt::format(": {:.2f} GB/s (the simulator's data rate)\n", profile.p2p->pipeline_bytes_per_s * 1e-9)
               : std::string(" (not slower than the ping-pong: its bandwidth stays)\n");
  }
  return out;
}

// The all-reduce fit, and what the runs' REDUCE_GRADs took.
std::string AllReduceText(const sim::Profile& profile, const RunsReport& runs) {
  if (!profile.allreduce) {
    return "all-reduce: no fit (time did not grow with size, or no group to measure); the plans over the links "
           "stay\n";
  }
  const sim::CollectiveFit& fit = *profile.allreduce;
  std::string out = fmt::format("all-reduce over {} ranks: {} steps of {} latency, bus bandwidth {:.2f} GB/s\n",
                                fit.ranks, 2 * (fit.ranks - 1), FormatDuration(fit.latency_ns),
                                fit.bus_bytes_per_s * 1e-9);
  if (runs.reduces > 0) {
    out += fmt::format("all-reduce in the runs: {} REDUCE_GRADs, median {}", runs.reduces,
                       FormatDuration(runs.reduce_median_ns));
    out += fit.pipeline_bus_bytes_per_s > 0
               ? fmt::format(": bus bandwidth {:.2f} GB/s (the simulator's data rate)\n",
                             fit.pipeline_bus_bytes_per_s * 1e-9)
               : std::string(" (not slower than the fit: its bandwidth stays)\n");
  }
  return out;
}

// Each rank's in-pipeline / isolated scales, per step and per microbatch.
std::string ScalesText(const sim::Profile& profile, const RunsReport& runs) {
  std::string out = fmt::format("{:<5} {:<14} {:>8} {:>8} {:>8} {:>8} {:>8}\n", "rank", "updates", "F", "B", "I",
                                "W", "STEP");
  for (size_t r = 0; r < profile.ranks.size(); ++r) {
    const auto at = [r](const std::vector<ScaleSums>& v) { return r < v.size() ? &v[r] : nullptr; };
    for (const auto& [what, k, measured] :
         {std::tuple{"per step", profile.ranks[r].per_step, at(runs.per_step)},
          std::tuple{"per microbatch", profile.ranks[r].per_microbatch, at(runs.per_microbatch)}}) {
      out += fmt::format("{:<5} {:<14} {:>8} {:>8} {:>8} {:>8} {:>8}\n", r, what, ScaleText(k.forward, measured, 0),
                         ScaleText(k.backward, measured, 1), ScaleText(k.backward_input, measured, 2),
                         ScaleText(k.backward_weight, measured, 3), ScaleText(k.step, measured, 4));
    }
  }
  return out;
}

// One stash slope as the table shows it: applied, measured within the noise, or flat.
std::string SlopeText(std::string_view key, const sim::StashSlope& k) {
  if (k.slope > 0) return fmt::format("  {} {:+.1f}% ({:.2f}; noise {:.1f}%)", key, 100 * k.slope, k.at, 100 * k.noise);
  if (k.measured_slope > 0) {
    return fmt::format("  {} +0.0% ({:.2f}; {:+.1f}% measured, within the noise {:.1f}%: not applied)", key, k.at,
                       100 * k.measured_slope, 100 * k.noise);
  }
  return fmt::format("  {} +0.0% ({:.2f})", key, k.at);
}

// The time added per microbatch of activations held, per rank that has a stash slope.
std::string StashText(const sim::Profile& profile) {
  std::string out;
  for (size_t r = 0; r < profile.ranks.size(); ++r) {
    const std::optional<sim::StashScale>& s = profile.ranks[r].stash;
    if (!s) continue;
    if (out.empty()) {
      out = "time added per microbatch of activations held beyond the shallow runs' mean (in brackets), "
            "up to the deep run's most:\n";
    }
    std::string kinds;
    for (const auto& [key, field] : sim::kStashFields) {
      const sim::StashSlope& k = (*s).*field;
      if (k.at > 0 || k.measured_slope > 0) kinds += SlopeText(key, k);
    }
    out += fmt::format("rank {}: up to {:.2f}:{}\n", r, s->deep, kinds);
  }
  return out;
}

}  // namespace

std::string ProfileLayersText(const sim::Profile& profile, const sim::Scenario& sc, const exec::TrainingConfig& config,
                              const ProfileOptions& options, int ranks, const std::string& out_path) {
  std::string out = fmt::format(
      "profile of {}: {} {}, hidden {}, microbatch {}, median of {} runs on {} rank(s) at once -> {}\n",
      Printable(sc.name), exec::NetworkLayers(config), config.gpt ? "blocks" : "layers",
      config.gpt ? config.gpt->hidden : config.model.hidden, config.microbatch_size, options.repeats, ranks, out_path);
  out += fmt::format("{:<6} {:>12} {:>15} {:>16} {:>12} {:>14}\n", "layer", "forward", "backward_input",
                     "backward_weight", "step", "activations");
  for (size_t l = 0; l < profile.layers.size(); ++l) out += LayerRow(std::to_string(l), profile.layers[l]);
  for (const auto& [name, piece] : {std::pair{"embed", profile.embedding}, std::pair{"head", profile.head}}) {
    if (piece) out += LayerRow(name, *piece);
  }
  out += fmt::format("input copy {} (first stage), loss {} (last stage), per forward\n",
                     FormatDuration(profile.input_copy_ns), FormatDuration(profile.loss_ns));
  return out;
}

std::string CalibrationText(const sim::Profile& profile, const RunsReport& runs, const sim::Scenario& sc,
                            const ProfileOptions& options) {
  std::string out = P2pText(profile, runs) + AllReduceText(profile, runs);
  std::string by_rank;
  for (size_t r = 0; r < profile.ranks.size(); ++r) {
    by_rank += fmt::format("{}rank {} {}", r == 0 ? " (" : ", ", r,
                           FormatDuration(profile.ranks[r].op_overhead_ns.value_or(profile.op_overhead_ns)));
  }
  if (!by_rank.empty()) by_rank += ")";
  out += fmt::format("runtime overhead per op: {}{}\n", FormatDuration(profile.op_overhead_ns), by_rank);
  out += fmt::format("an op's time varies by {:.1f}% (CV) from one run of it to the next\n", 100 * profile.op_time_cv);
  out += fmt::format("in-pipeline / isolated time, per rank ({}-step runs of {}):\n", options.calibration_steps,
                     fmt::join(CalibrationSchedules(CalibrationPipeline(sc, options.calibration_steps)), ", "));
  out += ScalesText(profile, runs);
  out += "(-: no calibration run had that op kind on that rank; its scale is per_step's, else 1)\n";
  if (runs.deep_stash_left_out) {
    out += "gpipe's run left out: every microbatch held at once is predicted over the device's memory, "
           "so the stash's slopes are not measured\n";
  }
  return out + StashText(profile);
}

}  // namespace stagecraft::harness
