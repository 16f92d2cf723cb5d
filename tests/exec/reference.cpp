// The sequential reference trainer (see reference.h): forward, loss, backward and optimizers
// written out as plain double loops, and the three weight-staleness semantics on top.
#include "reference.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <numbers>
#include <stdexcept>

namespace stagecraft::testing {
namespace {

using Params = std::vector<LayerParams>;

// GELU, tanh form (Hendrycks & Gimpel, 2016): 0.5 z (1 + tanh(√(2/π)(z + 0.044715 z³))).
constexpr double kGeluC = 0.044715;
const double kSqrt2OverPi = std::sqrt(2.0 / std::numbers::pi);

double Gelu(double z) { return 0.5 * z * (1.0 + std::tanh(kSqrt2OverPi * (z + kGeluC * z * z * z))); }

double GeluDerivative(double z) {
  const double t = std::tanh(kSqrt2OverPi * (z + kGeluC * z * z * z));
  const double du_dz = kSqrt2OverPi * (1.0 + 3.0 * kGeluC * z * z);
  return 0.5 * (1.0 + t) + 0.5 * z * (1.0 - t * t) * du_dz;
}

// The model's activation and its derivative (ReLU: max(z, 0), derivative 1 where z > 0).
double Act(const exec::MlpModel& model, double z) {
  return model.activation == kernels::Activation::kRelu ? std::max(z, 0.0) : Gelu(z);
}
double ActDerivative(const exec::MlpModel& model, double z) {
  return model.activation == kernels::Activation::kRelu ? (z > 0 ? 1.0 : 0.0) : GeluDerivative(z);
}

// What the backward pass needs from the forward: each layer's input and pre-activation.
struct Tape {
  std::vector<std::vector<double>> inputs;  // per layer, [rows*h]
  std::vector<std::vector<double>> z;       // per layer, [rows*h]
  std::vector<double> output;               // [rows*h]
};

Tape Forward(const exec::MlpModel& model, const Params& params, const ReferenceBatch& batch) {
  const int h = model.hidden;
  Tape tape;
  std::vector<double> x = batch.inputs;
  for (const LayerParams& p : params) {
    std::vector<double> z(x.size()), out(x.size());
    for (int r = 0; r < batch.rows; ++r) {
      for (int o = 0; o < h; ++o) {
        double sum = p.bias[o];
        for (int i = 0; i < h; ++i) sum += p.weight[o * h + i] * x[r * h + i];
        z[r * h + o] = sum;
        out[r * h + o] = Act(model, sum) + (model.residual ? x[r * h + o] : 0.0);
      }
    }
    tape.inputs.push_back(std::move(x));
    tape.z.push_back(std::move(z));
    x = std::move(out);
  }
  tape.output = std::move(x);
  return tape;
}

// Mean loss of the microbatch; dy = d(loss)/d(output).
double Loss(const exec::MlpModel& model, const ReferenceBatch& batch, const std::vector<double>& y,
            std::vector<double>* dy) {
  const int h = model.hidden;
  const int rows = batch.rows;
  dy->assign(y.size(), 0.0);
  double total = 0.0;
  if (model.loss == kernels::LossKind::kMse) {
    const double scale = 1.0 / (static_cast<double>(rows) * h);
    for (size_t i = 0; i < y.size(); ++i) {
      const double d = y[i] - batch.targets[i];
      total += d * d * scale;
      (*dy)[i] = 2.0 * d * scale;
    }
    return total;
  }
  for (int r = 0; r < rows; ++r) {
    const int label = static_cast<int>(batch.targets[r]);
    if (label < 0 || label >= h) throw std::invalid_argument("reference: class label out of range");
    const double* yr = y.data() + r * h;
    const double max_y = *std::max_element(yr, yr + h);
    double denom = 0.0;
    for (int c = 0; c < h; ++c) denom += std::exp(yr[c] - max_y);
    total += (std::log(denom) - (yr[label] - max_y)) / rows;
    for (int c = 0; c < h; ++c) {
      const double p = std::exp(yr[c] - max_y) / denom;
      (*dy)[r * h + c] = (p - (c == label ? 1.0 : 0.0)) / rows;
    }
  }
  return total;
}

// Walks the layers backwards from dy, writing every layer's weight and bias gradient.
void Backward(const exec::MlpModel& model, const Params& params, const Tape& tape, int rows,
              std::vector<double> dout, Params* grads) {
  const int h = model.hidden;
  grads->assign(params.size(), LayerParams{});
  for (int l = static_cast<int>(params.size()) - 1; l >= 0; --l) {
    const std::vector<double>& x = tape.inputs[l];
    const std::vector<double>& z = tape.z[l];
    LayerParams& g = (*grads)[l];
    g.weight.assign(static_cast<size_t>(h) * h, 0.0);
    g.bias.assign(h, 0.0);
    std::vector<double> dx(dout.size(), 0.0);
    for (int r = 0; r < rows; ++r) {
      for (int o = 0; o < h; ++o) {
        const double dz = dout[r * h + o] * ActDerivative(model, z[r * h + o]);
        g.bias[o] += dz;
        for (int i = 0; i < h; ++i) {
          g.weight[o * h + i] += dz * x[r * h + i];
          dx[r * h + i] += dz * params[l].weight[o * h + i];
        }
      }
      if (model.residual) {
        for (int i = 0; i < h; ++i) dx[r * h + i] += dout[r * h + i];
      }
    }
    dout = std::move(dx);
  }
}

// torch.optim SGD (momentum, dampening 0) and Adam, one state and update counter per layer.
class Optimizer {
 public:
  Optimizer(const ReferenceConfig& config, const Params& shape)
      : adam_(config.optimizer == "adam"), lr_(config.lr), momentum_(config.momentum) {
    for (const LayerParams& p : shape) {
      LayerParams zero{std::vector<double>(p.weight.size(), 0.0), std::vector<double>(p.bias.size(), 0.0)};
      states_.push_back(State{zero, zero, 0});
    }
  }

  // One update of `layer` at rate `lr`.
  void Update(int layer, const LayerParams& grad, LayerParams* params, double lr) {
    State& s = states_[layer];
    ++s.updates;
    lr_ = lr;
    UpdateTensor(grad.weight, s.updates, &params->weight, &s.first.weight, &s.second.weight);
    UpdateTensor(grad.bias, s.updates, &params->bias, &s.first.bias, &s.second.bias);
  }

 private:
  struct State {
    LayerParams first;   // sgd velocity or adam m
    LayerParams second;  // adam v
    int64_t updates = 0;
  };

  void UpdateTensor(const std::vector<double>& g, int64_t t, std::vector<double>* w, std::vector<double>* first,
                    std::vector<double>* second) const {
    constexpr double kBeta1 = 0.9, kBeta2 = 0.999, kEps = 1e-8;
    const double bias1 = 1.0 - std::pow(kBeta1, static_cast<double>(t));
    const double bias2 = 1.0 - std::pow(kBeta2, static_cast<double>(t));
    for (size_t i = 0; i < g.size(); ++i) {
      if (!adam_) {
        (*first)[i] = momentum_ * (*first)[i] + g[i];
        (*w)[i] -= lr_ * (*first)[i];
        continue;
      }
      (*first)[i] = kBeta1 * (*first)[i] + (1.0 - kBeta1) * g[i];
      (*second)[i] = kBeta2 * (*second)[i] + (1.0 - kBeta2) * g[i] * g[i];
      (*w)[i] -= lr_ * ((*first)[i] / bias1) / (std::sqrt((*second)[i] / bias2) + kEps);
    }
  }

  bool adam_;
  double lr_;
  double momentum_;
  std::vector<State> states_;
};

// The rate of update k (0-based) of a run of `per_step` updates per step (DESIGN.md §10).
double Rate(const ReferenceConfig& c, int64_t k, int64_t per_step) {
  const double w = static_cast<double>(c.warmup_steps * per_step);
  const double total = static_cast<double>(int64_t{c.steps} * per_step);
  const double kd = static_cast<double>(k);
  if (kd < w) return c.lr * (kd + 1.0) / w;
  if (c.decay == "none" || total <= w) return c.lr;
  const double p = std::min(1.0, (kd - w) / (total - w));
  if (c.decay == "linear") return c.min_lr + (c.lr - c.min_lr) * (1.0 - p);
  return c.min_lr + (c.lr - c.min_lr) * 0.5 * (1.0 + std::cos(std::numbers::pi * p));
}

// Stage index of every layer; one stage when layers_per_stage is empty.
std::vector<int> StageOfLayer(const ReferenceConfig& config) {
  const int layers = config.model.layers;
  if (config.layers_per_stage.empty()) return std::vector<int>(layers, 0);
  std::vector<int> stage_of;
  for (size_t s = 0; s < config.layers_per_stage.size(); ++s) {
    if (config.layers_per_stage[s] <= 0) throw std::invalid_argument("reference: a stage has no layers");
    stage_of.insert(stage_of.end(), config.layers_per_stage[s], static_cast<int>(s));
  }
  if (static_cast<int>(stage_of.size()) != layers) {
    throw std::invalid_argument("reference: layers_per_stage does not sum to model.layers");
  }
  return stage_of;
}

void Validate(const ReferenceConfig& config) {
  const exec::MlpModel& m = config.model;
  if (m.layers <= 0 || m.hidden <= 0) throw std::invalid_argument("reference: model needs layers > 0 and hidden > 0");
  if (config.microbatch_size <= 0 || config.microbatches <= 0 || config.steps < 0) {
    throw std::invalid_argument("reference: need microbatch_size > 0, microbatches > 0, steps >= 0");
  }
  if (config.optimizer != "sgd" && config.optimizer != "adam") {
    throw std::invalid_argument("reference: optimizer must be sgd or adam, got " + config.optimizer);
  }
  StageOfLayer(config);
}

// Adds `scale` · b to a, layer by layer.
void Accumulate(const Params& b, double scale, Params* a) {
  if (a->empty()) {
    a->resize(b.size());
    for (size_t l = 0; l < b.size(); ++l) {
      (*a)[l].weight.assign(b[l].weight.size(), 0.0);
      (*a)[l].bias.assign(b[l].bias.size(), 0.0);
    }
  }
  for (size_t l = 0; l < b.size(); ++l) {
    for (size_t i = 0; i < b[l].weight.size(); ++i) (*a)[l].weight[i] += scale * b[l].weight[i];
    for (size_t i = 0; i < b[l].bias.size(); ++i) (*a)[l].bias[i] += scale * b[l].bias[i];
  }
}

// The data microbatch `g` trains on.
int64_t DataOf(const ReferenceConfig& config, int64_t g) {
  return config.dataset_microbatches > 0 ? g % config.dataset_microbatches : g;
}

// One step's mean gradient over its m microbatches, all evaluated at `read`; returns the mean loss.
double StepGradient(const ReferenceConfig& config, int step, const Params& read, Params* mean_grad) {
  const int m = config.microbatches;
  mean_grad->clear();
  double loss = 0.0;
  Params grad;
  for (int k = 0; k < m; ++k) {
    const int64_t g = static_cast<int64_t>(step) * m + k;
    const ReferenceBatch batch = ReferenceMicrobatch(config.model, config.microbatch_size, DataOf(config, g));
    loss += ReferenceLossAndGrad(config.model, read, batch, &grad) / m;
    Accumulate(grad, 1.0 / m, mean_grad);
  }
  return loss;
}

// Flush: step t reads W(t). 2BW: step t reads W(max(t − 1, 0)). Both update once per step.
void TrainPerStep(const ReferenceConfig& config, Params* params, std::vector<double>* losses) {
  Optimizer optimizer(config, *params);
  Params previous = *params;  // W(max(t − 1, 0)) at the top of step t
  Params grad;
  for (int t = 0; t < config.steps; ++t) {
    const bool two_bw = config.staleness == Staleness::kTwoBW;
    losses->push_back(StepGradient(config, t, two_bw ? previous : *params, &grad));
    previous = *params;
    const double lr = Rate(config, t, 1);
    for (size_t l = 0; l < params->size(); ++l) optimizer.Update(static_cast<int>(l), grad[l], &(*params)[l], lr);
  }
}

// PipeDream: microbatch g reads stage s's version max(0, g − (n − s) + 1), then every stage
// applies g's own gradient. Every stage updates once per microbatch, so stage s's version u is
// the stage-s slice of whole-model version u and one history of whole models suffices.
void TrainPipeDream(const ReferenceConfig& config, Params* params, std::vector<double>* losses) {
  const std::vector<int> stage_of = StageOfLayer(config);
  const int64_t n = stage_of.back() + 1;
  const int m = config.microbatches;
  Optimizer optimizer(config, *params);
  std::deque<Params> history{*params};  // versions oldest..newest, newest = g
  int64_t oldest = 0;
  Params grad;
  for (int64_t g = 0; g < static_cast<int64_t>(config.steps) * m; ++g) {
    Params read(params->size());
    for (size_t l = 0; l < params->size(); ++l) {
      const int64_t lag = config.vertical_sync ? n : n - stage_of[l];
      read[l] = history[std::max<int64_t>(0, g - lag + 1) - oldest][l];
    }
    const ReferenceBatch batch = ReferenceMicrobatch(config.model, config.microbatch_size, DataOf(config, g));
    const double loss = ReferenceLossAndGrad(config.model, read, batch, &grad);
    if (g % m == 0) losses->push_back(0.0);
    losses->back() += loss / m;
    const double lr = Rate(config, g, m);
    for (size_t l = 0; l < params->size(); ++l) optimizer.Update(static_cast<int>(l), grad[l], &(*params)[l], lr);
    history.push_back(*params);
    // Microbatch g + 1 reads no version older than max(0, g + 2 − n).
    for (; oldest < std::max<int64_t>(0, g + 2 - n); ++oldest) history.pop_front();
  }
}

// PipeMare: microbatch g's forward reads stage s's version max(0, g − (n − s) + 1), its backward
// the newest weights (version g), moved back by c·δ with the correction; every stage then
// applies g's gradient at its own rate.
void TrainPipeMare(const ReferenceConfig& config, Params* params, std::vector<double>* losses) {
  const std::vector<int> stage_of = StageOfLayer(config);
  const int64_t n = stage_of.back() + 1;
  const int m = config.microbatches;
  Optimizer optimizer(config, *params);
  std::deque<Params> history{*params};
  int64_t oldest = 0;
  Params velocity = *params;
  for (LayerParams& v : velocity) {
    std::fill(v.weight.begin(), v.weight.end(), 0.0);
    std::fill(v.bias.begin(), v.bias.end(), 0.0);
  }
  Params grad;
  for (int64_t g = 0; g < static_cast<int64_t>(config.steps) * m; ++g) {
    Params read(params->size()), back = *params;
    for (size_t l = 0; l < params->size(); ++l) {
      const int64_t lag = n - 1 - stage_of[l];
      read[l] = history[std::max<int64_t>(0, g - lag) - oldest][l];
      if (!config.correction) continue;
      const double c = static_cast<double>(std::min(g, lag));
      for (size_t i = 0; i < back[l].weight.size(); ++i) back[l].weight[i] -= c * velocity[l].weight[i];
      for (size_t i = 0; i < back[l].bias.size(); ++i) back[l].bias[i] -= c * velocity[l].bias[i];
    }
    const ReferenceBatch batch = ReferenceMicrobatch(config.model, config.microbatch_size, DataOf(config, g));
    const Tape tape = Forward(config.model, read, batch);
    std::vector<double> dy;
    const double loss = Loss(config.model, batch, tape.output, &dy);
    Backward(config.model, back, tape, batch.rows, std::move(dy), &grad);
    if (g % m == 0) losses->push_back(0.0);
    losses->back() += loss / m;
    const Params before = *params;
    for (size_t l = 0; l < params->size(); ++l) {
      double lr = Rate(config, g, m);
      const double tau = static_cast<double>(std::max<int64_t>(n - 1 - stage_of[l], 1));
      if (config.lr_reschedule_steps > 0) {
        const double k = static_cast<double>(g) / m;
        lr /= std::pow(tau, 1.0 - std::min(k / static_cast<double>(config.lr_reschedule_steps), 1.0));
      }
      optimizer.Update(static_cast<int>(l), grad[l], &(*params)[l], lr);
      const double gamma = config.correction_decay;
      for (size_t i = 0; i < velocity[l].weight.size(); ++i) {
        velocity[l].weight[i] = gamma * velocity[l].weight[i] + (1 - gamma) * ((*params)[l].weight[i] - before[l].weight[i]);
      }
      for (size_t i = 0; i < velocity[l].bias.size(); ++i) {
        velocity[l].bias[i] = gamma * velocity[l].bias[i] + (1 - gamma) * ((*params)[l].bias[i] - before[l].bias[i]);
      }
    }
    history.push_back(*params);
    for (; oldest < std::max<int64_t>(0, g + 2 - n); ++oldest) history.pop_front();
  }
}

}  // namespace

std::vector<LayerParams> ReferenceInitialParams(const exec::MlpModel& model) {
  const int h = model.hidden;
  std::vector<LayerParams> params(model.layers);
  std::vector<float> w(static_cast<size_t>(h) * h), b(h);
  for (int l = 0; l < model.layers; ++l) {
    exec::InitLayer(model, l, w.data(), b.data());
    params[l].weight.assign(w.begin(), w.end());
    params[l].bias.assign(b.begin(), b.end());
  }
  return params;
}

ReferenceBatch ReferenceMicrobatch(const exec::MlpModel& model, int rows, int64_t g) {
  std::vector<float> x(static_cast<size_t>(rows) * model.hidden);
  std::vector<float> t(exec::TargetFloats(model, rows));
  exec::MicrobatchInput(model, rows, g, x.data());
  exec::MicrobatchTarget(model, rows, g, t.data());
  return ReferenceBatch{rows, std::vector<double>(x.begin(), x.end()), std::vector<double>(t.begin(), t.end())};
}

double ReferenceLossAndGrad(const exec::MlpModel& model, const std::vector<LayerParams>& params,
                            const ReferenceBatch& batch, std::vector<LayerParams>* grads) {
  const Tape tape = Forward(model, params, batch);
  std::vector<double> dy;
  const double loss = Loss(model, batch, tape.output, &dy);
  if (grads != nullptr) Backward(model, params, tape, batch.rows, std::move(dy), grads);
  return loss;
}

ReferenceResult TrainReference(const ReferenceConfig& config) {
  Validate(config);
  Params params = ReferenceInitialParams(config.model);
  ReferenceResult result;
  if (config.staleness == Staleness::kPipeDream) {
    TrainPipeDream(config, &params, &result.losses);
  } else if (config.staleness == Staleness::kPipeMare) {
    TrainPipeMare(config, &params, &result.losses);
  } else {
    TrainPerStep(config, &params, &result.losses);
  }
  for (LayerParams& p : params) {
    result.weights.push_back(std::move(p.weight));
    result.biases.push_back(std::move(p.bias));
  }
  return result;
}

}  // namespace stagecraft::testing
