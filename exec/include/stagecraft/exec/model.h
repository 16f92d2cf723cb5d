// The network the executor trains and its synthetic data, defined so that any rank (and a
// sequential reference) can rebuild any layer's initial weights and any microbatch's data
// from the seed alone, with no communication.
//
// Network: `layers` blocks of Linear(h, h) + bias -> GELU (tanh form, kernels/activation.h),
// each optionally residual (out = x + gelu(x Wᵀ + b)), then the loss (mse or cross_entropy over
// h classes). Weights are row-major [out][in].
//
// Initial weights: W[o][i] = √(6/h) · U(seed, kWeightStream + layer, o·h + i), bias 0, where
// U(seed, stream, index) is a counter-based uniform in [−1, 1) (splitmix64; see model.cpp).
//
// Data: microbatch g (global index step·m + k) has inputs x[r][c] = U(seed, kInputStream,
// g·b·h + r·h + c) for b = microbatch_size rows. A fixed teacher, one Linear(h, h) + bias ->
// GELU block with W_t[o][i] = 2·√(3/h) · U(seed, kTeacherStream, o·h + i) and bias
// b_t[o] = 0.1 · U(seed, kTeacherStream + 1, o), gives the targets: mse regresses teacher(x);
// cross_entropy classifies into argmax_c teacher(x)[c] (labels stored as floats).
//
// Real data instead (training.data, a labelled set: LoadLabeledSet): microbatch g is rows
// (g·b + r) mod N of the set's N, in the file's order, its features in the first columns of x
// (the rest 0) and its label the target (cross_entropy only).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "stagecraft/kernels/host.h"

namespace stagecraft::exec {

inline constexpr uint64_t kWeightStream = 1000;  // + layer index
inline constexpr uint64_t kInputStream = 1;
inline constexpr uint64_t kTeacherStream = 2;    // and kTeacherStream + 1 for the bias

// A classification set read from training.data: N rows of `hidden` floats (each feature
// standardised over the set, then zero-padded to the MLP's width) and a class per row.
struct LabeledSet {
  int64_t rows = 0;
  int features = 0;           // columns of the file before its label
  std::vector<float> x;       // [rows * hidden]
  std::vector<float> labels;  // [rows], class indices as floats
  // The set's row that row r of microbatch g (of `per` rows) takes: the rows in order, round again.
  int64_t RowOf(int64_t g, int per, int r) const { return (g * per + r) % rows; }
};

// Reads a CSV of numbers (gzip-compressed or plain; an optional header line of names), one row
// per sample: its features, then its class, an integer in [0, hidden); features beyond `hidden`
// or a class outside it are an InputError naming the file and line, as is a row of another width.
std::shared_ptr<const LabeledSet> LoadLabeledSet(const std::string& path, int hidden);

struct MlpModel {
  int layers = 0;
  int hidden = 0;
  bool residual = false;
  kernels::Activation activation = kernels::Activation::kGelu;
  kernels::LossKind loss = kernels::LossKind::kMse;
  uint64_t seed = 1;
  std::shared_ptr<const LabeledSet> data = nullptr;  // training.data; null: the teacher's synthetic data
};

// Counter-based uniform in [−1, 1): the same value for the same (seed, stream, index) on
// every rank and in every run.
float UniformAt(uint64_t seed, uint64_t stream, uint64_t index);

// Initial weights of `layer`: weight [h*h], bias [h].
void InitLayer(const MlpModel& model, int layer, float* weight, float* bias);

// Inputs [rows*h] of global microbatch `g`.
void MicrobatchInput(const MlpModel& model, int rows, int64_t g, float* x);

// Targets of global microbatch `g`: [rows*h] for mse, [rows] class indices for cross_entropy
// (the first of equal maxima). One teacher forward: a GEMM (BLAS) of rows·h² multiply-adds, as
// the executor's dataset computes it on the cpu device (runtime.h TeacherTargets).
void MicrobatchTarget(const MlpModel& model, int rows, int64_t g, float* targets);
// The same for microbatches first .. first + count − 1, back to back (the teacher built once);
// `after_each`, when given, is called after each microbatch (set-up progress).
void MicrobatchTargets(const MlpModel& model, int rows, int64_t first, int64_t count, float* targets,
                       const std::function<void()>& after_each = {});

// Number of target floats per microbatch.
inline int64_t TargetFloats(const MlpModel& model, int rows) {
  return model.loss == kernels::LossKind::kMse ? static_cast<int64_t>(rows) * model.hidden : rows;
}

}  // namespace stagecraft::exec
