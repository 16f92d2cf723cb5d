// Per-stage costs: measured profiles, explicit per-rank costs, and the analytical transformer
// and MLP models whose formulas (and papers) are listed in costs.h.
#include "stagecraft/sim/costs.h"

#include <fmt/format.h>

#include <cmath>

#include "stagecraft/base/check.h"
#include "stagecraft/base/error.h"
#include "stagecraft/schedules/ir.h"
#include "yaml_util.h"

namespace stagecraft::sim {

using stagecraft::InputError;

std::vector<int> SplitLayers(int layers, int stages, std::string_view what) {
  if (layers < stages) {
    throw InputError(fmt::format("{} has {} layers; it cannot be split over {} stages", what, layers, stages));
  }
  std::vector<int> counts(stages, layers / stages);
  for (int s = 0; s < layers % stages; ++s) ++counts[s];
  return counts;
}

std::vector<int> PartitionLayers(const std::vector<double>& layer_cost, const std::vector<double>& stage_extra,
                                 std::string_view what) {
  const int n = static_cast<int>(layer_cost.size());
  const int k = static_cast<int>(stage_extra.size());
  if (n < k) throw InputError(fmt::format("{} has {} layers; it cannot be split over {} stages", what, n, k));
  std::vector<double> prefix(n + 1, 0.0);
  for (int i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + layer_cost[i];
  const std::vector<int> even = SplitLayers(n, k, what);
  // best[s][i]: the smallest possible max stage cost when stages s.. hold layers i..n-1.
  const double kInf = HUGE_VAL;
  std::vector<std::vector<double>> best(k + 1, std::vector<double>(n + 1, kInf));
  best[k][n] = 0;
  for (int st = k - 1; st >= 0; --st) {
    for (int i = n - (k - st); i >= st; --i) {
      for (int j = i + 1; j <= n - (k - st - 1); ++j) {
        const double cost = std::max(prefix[j] - prefix[i] + stage_extra[st], best[st + 1][j]);
        best[st][i] = std::min(best[st][i], cost);
      }
    }
  }
  // Walk forward; among the split points that keep the optimum (to rounding), take the one
  // closest to the even split's boundary.
  std::vector<int> counts;
  int i = 0, even_end = 0;
  for (int st = 0; st < k; ++st) {
    even_end += even[st];
    int pick = -1;
    for (int j = i + 1; j <= n - (k - st - 1); ++j) {
      const double cost = std::max(prefix[j] - prefix[i] + stage_extra[st], best[st + 1][j]);
      if (cost > best[0][0] * (1 + 1e-12) + 1e-9) continue;
      if (pick < 0 || std::abs(j - even_end) < std::abs(pick - even_end)) pick = j;
    }
    SC_CHECK(pick > i, "a balanced split exists");
    counts.push_back(pick - i);
    i = pick;
  }
  return counts;
}

namespace {

using stagecraft::InputError;
using yaml::Map;
using yaml::Value;

int64_t Nanoseconds(double flops, const DeviceSpec& device) {
  return std::llround(flops / (device.peak_flops * device.efficiency) * 1e9);
}

// Optimizer state bytes per parameter (see costs.h).
int64_t OptimizerBytesPerParam(const std::string& optimizer, double momentum, int dtype_bytes) {
  const int64_t master = dtype_bytes < 4 ? 4 : 0;
  if (optimizer == "adam") return master + 8;
  return master + (momentum > 0 ? 4 : 0);
}

// Value / v for chunk c of v, the remainder spread one unit each over the lowest chunks.
int64_t Share(int64_t value, int v, int c) { return value / v + (c < value % v ? 1 : 0); }

CostTable ExplicitTable(const Scenario& sc, int stages) {
  const ExplicitCosts& c = *sc.model.costs;
  const int ranks = sc.pipeline.ranks;
  const int v = stages / ranks;
  CostTable table;
  table.source = "explicit";
  table.p2p_latency_ns = c.p2p_latency_ns;
  for (int s = 0; s < stages; ++s) {
    const int r = s % ranks;
    const int chunk = s / ranks;
    StageCost cost;
    cost.forward_ns = Share(c.forward_ns[r], v, chunk);
    cost.backward_input_ns = Share(c.backward_input_ns[r], v, chunk);
    cost.backward_weight_ns = Share(c.backward_weight_ns[r], v, chunk);
    cost.activation_bytes = Share(c.activation_bytes[r], v, chunk);
    cost.weight_bytes = Share(c.weight_bytes[r], v, chunk);
    cost.grad_bytes = cost.weight_bytes;
    cost.send_bytes = c.send_bytes;
    table.stages.push_back(cost);
  }
  return table;
}

int DtypeBytes(const std::string& dtype) { return dtype == "fp32" ? 4 : 2; }

CostTable TransformerTable(const Scenario& sc, int stages) {
  const TransformerSpec& t = *sc.model.transformer;
  const DeviceSpec& device = sc.topology.device;
  const double b = sc.pipeline.microbatch_size, s = t.seq, h = t.hidden, V = t.vocab;
  const int64_t bi = sc.pipeline.microbatch_size, si = t.seq, hi = t.hidden, ai = t.heads, Vi = t.vocab;
  const int64_t d = DtypeBytes(t.dtype);
  const double layer_flops = 24 * b * s * h * h + 4 * b * s * s * h;
  const double head_flops = 2 * b * s * h * V;
  const int64_t layer_params = 12 * hi * hi + 13 * hi;
  // Korthikanti Eq. 2 in 16-bit bytes, scaled to the dtype.
  const int64_t layer_activation = (34 * si * bi * hi + 5 * ai * si * si * bi) * d / 2;
  const std::string optimizer = sc.has_training ? sc.training.optimizer : "adam";
  const int64_t optimizer_per_param = OptimizerBytesPerParam(optimizer, sc.training.momentum, static_cast<int>(d));

  CostTable table;
  table.source = "transformer";
  const std::vector<int> layers = StageLayers(sc, stages);
  for (int st = 0; st < stages; ++st) {
    const int64_t n = layers[st];
    const bool last = st == stages - 1;
    const double forward = n * layer_flops + (last ? head_flops : 0.0);
    const double recompute = sc.pipeline.recompute ? n * layer_flops : 0.0;
    // The embeddings (tokens and positions) on the first stage; the final LayerNorm and the LM
    // head, untied (its own copy on the last rank, as Megatron-LM's pipeline keeps), on the last.
    const int64_t params = n * layer_params + (st == 0 ? (Vi + si) * hi : 0) + (last ? Vi * hi + 2 * hi : 0);
    StageCost cost;
    cost.forward_ns = Nanoseconds(forward, device);
    cost.backward_input_ns = Nanoseconds(forward + recompute, device);
    cost.backward_weight_ns = Nanoseconds(forward, device);
    cost.activation_bytes = sc.pipeline.recompute ? n * si * bi * hi * d : n * layer_activation;
    if (sc.pipeline.recompute) cost.recompute_bytes = layer_activation;  // one layer rebuilt at a time
    if (last) cost.activation_bytes += si * bi * Vi * d;  // the logits' gradient, kept from F to the backward
    cost.w_stash_bytes = n * 7 * si * bi * hi * d;
    cost.weight_bytes = params * d;
    cost.grad_bytes = params * d;
    cost.optimizer_bytes = params * optimizer_per_param;
    cost.send_bytes = si * bi * hi * d;
    table.stages.push_back(cost);
  }
  return table;
}

CostTable MlpTable(const Scenario& sc, int stages) {
  const MlpSpec& m = *sc.model.mlp;
  const DeviceSpec& device = sc.topology.device;
  const int64_t b = sc.pipeline.microbatch_size, h = m.hidden;
  constexpr int64_t kFloat = 4;
  const double layer_flops = 2.0 * static_cast<double>(b) * static_cast<double>(h) * static_cast<double>(h);
  const std::string optimizer = sc.has_training ? sc.training.optimizer : "sgd";
  const int64_t optimizer_per_param = OptimizerBytesPerParam(optimizer, sc.training.momentum, kFloat);

  CostTable table;
  table.source = "mlp";
  const std::vector<int> layers = StageLayers(sc, stages);
  for (int st = 0; st < stages; ++st) {
    const int64_t n = layers[st];
    const int64_t params = n * (h * h + h);
    StageCost cost;
    cost.forward_ns = Nanoseconds(n * layer_flops, device);
    cost.backward_input_ns = Nanoseconds((sc.pipeline.recompute ? 2 : 1) * n * layer_flops, device);
    cost.backward_weight_ns = Nanoseconds(n * layer_flops, device);
    // Recomputing, a stage keeps only its input and rebuilds every layer's during the backward.
    cost.activation_bytes = sc.pipeline.recompute ? b * h * kFloat : n * 2 * b * h * kFloat;
    if (sc.pipeline.recompute) cost.recompute_bytes = n * 2 * b * h * kFloat;
    cost.w_stash_bytes = n * 2 * b * h * kFloat;  // each layer's input and dz, for W
    cost.weight_bytes = params * kFloat;
    cost.grad_bytes = params * kFloat;
    cost.optimizer_bytes = params * optimizer_per_param;
    cost.send_bytes = b * h * kFloat;
    if (st == stages - 1) cost.activation_bytes += b * h * kFloat;  // the loss gradient, F to backward
    table.stages.push_back(cost);
  }
  return table;
}

OpScale ReadScale(const Value& v, const OpScale& defaults) {
  const Map m(v, {"forward", "backward", "backward_input", "backward_weight", "step"});
  OpScale scale = defaults;
  for (const auto& [key, field] : kOpScaleFields) {
    if (const auto x = m.Find(key)) scale.*field = x->Double(0, 1000);
  }
  return scale;
}

// The optional measurements beyond the layers (profile.h).
void ReadCalibration(const Map& m, Profile* p) {
  if (const auto v = m.Find("input_copy")) p->input_copy_ns = v->DurationNs();
  if (const auto v = m.Find("loss")) p->loss_ns = v->DurationNs();
  if (const auto v = m.Find("op_overhead")) p->op_overhead_ns = v->DurationNs();
  if (const auto v = m.Find("op_time_cv")) {
    p->op_time_cv = v->Double(-1, 10);
    if (p->op_time_cv < 0) v->Fail("expected a coefficient of variation from 0 to 10");
  }
  if (const auto v = m.Find("p2p")) {
    const Map link(*v, {"latency", "bandwidth", "overlap", "in_pipeline_bandwidth"});
    P2pProfile fit;
    fit.latency_ns = link.Get("latency").DurationNs();
    fit.bytes_per_s = link.Get("bandwidth").Bandwidth();
    if (const auto o = link.Find("overlap")) {
      fit.overlap = o->Double(-1e9, 1e9);
      if (fit.overlap < 0 || fit.overlap > 1) o->Fail("expected a fraction from 0 to 1");
    }
    if (const auto b = link.Find("in_pipeline_bandwidth")) fit.pipeline_bytes_per_s = b->Bandwidth();
    p->p2p = fit;
  }
  if (const auto v = m.Find("ranks")) {
    for (const Value& element : v->Elements()) {
      const Map r(element, {"layers", "op_overhead", "per_step", "per_microbatch"});
      RankScale scale;
      if (const auto x = r.Find("op_overhead")) scale.op_overhead_ns = x->DurationNs();
      if (const auto x = r.Find("layers")) scale.layers = static_cast<int>(x->Int(1, 1 << 30));
      if (const auto x = r.Find("per_step")) scale.per_step = ReadScale(*x, OpScale{});
      scale.per_microbatch = scale.per_step;
      if (const auto x = r.Find("per_microbatch")) scale.per_microbatch = ReadScale(*x, scale.per_step);
      p->ranks.push_back(scale);
    }
  }
}

// A profile's sizes and layer count are bounded far above any real model, so that the sums
// over a stage's layers (ProfileTable) stay far from int64 overflow.
constexpr int64_t kMaxProfileBytes = int64_t{1} << 40;
constexpr size_t kMaxProfileLayers = size_t{1} << 20;

int64_t ProfileBytes(const Value& v) {
  const int64_t bytes = v.Bytes();
  if (bytes > kMaxProfileBytes) v.Fail(fmt::format("expected at most 1TiB, got {}", v.Describe()));
  return bytes;
}

// One layer's measurements (also the embedding's and the head's).
LayerProfile ReadLayer(const Value& element) {
  const Map l(element, {"forward", "backward_input", "backward_weight", "step", "copy", "activation_bytes",
                        "weight_bytes", "w_stash_bytes", "grad_bytes", "optimizer_bytes", "workspace_bytes"});
  LayerProfile layer;
  layer.forward_ns = l.Get("forward").DurationNs();
  layer.backward_input_ns = l.Get("backward_input").DurationNs();
  layer.backward_weight_ns = l.Get("backward_weight").DurationNs();
  if (const auto v = l.Find("step")) layer.step_ns = v->DurationNs();
  if (const auto v = l.Find("copy")) layer.version_copy_ns = v->DurationNs();
  layer.activation_bytes = ProfileBytes(l.Get("activation_bytes"));
  layer.weight_bytes = ProfileBytes(l.Get("weight_bytes"));
  if (const auto v = l.Find("w_stash_bytes")) layer.w_stash_bytes = ProfileBytes(*v);
  layer.grad_bytes = layer.weight_bytes;
  if (const auto v = l.Find("grad_bytes")) layer.grad_bytes = ProfileBytes(*v);
  if (const auto v = l.Find("optimizer_bytes")) layer.optimizer_bytes = ProfileBytes(*v);
  if (const auto v = l.Find("workspace_bytes")) layer.workspace_bytes = ProfileBytes(*v);
  return layer;
}

// Parses a profile (`path` names it in errors); with `scenario`, also checks that it fits that
// scenario.
Profile ParseProfile(std::string_view text, const std::string& path, const Scenario* scenario) {
  const Value root(yaml::LoadText(text, path), "", yaml::Origin{path, yaml::DirOf(path), -1, false}, nullptr);
  const Map m(root, {"device", "microbatch_size", "send_bytes", "layers", "embedding", "head", "input_copy", "loss",
                     "op_overhead", "op_time_cv", "p2p", "ranks"});
  Profile p;
  if (const auto device = m.Find("device")) p.device = device->String();
  const Value microbatch_size = m.Get("microbatch_size");
  p.microbatch_size = static_cast<int>(microbatch_size.Int(1, 1 << 30));
  if (const auto send = m.Find("send_bytes")) p.send_bytes = ProfileBytes(*send);
  const Value layers = m.Get("layers");
  for (const Value& element : layers.Elements()) p.layers.push_back(ReadLayer(element));
  if (const auto v = m.Find("embedding")) p.embedding = ReadLayer(*v);
  if (const auto v = m.Find("head")) p.head = ReadLayer(*v);
  if (p.layers.empty()) layers.Fail("expected at least one layer");
  if (p.layers.size() > kMaxProfileLayers) {
    layers.Fail(fmt::format("expected at most 2^20 layers, got {}", p.layers.size()));
  }
  ReadCalibration(m, &p);
  if (scenario == nullptr) return p;
  if (p.microbatch_size != scenario->pipeline.microbatch_size) {
    microbatch_size.Fail(fmt::format("profile was measured at microbatch_size {} but pipeline.microbatch_size is {}",
                                     p.microbatch_size, scenario->pipeline.microbatch_size));
  }
  const ModelSpec& model = scenario->model;
  const int model_layers = model.transformer ? model.transformer->layers : model.mlp ? model.mlp->layers : 0;
  if (model_layers != 0 && model_layers != static_cast<int>(p.layers.size())) {
    layers.Fail(fmt::format("expected {} layers (the scenario's model), got {}", model_layers, p.layers.size()));
  }
  return p;
}

Profile ReadProfile(const std::string& path, const Scenario* scenario) {
  return ParseProfile(yaml::ReadFile(path), path, scenario);
}

std::vector<int> ProfileStageLayers(const Scenario& sc, const Profile& p, int stages) {
  const std::string what = fmt::format("profile {}", sc.model.profile_path);
  if (sc.pipeline.partition == "even") return SplitLayers(static_cast<int>(p.layers.size()), stages, what);
  std::vector<double> cost;
  auto total = [](const LayerProfile& l) {
    return static_cast<double>(l.forward_ns + l.backward_input_ns + l.backward_weight_ns + l.step_ns);
  };
  for (const LayerProfile& l : p.layers) cost.push_back(total(l));
  std::vector<double> extra(stages, 0.0);
  if (p.embedding) extra.front() += total(*p.embedding);
  if (p.head) extra.back() += total(*p.head);
  return PartitionLayers(cost, extra, what);
}

// The calibration's scales per layer: those of the rank that held the layer in the calibration
// runs (one stage per rank: the split the profile records, else the scenario's). The caller
// has checked that p.ranks has one entry per pipeline rank.
std::vector<OpScale> LayerScales(const Scenario& sc, const Profile& p, bool per_microbatch) {
  std::vector<OpScale> out(p.layers.size());
  // The split the calibration ran with, when the profile records it.
  std::vector<int> counts;
  size_t total = 0;
  for (const RankScale& r : p.ranks) {
    counts.push_back(r.layers);
    total += static_cast<size_t>(std::max(r.layers, 0));
  }
  if (total != p.layers.size()) counts = ProfileStageLayers(sc, p, sc.pipeline.ranks);
  size_t next = 0;
  for (size_t r = 0; r < counts.size(); ++r) {
    const OpScale& scale = per_microbatch ? p.ranks[r].per_microbatch : p.ranks[r].per_step;
    for (int i = 0; i < counts[r]; ++i, ++next) out[next] = scale;
  }
  return out;
}

double Scaled(int64_t ns, double scale) { return static_cast<double>(ns) * scale; }

CostTable ProfileTable(const Scenario& sc, const Profile& p, const schedules::Shape& shape, bool per_microbatch,
                       bool calibrated) {
  const int stages = shape.stages();
  CostTable table;
  table.source = "profile:" + sc.model.profile_path;
  const std::vector<int> counts = ProfileStageLayers(sc, p, stages);
  // Per-rank calibration applies when it was taken on as many ranks (its rank r ran where r runs).
  const bool per_rank = calibrated && static_cast<int>(p.ranks.size()) == sc.pipeline.ranks;
  const std::vector<OpScale> scales =
      per_rank ? LayerScales(sc, p, per_microbatch) : std::vector<OpScale>(p.layers.size());
  size_t next = 0;
  for (int st = 0; st < stages; ++st) {
    StageCost cost;
    cost.send_bytes = p.send_bytes;
    double f = 0, i_ns = 0, w = 0, b = 0, step = 0, copy = 0;
    auto add = [&](const LayerProfile& layer, const OpScale& k) {
      const int64_t input = layer.backward_input_ns + (sc.pipeline.recompute ? layer.forward_ns : 0);
      f += Scaled(layer.forward_ns, k.forward);
      i_ns += Scaled(input, k.backward_input);
      w += Scaled(layer.backward_weight_ns, k.backward_weight);
      b += Scaled(input + layer.backward_weight_ns, k.backward);
      step += Scaled(layer.step_ns, k.step);
      copy += Scaled(layer.version_copy_ns, k.step);
      // Recomputing, the stage rebuilds these during its backward (below).
      (sc.pipeline.recompute ? cost.recompute_bytes : cost.activation_bytes) += layer.activation_bytes;
      cost.w_stash_bytes += layer.w_stash_bytes;
      cost.weight_bytes += layer.weight_bytes;
      cost.grad_bytes += layer.grad_bytes;
      cost.optimizer_bytes += layer.optimizer_bytes;
      cost.workspace_bytes = std::max(cost.workspace_bytes, layer.workspace_bytes);  // one layer at a time
    };
    if (st == 0 && p.embedding) add(*p.embedding, scales.front());
    for (int i = 0; i < counts[st]; ++i, ++next) add(p.layers[next], scales[next]);
    if (st == stages - 1 && p.head) add(*p.head, scales.back());
    cost.forward_workspace_bytes = cost.workspace_bytes;
    // Recomputing, a stage keeps its input alone from F to its backward: the tokens (the
    // embeddings' own activations) on the transformer's first stage, the activation sent
    // between stages elsewhere.
    if (sc.pipeline.recompute) cost.activation_bytes = st == 0 && p.embedding ? p.embedding->activation_bytes : p.send_bytes;
    if (st == 0) f += Scaled(p.input_copy_ns, scales.front().forward);
    if (st == stages - 1) {
      f += Scaled(p.loss_ns, scales.back().forward);
      // The loss gradient, kept from F to its backward: the size of the output (the logits, for
      // the transformer: send_bytes / hidden · vocab).
      const TransformerSpec* t = sc.model.transformer ? &*sc.model.transformer : nullptr;
      const int64_t output_bytes = t != nullptr ? p.send_bytes / t->hidden * t->vocab : p.send_bytes;
      cost.activation_bytes += output_bytes;
      // The output itself lives beside its gradient until the loss has read it, in the F.
      if (cost.workspace_bytes > 0) cost.forward_workspace_bytes = std::max(cost.workspace_bytes, output_bytes);
    }
    cost.forward_ns = std::llround(f);
    cost.backward_input_ns = std::llround(i_ns);
    cost.backward_weight_ns = std::llround(w);
    if (per_rank) cost.fused_backward_ns = std::llround(b);
    cost.step_ns = std::llround(step);
    cost.version_copy_ns = std::llround(copy);
    table.stages.push_back(cost);
  }
  if (calibrated) {
    table.op_overhead_ns = p.op_overhead_ns;
    table.op_time_cv = p.op_time_cv;
    if (per_rank) {
      for (const RankScale& r : p.ranks) {
        table.rank_op_overhead_ns.push_back(r.op_overhead_ns.value_or(p.op_overhead_ns));
      }
    }
    table.p2p = p.p2p;
  }
  return table;
}

}  // namespace

std::vector<int> StageLayers(const Scenario& sc, int stages) {
  const ModelSpec& m = sc.model;
  if (!m.profile_path.empty()) return ProfileStageLayers(sc, ReadProfile(m.profile_path, &sc), stages);
  const bool balanced = sc.pipeline.partition == "balanced";
  if (m.transformer) {
    const TransformerSpec& t = *m.transformer;
    if (!balanced) return SplitLayers(t.layers, stages, "model.transformer");
    // In units of one layer's forward FLOPs, 24bsh²(1 + s/6h); the LM head adds 2bshV.
    const double h = t.hidden, s = t.seq, V = t.vocab;
    std::vector<double> extra(stages, 0.0);
    extra.back() = 2 * V / (24 * h * (1 + s / (6 * h)));
    return PartitionLayers(std::vector<double>(t.layers, 1.0), extra, "model.transformer");
  }
  if (m.mlp) {
    if (!balanced) return SplitLayers(m.mlp->layers, stages, "model.mlp");
    return PartitionLayers(std::vector<double>(m.mlp->layers, 1.0), std::vector<double>(stages, 0.0), "model.mlp");
  }
  throw InputError(fmt::format("{}: the model has no layers to split over stages (explicit costs are per rank)",
                               sc.path));
}

CostTable BuildCosts(const Scenario& scenario, int stages) {
  const int ranks = scenario.pipeline.ranks;
  SC_CHECK(ranks >= 1 && stages >= ranks && stages % ranks == 0,
           fmt::format("{} stages is not a multiple of {} ranks", stages, ranks));
  if (!scenario.model.profile_path.empty()) {
    // Without a schedule: loop placement, once-per-step updates.
    return ProfileTable(scenario, ReadProfile(scenario.model.profile_path, &scenario),
                        schedules::Shape{ranks, stages / ranks, schedules::Placement::kLoop}, false, true);
  }
  if (scenario.model.costs) return ExplicitTable(scenario, stages);
  if (scenario.model.transformer) return TransformerTable(scenario, stages);
  if (scenario.model.mlp) return MlpTable(scenario, stages);
  throw InputError(fmt::format("{}: model has no costs, profile, transformer or mlp", scenario.path));
}

bool UpdatesEveryMicrobatch(const schedules::Schedule& schedule) {
  std::vector<int> steps(static_cast<size_t>(schedule.stages()) * std::max(schedule.steps, 1), 0);
  for (const auto& ops : schedule.ops) {
    for (const schedules::Op& op : ops) {
      if (op.kind != schedules::OpKind::kStep || op.step < 0 || op.step >= std::max(schedule.steps, 1)) continue;
      if (++steps[static_cast<size_t>(op.step) * schedule.stages() + op.stage] > 1) return true;
    }
  }
  return false;
}

CostTable BuildCosts(const Scenario& scenario, const schedules::Schedule& schedule) {
  if (scenario.model.profile_path.empty()) return BuildCosts(scenario, schedule.stages());
  return ProfileTable(scenario, ReadProfile(scenario.model.profile_path, &scenario), schedule.shape,
                      UpdatesEveryMicrobatch(schedule), true);
}

CostTable CostsFromProfile(const Scenario& scenario, const Profile& profile, const schedules::Shape& shape,
                           bool per_microbatch_updates, bool calibrated) {
  return ProfileTable(scenario, profile, shape, per_microbatch_updates, calibrated);
}

Profile LoadProfile(const std::string& path) { return ReadProfile(path, nullptr); }

Profile ProfileFromYaml(std::string_view text, const std::string& source) {
  return ParseProfile(text, source, nullptr);
}

namespace {

void WriteScale(const OpScale& k, YAML::Emitter& out) {
  out << YAML::Flow << YAML::BeginMap;
  for (const auto& [key, field] : kOpScaleFields) out << YAML::Key << key << YAML::Value << fmt::format("{:.4f}", k.*field);
  // (ScaleOf keeps scales within [0.001, 1000], which 4 decimals and the reader both take.)
  out << YAML::EndMap;
}

void WriteCalibration(const Profile& p, YAML::Emitter& out) {
  if (p.input_copy_ns > 0) out << YAML::Key << "input_copy" << YAML::Value << fmt::format("{}ns", p.input_copy_ns);
  if (p.loss_ns > 0) out << YAML::Key << "loss" << YAML::Value << fmt::format("{}ns", p.loss_ns);
  if (p.op_overhead_ns > 0) out << YAML::Key << "op_overhead" << YAML::Value << fmt::format("{}ns", p.op_overhead_ns);
  if (p.op_time_cv > 0) out << YAML::Key << "op_time_cv" << YAML::Value << fmt::format("{:.4f}", p.op_time_cv);
  if (p.p2p && p.p2p->bytes_per_s > 0) {  // a fit without a bandwidth is not worth keeping
    out << YAML::Key << "p2p" << YAML::Value << YAML::Flow << YAML::BeginMap;
    out << YAML::Key << "latency" << YAML::Value << fmt::format("{}ns", p.p2p->latency_ns);
    out << YAML::Key << "bandwidth" << YAML::Value << fmt::format("{:.0f}B/s", p.p2p->bytes_per_s);
    out << YAML::Key << "overlap" << YAML::Value << fmt::format("{:.4f}", p.p2p->overlap);
    if (p.p2p->pipeline_bytes_per_s > 0) {
      out << YAML::Key << "in_pipeline_bandwidth" << YAML::Value
          << fmt::format("{:.0f}B/s", p.p2p->pipeline_bytes_per_s);
    }
    out << YAML::EndMap;
  }
  if (p.ranks.empty()) return;
  out << YAML::Key << "ranks" << YAML::Value << YAML::BeginSeq;
  for (const RankScale& r : p.ranks) {
    out << YAML::BeginMap;
    if (r.layers > 0) out << YAML::Key << "layers" << YAML::Value << r.layers;
    if (r.op_overhead_ns) out << YAML::Key << "op_overhead" << YAML::Value << fmt::format("{}ns", *r.op_overhead_ns);
    out << YAML::Key << "per_step" << YAML::Value;
    WriteScale(r.per_step, out);
    out << YAML::Key << "per_microbatch" << YAML::Value;
    WriteScale(r.per_microbatch, out);
    out << YAML::EndMap;
  }
  out << YAML::EndSeq;
}

void WriteLayer(const LayerProfile& l, YAML::Emitter& out) {
  out << YAML::Flow << YAML::BeginMap;
  out << YAML::Key << "forward" << YAML::Value << fmt::format("{}ns", l.forward_ns);
  out << YAML::Key << "backward_input" << YAML::Value << fmt::format("{}ns", l.backward_input_ns);
  out << YAML::Key << "backward_weight" << YAML::Value << fmt::format("{}ns", l.backward_weight_ns);
  out << YAML::Key << "step" << YAML::Value << fmt::format("{}ns", l.step_ns);
  out << YAML::Key << "copy" << YAML::Value << fmt::format("{}ns", l.version_copy_ns);
  out << YAML::Key << "activation_bytes" << YAML::Value << l.activation_bytes;
  out << YAML::Key << "weight_bytes" << YAML::Value << l.weight_bytes;
  out << YAML::Key << "w_stash_bytes" << YAML::Value << l.w_stash_bytes;
  out << YAML::Key << "grad_bytes" << YAML::Value << l.grad_bytes;
  out << YAML::Key << "optimizer_bytes" << YAML::Value << l.optimizer_bytes;
  if (l.workspace_bytes > 0) out << YAML::Key << "workspace_bytes" << YAML::Value << l.workspace_bytes;
  out << YAML::EndMap;
}

}  // namespace

std::string ProfileToYaml(const Profile& profile) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  if (!profile.device.empty()) out << YAML::Key << "device" << YAML::Value << profile.device;
  out << YAML::Key << "microbatch_size" << YAML::Value << profile.microbatch_size;
  out << YAML::Key << "send_bytes" << YAML::Value << profile.send_bytes;
  out << YAML::Key << "layers" << YAML::Value << YAML::BeginSeq;
  for (const LayerProfile& l : profile.layers) WriteLayer(l, out);
  out << YAML::EndSeq;
  if (profile.embedding) WriteLayer(*profile.embedding, out << YAML::Key << "embedding" << YAML::Value);
  if (profile.head) WriteLayer(*profile.head, out << YAML::Key << "head" << YAML::Value);
  WriteCalibration(profile, out);
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

}  // namespace stagecraft::sim
