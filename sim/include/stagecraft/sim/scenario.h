// A scenario (DESIGN.md §3): the machine, the model or its costs, the pipeline and, for the
// executor, training. Loaded from YAML with every value checked; the structs here are plain
// data so that no header outside sim/src sees yaml-cpp.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "stagecraft/base/error.h"
#include "stagecraft/schedules/generators.h"
#include "stagecraft/schedules/lower.h"

namespace stagecraft::sim {

struct DeviceSpec {
  std::string name;
  double peak_flops = 0;     // FLOP/s at the model's dtype ("989TFLOPS")
  int64_t memory_bytes = 0;  // device memory ("80GiB")
  double efficiency = 1.0;   // achieved fraction of peak, in (0, 1]
};

// One dimension of a per-dimension topology: "node" links a device to its node's switch,
// "cluster" links a device to the cluster switch. `latency_ns` is device to device (DESIGN §3).
struct LinkSpec {
  std::string scope;  // "node" | "cluster"
  double bandwidth_bytes_per_s = 0;
  int64_t latency_ns = 0;
};

// Explicit graph form: named vertices and full-duplex links between them.
enum class VertexKind { kDevice, kSwitch };
struct VertexSpec {
  std::string name;
  VertexKind kind = VertexKind::kDevice;
};
struct GraphLinkSpec {
  std::string a, b;  // vertex names
  double bandwidth_bytes_per_s = 0;
  int64_t latency_ns = 0;  // one traversal of this link
};

// Either per-dimension (nodes x devices_per_node + `links` by scope) or an explicit graph
// (`vertices` non-empty; devices are the device vertices in the order listed).
struct TopologySpec {
  DeviceSpec device;
  int nodes = 1;
  int devices_per_node = 1;
  std::vector<LinkSpec> links;
  std::vector<VertexSpec> vertices;
  std::vector<GraphLinkSpec> graph_links;

  bool explicit_graph() const { return !vertices.empty(); }
  int devices() const;  // nodes * devices_per_node, or the number of device vertices
};

struct TransformerSpec {
  int layers = 0;
  int hidden = 0;
  int heads = 0;
  int seq = 0;
  int vocab = 0;
  std::string dtype = "bf16";  // "bf16" | "fp16" | "fp32"
};

// The executor's network: per layer Linear(hidden, hidden) + bias -> GELU, fp32.
struct MlpSpec {
  int layers = 0;
  int hidden = 0;
  bool residual = false;
  std::string activation = "gelu";  // "gelu" | "relu"
  std::string loss = "mse";         // "mse" | "cross_entropy"
};

// Explicit per-rank, per-microbatch costs of that rank's whole share of the model. In YAML each
// of forward .. weight_bytes is a scalar (every rank) or a list of exactly `ranks` entries.
struct ExplicitCosts {
  std::vector<int64_t> forward_ns;
  std::vector<int64_t> backward_input_ns;
  std::vector<int64_t> backward_weight_ns;
  std::vector<int64_t> activation_bytes;
  std::vector<int64_t> weight_bytes;
  int64_t p2p_latency_ns = 0;  // added per hop
  // Activation/gradient size sent between neighbouring stages per microbatch; 0 = unknown,
  // a transfer then costs its latency only.
  int64_t send_bytes = 0;
};

struct ModelSpec {
  std::optional<TransformerSpec> transformer;
  std::optional<MlpSpec> mlp;
  std::optional<ExplicitCosts> costs;
  // A profile written by `stagecraft profile` (format in costs.h). Paths in the scenario file
  // resolve against the scenario's directory; a path given through --set against the
  // current directory. Empty when none.
  std::string profile_path;
};

struct PipelineSpec {
  // Generator names or schedule files (a name ending in ".csv": a torch.distributed.pipelining
  // order, one step of it, imported as `stagecraft schedule --import` reads it), or the single
  // entry "all".
  std::vector<std::string> schedules;
  std::map<std::string, std::string> schedule_files;  // a file's name as written -> its resolved path
  int ranks = 0;
  int chunks = 1;
  int microbatches = 0;
  int microbatch_size = 1;
  int steps = 1;
  bool recompute = false;
  bool vertical_sync = false;
  // How layers are split over the stages: "even" by count, or "balanced" by cost (the
  // profile's measured per-layer times, else the analytical model's FLOPs); see costs.h.
  std::string partition = "even";
  // How receives are posted (schedules/lower.h): ahead (default) or lockstep.
  schedules::P2p p2p = schedules::P2p::kAhead;
};

struct TrainingSpec {
  std::string optimizer = "sgd";  // "sgd" | "adam"
  double lr = 0;
  double momentum = 0.9;  // sgd only
  int64_t seed = 1;
  std::string dtype = "fp32";  // "fp32" | "bf16" | "fp16"
  // training.loss_scale: a power of two from 1 to 2^24 (exec::TrainingConfig::loss_scale); 0:
  // not given (4096 for fp16, else 1).
  double loss_scale = 0;
  // training.data: a token file the transformer trains on (llm.c's .bin shards, or any other
  // file as text tokenized by bytes), resolved like model.profile; empty: synthetic tokens.
  std::string data_path;
};

struct Scenario {
  std::string name;
  std::string path;  // the scenario file as given
  TopologySpec topology;
  ModelSpec model;
  PipelineSpec pipeline;
  TrainingSpec training;
  bool has_training = false;
};

// Loads and validates a scenario. `overrides` are "--set" values "key.path=value" (the value
// parsed as YAML, so "pipeline.schedule=[gpipe, 1f1b]" works; a list entry is addressed by its
// index, "topology.links.0.latency=3us"), applied in order to the YAML tree before validation.
// Every problem throws stagecraft::InputError: "file:line:col: key.path: what, expected form",
// "--set key.path: ..." for a value that came from an override, "path: cannot read: REASON" for a
// file (read through stagecraft::ReadInputFile, at most kMaxYamlBytes, one YAML document). Every
// value is checked against its range (limits.h); then the cost table of each schedule named is
// built (each derived op time and size within its limit) and the run's simulated time bounded
// (run_bound.h), so that a scenario the simulator would refuse is refused here, before any
// schedule is built.
// `topology:` may be a file name (relative to the scenario file, or to the current directory
// when given through --set); errors inside it name that file.
Scenario LoadScenario(const std::string& path, const std::vector<std::string>& overrides = {});
// The same from the file's text: `path` names it in errors and is the base of its relative
// file names.
Scenario LoadScenarioFromText(std::string_view text, const std::string& path,
                              const std::vector<std::string>& overrides = {});

// The generator parameters of one schedule of `pipeline`, used both to check the scenario and
// to run it. pipeline.chunks is the interleaved schedule's virtual stages per rank; the other
// schedules run one stage per rank. Under `schedule: all`, interleaved takes 2 chunks when
// pipeline.chunks is 1, and vertical_sync reaches pipedream only.
schedules::GeneratorParams GeneratorParamsFor(const PipelineSpec& pipeline, const schedules::GeneratorInfo& info);

}  // namespace stagecraft::sim
