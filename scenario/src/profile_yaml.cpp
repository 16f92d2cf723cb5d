// The profile file format (profile_yaml.h): read with every value checked against its range
// (limits.h) and written back with exact integers.
#include "stagecraft/scenario/profile_yaml.h"

#include <fmt/format.h>

#include "stagecraft/base/error.h"
#include "stagecraft/scenario/limits.h"
#include "yaml_util.h"

namespace stagecraft::sim {

namespace {

using yaml::Map;
using yaml::Value;

OpScale ReadScale(const Value& v, const OpScale& defaults) {
  const Map m(v, {"forward", "backward", "backward_input", "backward_weight", "step"});
  OpScale scale = defaults;
  for (const auto& [key, field] : kOpScaleFields) {
    if (const auto x = m.Find(key)) scale.*field = x->Double(0, kMaxOpScale);
  }
  return scale;
}

StashScale ReadStash(const Value& v) {
  const Map m(v, {"deep", "forward", "backward", "backward_input", "backward_weight"});
  StashScale stash;
  stash.deep = m.Get("deep").DoubleIn(0, kMaxStashDepth, "a depth in microbatches");
  for (const auto& [key, field] : kStashFields) {
    if (const auto x = m.Find(key)) {
      const Map k(*x, {"at", "slope"});
      (stash.*field).at = k.Get("at").DoubleIn(0, kMaxStashDepth, "a depth in microbatches");
      (stash.*field).slope = k.Get("slope").DoubleIn(0, kMaxStashSlope, "a relative time per microbatch");
    }
  }
  return stash;
}

// The optional measurements beyond the layers (profile.h).
void ReadCalibration(const Map& m, Profile* p) {
  if (const auto v = m.Find("input_copy")) p->input_copy_ns = v->DurationNs();
  if (const auto v = m.Find("loss")) p->loss_ns = v->DurationNs();
  if (const auto v = m.Find("op_overhead")) p->op_overhead_ns = v->DurationNs();
  if (const auto v = m.Find("op_time_cv")) p->op_time_cv = v->DoubleIn(0, kMaxOpTimeCv, "a coefficient of variation");
  if (const auto v = m.Find("p2p")) {
    const Map link(*v, {"latency", "bandwidth", "overlap", "in_pipeline_bandwidth"});
    P2pFit fit;
    fit.latency_ns = link.Get("latency").DurationNs();
    fit.bytes_per_s = link.Get("bandwidth").Bandwidth();
    if (const auto o = link.Find("overlap")) fit.overlap = o->DoubleIn(0, 1, "a fraction");
    if (const auto b = link.Find("in_pipeline_bandwidth")) fit.pipeline_bytes_per_s = b->Bandwidth();
    p->p2p = fit;
  }
  if (const auto v = m.Find("allreduce")) {
    const Map ring(*v, {"latency", "bus_bandwidth", "ranks", "in_pipeline_bus_bandwidth"});
    CollectiveFit fit;
    fit.latency_ns = ring.Get("latency").DurationNs();
    fit.bus_bytes_per_s = ring.Get("bus_bandwidth").Bandwidth();
    fit.ranks = static_cast<int>(ring.Get("ranks").Int(2, kMaxRanks));  // one rank has no all-reduce to fit
    if (const auto b = ring.Find("in_pipeline_bus_bandwidth")) fit.pipeline_bus_bytes_per_s = b->Bandwidth();
    p->allreduce = fit;
  }
  if (const auto v = m.Find("ranks")) {
    if (v->IsSequence() && v->node().size() > static_cast<size_t>(kMaxRanks)) {
      v->Fail(fmt::format("expected at most 2^16 ranks, got {}", v->node().size()));
    }
    for (const Value& element : v->Elements()) {
      const Map r(element, {"layers", "op_overhead", "per_step", "per_microbatch", "stash"});
      RankScale scale;
      if (const auto x = r.Find("op_overhead")) scale.op_overhead_ns = x->DurationNs();
      if (const auto x = r.Find("layers")) scale.layers = static_cast<int>(x->Int(1, kMaxLayers));
      if (const auto x = r.Find("per_step")) scale.per_step = ReadScale(*x, OpScale{});
      scale.per_microbatch = scale.per_step;
      if (const auto x = r.Find("per_microbatch")) scale.per_microbatch = ReadScale(*x, scale.per_step);
      if (const auto x = r.Find("stash")) scale.stash = ReadStash(*x);
      p->ranks.push_back(scale);
    }
  }
}

// One layer's measurements (also the embedding's and the head's).
LayerProfile ReadLayer(const Value& element) {
  const Map l(element, {"forward", "backward_input", "backward_weight", "step", "copy", "activation_bytes",
                        "weight_bytes", "w_stash_bytes", "grad_bytes", "optimizer_bytes", "workspace_bytes",
                        "correction", "velocity"});
  LayerProfile layer;
  layer.forward_ns = l.Get("forward").DurationNs();
  layer.backward_input_ns = l.Get("backward_input").DurationNs();
  layer.backward_weight_ns = l.Get("backward_weight").DurationNs();
  if (const auto v = l.Find("step")) layer.step_ns = v->DurationNs();
  if (const auto v = l.Find("copy")) layer.version_copy_ns = v->DurationNs();
  layer.activation_bytes = l.Get("activation_bytes").Bytes();
  layer.weight_bytes = l.Get("weight_bytes").Bytes();
  if (const auto v = l.Find("w_stash_bytes")) layer.w_stash_bytes = v->Bytes();
  layer.grad_bytes = layer.weight_bytes;
  if (const auto v = l.Find("grad_bytes")) layer.grad_bytes = v->Bytes();
  if (const auto v = l.Find("optimizer_bytes")) layer.optimizer_bytes = v->Bytes();
  if (const auto v = l.Find("workspace_bytes")) layer.workspace_bytes = v->Bytes();
  if (const auto v = l.Find("correction")) layer.correction_ns = v->DurationNs();
  if (const auto v = l.Find("velocity")) layer.velocity_ns = v->DurationNs();
  return layer;
}

// Parses a profile (`path` names it in errors).
Profile ParseProfile(std::string_view text, const std::string& path) {
  const Value root(yaml::LoadText(text, path), "", yaml::Origin{path, yaml::DirOf(path), -1, false}, nullptr);
  const Map m(root, {"device", "microbatch_size", "send_bytes", "layers", "embedding", "head", "input_copy", "loss",
                     "op_overhead", "op_time_cv", "p2p", "allreduce", "ranks"});
  Profile p;
  if (const auto device = m.Find("device")) p.device = device->String();
  const Value microbatch_size = m.Get("microbatch_size");
  p.microbatch_size = static_cast<int>(microbatch_size.Int(1, kMaxMicrobatchSize));
  if (const auto send = m.Find("send_bytes")) p.send_bytes = send->Bytes();
  const Value layers = m.Get("layers");
  if (layers.IsSequence() && layers.node().size() > static_cast<size_t>(kMaxLayers)) {
    layers.Fail(fmt::format("expected at most 2^20 layers, got {}", layers.node().size()));
  }
  for (const Value& element : layers.Elements()) p.layers.push_back(ReadLayer(element));
  if (const auto v = m.Find("embedding")) p.embedding = ReadLayer(*v);
  if (const auto v = m.Find("head")) p.head = ReadLayer(*v);
  if (p.layers.empty()) layers.Fail("expected at least one layer");
  ReadCalibration(m, &p);
  return p;
}

}  // namespace

Profile LoadProfile(const std::string& path) { return ParseProfile(yaml::ReadFile(path, "a profile"), path); }

Profile ProfileFromYaml(std::string_view text, const std::string& source) { return ParseProfile(text, source); }

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
  if (p.allreduce) {
    out << YAML::Key << "allreduce" << YAML::Value << YAML::Flow << YAML::BeginMap;
    out << YAML::Key << "latency" << YAML::Value << fmt::format("{}ns", p.allreduce->latency_ns);
    out << YAML::Key << "bus_bandwidth" << YAML::Value << fmt::format("{:.0f}B/s", p.allreduce->bus_bytes_per_s);
    out << YAML::Key << "ranks" << YAML::Value << p.allreduce->ranks;
    if (p.allreduce->pipeline_bus_bytes_per_s > 0) {
      out << YAML::Key << "in_pipeline_bus_bandwidth" << YAML::Value
          << fmt::format("{:.0f}B/s", p.allreduce->pipeline_bus_bytes_per_s);
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
    if (r.stash) {
      out << YAML::Key << "stash" << YAML::Value << YAML::Flow << YAML::BeginMap;
      out << YAML::Key << "deep" << YAML::Value << fmt::format("{:.4f}", r.stash->deep);
      for (const auto& [key, field] : kStashFields) {
        const StashSlope& k = (*r.stash).*field;
        out << YAML::Key << key << YAML::Value << YAML::Flow << YAML::BeginMap;
        out << YAML::Key << "at" << YAML::Value << fmt::format("{:.4f}", k.at);
        out << YAML::Key << "slope" << YAML::Value << fmt::format("{:.6f}", k.slope);
        out << YAML::EndMap;
      }
      out << YAML::EndMap;
    }
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
  if (l.correction_ns > 0) out << YAML::Key << "correction" << YAML::Value << fmt::format("{}ns", l.correction_ns);
  if (l.velocity_ns > 0) out << YAML::Key << "velocity" << YAML::Value << fmt::format("{}ns", l.velocity_ns);
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
