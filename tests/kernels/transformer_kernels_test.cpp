// Tests for the transformer's host kernels (layernorm.h, attention.h, embedding.h through
// host.h) against references written from the definitions in double: LayerNorm and the causal
// softmax forward; their backwards against central finite differences of the double forward;
// the head layouts and the embeddings on hand-worked indices.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "finite_difference.h"
#include "stagecraft/kernels/host.h"

namespace stagecraft::kernels {
namespace {

std::vector<float> Random(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

// LayerNorm of one row in double, from its definition (eps 1e-5, biased variance).
std::vector<double> LayerNormRef(const std::vector<double>& x, const std::vector<float>& g, const std::vector<float>& b) {
  const size_t n = x.size();
  double mu = 0, var = 0;
  for (double v : x) mu += v;
  mu /= static_cast<double>(n);
  for (double v : x) var += (v - mu) * (v - mu);
  var /= static_cast<double>(n);
  std::vector<double> out(n);
  for (size_t c = 0; c < n; ++c) out[c] = (x[c] - mu) / std::sqrt(var + 1e-5) * g[c] + b[c];
  return out;
}

using testing::CentralDifferences;

TEST(LayerNormKernel, ForwardMatchesTheDefinitionAndBackwardsMatchFiniteDifferences) {
  constexpr int kRows = 3, kCols = 37;  // not a multiple of any vector width
  const auto x = Random(kRows * kCols, 1, 2.0f), gamma = Random(kCols, 2), beta = Random(kCols, 3),
             dout = Random(kRows * kCols, 4);
  std::vector<float> out(kRows * kCols), mean(kRows), rstd(kRows);
  LayerNorm(kRows, kCols, x.data(), gamma.data(), beta.data(), out.data(), mean.data(), rstd.data());
  std::vector<float> dx(kRows * kCols, 0.5f), dgamma(kCols), dbeta(kCols);
  LayerNormBackwardInput(kRows, kCols, dout.data(), x.data(), gamma.data(), mean.data(), rstd.data(), dx.data(), true);
  LayerNormBackwardWeight(kRows, kCols, dout.data(), x.data(), mean.data(), rstd.data(), dgamma.data(), dbeta.data(),
                          false);
  std::vector<double> ref_dgamma(kCols, 0.0), ref_dbeta(kCols, 0.0);
  for (int r = 0; r < kRows; ++r) {
    std::vector<double> row(x.begin() + r * kCols, x.begin() + (r + 1) * kCols);
    const auto ref = LayerNormRef(row, gamma, beta);
    for (int c = 0; c < kCols; ++c) EXPECT_NEAR(out[r * kCols + c], ref[c], 2e-6 * (1 + std::abs(ref[c])));
    // d/dx of Σ dout·LN(x) for this row; dx was 0.5 before (accumulate).
    const auto grad = CentralDifferences(row, [&](const std::vector<double>& v) {
      const auto y = LayerNormRef(v, gamma, beta);
      double s = 0;
      for (int c = 0; c < kCols; ++c) s += y[c] * dout[r * kCols + c];
      return s;
    });
    for (int c = 0; c < kCols; ++c) EXPECT_NEAR(dx[r * kCols + c] - 0.5f, grad[c], 1e-4) << r << "," << c;
    // dγ and dβ by the definition of x̂ in double.
    double mu = 0, var = 0;
    for (double v : row) mu += v;
    mu /= kCols;
    for (double v : row) var += (v - mu) * (v - mu);
    var /= kCols;
    for (int c = 0; c < kCols; ++c) {
      ref_dgamma[c] += dout[r * kCols + c] * (row[c] - mu) / std::sqrt(var + 1e-5);
      ref_dbeta[c] += dout[r * kCols + c];
    }
  }
  for (int c = 0; c < kCols; ++c) {
    EXPECT_NEAR(dgamma[c], ref_dgamma[c], 1e-5 * (1 + std::abs(ref_dgamma[c])));
    EXPECT_NEAR(dbeta[c], ref_dbeta[c], 1e-5 * (1 + std::abs(ref_dbeta[c])));
  }
}

TEST(CausalSoftmaxKernel, EachRowSeesOnlyItselfAndEarlierTokensAndTheBackwardMatchesFiniteDifferences) {
  constexpr int kMatrices = 2, kSeq = 11;
  const auto scores = Random(kMatrices * kSeq * kSeq, 5, 3.0f);
  const auto dp = Random(kMatrices * kSeq * kSeq, 6);
  std::vector<float> p = scores;
  CausalSoftmax(kMatrices, kSeq, p.data());
  std::vector<float> ds = dp;
  CausalSoftmaxBackward(kMatrices, kSeq, p.data(), ds.data());
  for (int i = 0; i < kMatrices; ++i) {
    for (int t = 0; t < kSeq; ++t) {
      const int64_t at = (static_cast<int64_t>(i) * kSeq + t) * kSeq;
      const std::vector<double> row(scores.begin() + at, scores.begin() + at + t + 1);
      auto softmax = [&](const std::vector<double>& s) {
        double mx = s[0], sum = 0;
        for (double v : s) mx = std::max(mx, v);
        std::vector<double> e(s.size());
        for (size_t j = 0; j < s.size(); ++j) sum += e[j] = std::exp(s[j] - mx);
        for (double& v : e) v /= sum;
        return e;
      };
      const auto ref = softmax(row);
      for (int j = 0; j <= t; ++j) EXPECT_NEAR(p[at + j], ref[j], 1e-6);
      for (int j = t + 1; j < kSeq; ++j) {
        EXPECT_EQ(p[at + j], 0.0f);
        EXPECT_EQ(ds[at + j], 0.0f);
      }
      const auto grad = CentralDifferences(row, [&](const std::vector<double>& s) {
        const auto e = softmax(s);
        double sum = 0;
        for (size_t j = 0; j < e.size(); ++j) sum += e[j] * dp[at + j];
        return sum;
      });
      for (int j = 0; j <= t; ++j) EXPECT_NEAR(ds[at + j], grad[j], 1e-5) << i << "," << t << "," << j;
    }
  }
}

TEST(HeadLayouts, HeadsFromRowsPicksEachHeadsColumnsAndRowsFromHeadsPutsThemBack) {
  constexpr int kBatch = 2, kSeq = 3, kHeads = 2, kHeadDim = 4, kLd = 3 * kHeads * kHeadDim;  // a qkv row
  std::vector<float> rows(kBatch * kSeq * kLd);
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<float>(i);
  std::vector<float> k(kBatch * kHeads * kSeq * kHeadDim);
  // k starts at column C = heads · head_dim of each row.
  HeadsFromRows(kBatch, kSeq, kHeads, kHeadDim, rows.data() + kHeads * kHeadDim, kLd, k.data());
  // Hand-worked: element (b = 1, h = 1, t = 2, d = 3) of k is row b·T + t = 5, column C + h·hd + d = 8 + 4 + 3.
  EXPECT_EQ(k[((1 * kHeads + 1) * kSeq + 2) * kHeadDim + 3], static_cast<float>(5 * kLd + 15));
  EXPECT_EQ(k[0], static_cast<float>(8));
  std::vector<float> back(rows.size(), -1.0f);
  RowsFromHeads(kBatch, kSeq, kHeads, kHeadDim, k.data(), back.data() + kHeads * kHeadDim, kLd);
  for (int r = 0; r < kBatch * kSeq; ++r) {
    for (int c = 0; c < kLd; ++c) {
      const bool is_k = c >= kHeads * kHeadDim && c < 2 * kHeads * kHeadDim;
      EXPECT_EQ(back[r * kLd + c], is_k ? rows[r * kLd + c] : -1.0f) << r << "," << c;
    }
  }
}

TEST(EmbeddingKernel, SumsTokenAndPositionRowsAndScattersGradientsToBoth) {
  constexpr int kBatch = 2, kSeq = 2, kCols = 3, kVocab = 4;
  const std::vector<float> tokens = {3, 1, 1, 0};  // token 1 twice, token 2 never
  std::vector<float> wte(kVocab * kCols), wpe(kSeq * kCols);
  for (int i = 0; i < kVocab * kCols; ++i) wte[i] = static_cast<float>(10 * i);
  for (int i = 0; i < kSeq * kCols; ++i) wpe[i] = static_cast<float>(i);
  std::vector<float> out(kBatch * kSeq * kCols);
  Embedding(kBatch, kSeq, kCols, tokens.data(), wte.data(), wpe.data(), out.data());
  // (b = 1, t = 0) is token 1 at position 0: wte[1] = 30, 40, 50 plus wpe[0] = 0, 1, 2.
  EXPECT_EQ(out[2 * kCols + 0], 30.0f);
  EXPECT_EQ(out[2 * kCols + 2], 52.0f);
  std::vector<float> dout(out.size());
  for (size_t i = 0; i < dout.size(); ++i) dout[i] = static_cast<float>(i + 1);
  std::vector<float> dwte(wte.size(), 7.0f), dwpe(wpe.size(), 7.0f);  // written over, not added to
  EmbeddingBackward(kBatch, kSeq, kCols, kVocab, tokens.data(), dout.data(), dwte.data(), dwpe.data(), false);
  // Token 1 is at rows 1 and 2: dout rows 4,5,6 and 7,8,9.
  EXPECT_EQ(dwte[1 * kCols + 0], 4.0f + 7.0f);
  EXPECT_EQ(dwte[2 * kCols + 1], 0.0f);
  EXPECT_EQ(dwte[3 * kCols + 2], 3.0f);
  // Position 1 is rows 1 and 3: dout 4,5,6 and 10,11,12.
  EXPECT_EQ(dwpe[1 * kCols + 2], 6.0f + 12.0f);
  EmbeddingBackward(kBatch, kSeq, kCols, kVocab, tokens.data(), dout.data(), dwte.data(), dwpe.data(), true);
  EXPECT_EQ(dwpe[1 * kCols + 2], 2 * (6.0f + 12.0f));
}

TEST(BiasAddKernel, AddsTheBiasPerColumnAndTheResidual) {
  std::vector<float> x = {1, 2, 3, 4, 5, 6};
  const std::vector<float> bias = {10, 20, 30}, res = {1, 1, 1, 2, 2, 2};
  BiasAdd(2, 3, x.data(), bias.data(), res.data());
  EXPECT_EQ(x, (std::vector<float>{12, 23, 34, 16, 27, 38}));
  BiasAdd(2, 3, x.data(), bias.data(), nullptr);
  EXPECT_EQ(x[5], 68.0f);
}

// x = [1 2] + ([0.5 -0.5] + [0.5 -0.5]) = [2 1]: mean 1.5, variance 0.25, rstd 1/√(0.25 + 1e-5);
// with γ = [2 1], β = [0 1]: out = [0.5·rstd·2, -0.5·rstd + 1].
TEST(ResidualLayerNormKernel, UpdatesTheStreamThenNormalisesIt) {
  std::vector<float> x = {1, 2}, out(2), mean(1), rstd(1);
  const std::vector<float> bias = {0.5f, -0.5f}, res = {0.5f, -0.5f}, gamma = {2, 1}, beta = {0, 1};
  ResidualLayerNorm(1, 2, x.data(), bias.data(), res.data(), gamma.data(), beta.data(), out.data(), mean.data(),
                    rstd.data());
  const double r = 1 / std::sqrt(0.25 + 1e-5);
  EXPECT_EQ(x, (std::vector<float>{2, 1}));
  EXPECT_FLOAT_EQ(mean[0], 1.5f);
  EXPECT_NEAR(rstd[0], r, 1e-5);
  EXPECT_NEAR(out[0], r, 1e-5);
  EXPECT_NEAR(out[1], 1 - 0.5 * r, 1e-5);
}

}  // namespace
}  // namespace stagecraft::kernels
