// Tests for the transformer's CUDA launchers (cuda.h's second block: bias add, LayerNorm and its
// gradients, the head layouts, the causal softmax, the embeddings) against their host.h loops
// within tol + |ref|·eps, on awkward sizes. Without a CUDA device every test skips.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "gpu_test_support.h"
#include "stagecraft/kernels/cuda.h"
#include "stagecraft/kernels/host.h"

namespace stagecraft::kernels {
namespace {

using namespace gpu_test;  // NOLINT(google-build-using-namespace): the tests' own helpers

// The transformer's launchers, on awkward sizes: columns not a multiple of a warp or of the row
// functions' 8 lanes, a sequence length that is no power of two, odd heads and head sizes.
constexpr int kRowsT = 37, kColsT = 75;
constexpr int kBatchT = 2, kSeqT = 13, kHeadsT = 3, kHeadDimT = 5, kVocabT = 11;

TEST_F(LaunchersGpuTest, BiasAddMatchesHostExactly) {
  const std::vector<float> x = RandomValues(kRowsT * kColsT, 50), bias = RandomValues(kColsT, 51);
  const std::vector<float> residual = RandomValues(kRowsT * kColsT, 52);
  for (const bool with_residual : {false, true}) {
    SCOPED_TRACE(with_residual ? "with residual" : "without residual");
    std::vector<float> x_host = x;
    BiasAdd(kRowsT, kColsT, x_host.data(), bias.data(), with_residual ? residual.data() : nullptr);
    DeviceBuffer x_dev(x), bias_dev(bias), residual_dev(residual);
    LaunchBiasAdd(kRowsT, kColsT, x_dev.data(), bias_dev.data(), with_residual ? residual_dev.data() : nullptr,
                  stream_);
    Sync();
    ExpectClose(x_host, x_dev.ToHost(), 0.0f, 0.0f, "x");  // the same additions in the same order
  }
}

// Rows with a mean away from zero, as a residual stream has.
std::vector<float> LayerNormInput(unsigned seed) {
  std::vector<float> x = RandomValues(kRowsT * kColsT, seed);
  for (int r = 0; r < kRowsT; ++r) {
    for (int c = 0; c < kColsT; ++c) x[r * kColsT + c] += 0.25f * static_cast<float>(r % 5);
  }
  return x;
}

TEST_F(LaunchersGpuTest, LayerNormMatchesHost) {
  const std::vector<float> x = LayerNormInput(53), gamma = RandomValues(kColsT, 54), beta = RandomValues(kColsT, 55);
  std::vector<float> out_host(x.size()), mean_host(kRowsT), rstd_host(kRowsT);
  LayerNorm(kRowsT, kColsT, x.data(), gamma.data(), beta.data(), out_host.data(), mean_host.data(), rstd_host.data());
  DeviceBuffer x_dev(x), gamma_dev(gamma), beta_dev(beta), out_dev{std::vector<float>(x.size())};
  DeviceBuffer mean_dev{std::vector<float>(kRowsT)}, rstd_dev{std::vector<float>(kRowsT)};
  LaunchLayerNorm(kRowsT, kColsT, x_dev.data(), gamma_dev.data(), beta_dev.data(), out_dev.data(), mean_dev.data(),
                  rstd_dev.data(), stream_);
  Sync();
  ExpectClose(mean_host, mean_dev.ToHost(), kTol, kEps, "mean");
  ExpectClose(rstd_host, rstd_dev.ToHost(), kTol, kEps, "rstd");
  // out = x̂·γ + β: the device contracts the products into FMAs, the host does not, so terms of
  // size |x̂·γ| up to ~5 leave a few ulp of that size behind in an out near zero.
  ExpectClose(out_host, out_dev.ToHost(), 1e-5f, kEps, "out");
}

// The residual stream's update and its LayerNorm in one pass (768 columns) and as the two
// launches (1025 columns, past the rows kept in registers), against the host's BiasAdd then
// LayerNorm: the stream's sum exactly, the statistics and output to rounding.
TEST_F(LaunchersGpuTest, ResidualLayerNormMatchesHost) {
  for (const int cols : {768, 1025}) {
    SCOPED_TRACE(cols);
    constexpr int kRows = 37;
    const size_t n = static_cast<size_t>(kRows) * cols;
    const std::vector<float> x = RandomValues(n, 56), bias = RandomValues(cols, 57), residual = RandomValues(n, 58);
    const std::vector<float> gamma = RandomValues(cols, 59), beta = RandomValues(cols, 60);
    std::vector<float> x_host = x, out_host(n), mean_host(kRows), rstd_host(kRows);
    ResidualLayerNorm(kRows, cols, x_host.data(), bias.data(), residual.data(), gamma.data(), beta.data(),
                      out_host.data(), mean_host.data(), rstd_host.data());
    DeviceBuffer x_dev(x), bias_dev(bias), residual_dev(residual), gamma_dev(gamma), beta_dev(beta);
    DeviceBuffer out_dev{std::vector<float>(n)}, mean_dev{std::vector<float>(kRows)}, rstd_dev{std::vector<float>(kRows)};
    LaunchResidualLayerNorm(kRows, cols, x_dev.data(), bias_dev.data(), residual_dev.data(), gamma_dev.data(),
                            beta_dev.data(), out_dev.data(), mean_dev.data(), rstd_dev.data(), stream_);
    Sync();
    ExpectClose(x_host, x_dev.ToHost(), 0.0f, 0.0f, "x");
    ExpectClose(mean_host, mean_dev.ToHost(), kTol, kEps, "mean");
    ExpectClose(rstd_host, rstd_dev.ToHost(), kTol, kEps, "rstd");
    ExpectClose(out_host, out_dev.ToHost(), 1e-5f, kEps, "out");  // FMAs on the device, as LayerNormMatchesHost
  }
}

TEST_F(LaunchersGpuTest, LayerNormBackwardInputMatchesHostAccumulatingOrWriting) {
  const std::vector<float> x = LayerNormInput(56), gamma = RandomValues(kColsT, 57), beta = RandomValues(kColsT, 58);
  const std::vector<float> dout = RandomValues(kRowsT * kColsT, 59);
  std::vector<float> out(x.size()), mean(kRowsT), rstd(kRowsT);
  LayerNorm(kRowsT, kColsT, x.data(), gamma.data(), beta.data(), out.data(), mean.data(), rstd.data());
  for (const bool accumulate : {true, false}) {
    SCOPED_TRACE(accumulate ? "dx +=" : "dx =");
    std::vector<float> dx_host = RandomValues(x.size(), 60);
    DeviceBuffer dout_dev(dout), x_dev(x), gamma_dev(gamma), mean_dev(mean), rstd_dev(rstd), dx_dev(dx_host);
    LayerNormBackwardInput(kRowsT, kColsT, dout.data(), x.data(), gamma.data(), mean.data(), rstd.data(),
                           dx_host.data(), accumulate);
    LaunchLayerNormBackwardInput(kRowsT, kColsT, dout_dev.data(), x_dev.data(), gamma_dev.data(), mean_dev.data(),
                                 rstd_dev.data(), dx_dev.data(), accumulate, stream_);
    Sync();
    // dx = rstd·(g − mean(g) − x̂·mean(g·x̂)) cancels terms of size |g| ~ 10: ulps of that size.
    ExpectClose(dx_host, dx_dev.ToHost(), 1e-5f, kEps, "dx");
  }
}

TEST_F(LaunchersGpuTest, LayerNormBackwardWeightMatchesHostAccumulatingOrWriting) {
  const std::vector<float> x = LayerNormInput(61), gamma = RandomValues(kColsT, 62), beta = RandomValues(kColsT, 63);
  const std::vector<float> dout = RandomValues(kRowsT * kColsT, 64);
  std::vector<float> out(x.size()), mean(kRowsT), rstd(kRowsT);
  LayerNorm(kRowsT, kColsT, x.data(), gamma.data(), beta.data(), out.data(), mean.data(), rstd.data());
  for (const bool accumulate : {true, false}) {
    SCOPED_TRACE(accumulate ? "+=" : "=");
    std::vector<float> dgamma_host = RandomValues(kColsT, 65), dbeta_host = RandomValues(kColsT, 66);
    DeviceBuffer dout_dev(dout), x_dev(x), mean_dev(mean), rstd_dev(rstd), dgamma_dev(dgamma_host),
        dbeta_dev(dbeta_host);
    Scratch scratch(LayerNormBackwardWeightScratchFloats(kRowsT, kColsT));
    LayerNormBackwardWeight(kRowsT, kColsT, dout.data(), x.data(), mean.data(), rstd.data(), dgamma_host.data(),
                            dbeta_host.data(), accumulate);
    LaunchLayerNormBackwardWeight(kRowsT, kColsT, dout_dev.data(), x_dev.data(), mean_dev.data(), rstd_dev.data(),
                                  dgamma_dev.data(), dbeta_dev.data(), accumulate, scratch.span(), stream_);
    Sync();
    // Sums of 37 terms of size ~3 (dbeta) and ~5 (dgamma), added in the host's row order and in
    // the device's tiles and tree, the device's products contracted into FMAs: the bias
    // gradient's tolerance.
    ExpectClose(dbeta_host, dbeta_dev.ToHost(), 1e-4f, kEps, "dbeta");
    ExpectClose(dgamma_host, dgamma_dev.ToHost(), 1e-4f, kEps, "dgamma");
  }
}

TEST_F(LaunchersGpuTest, HeadLayoutsMatchHostExactlyAndLeaveTheRowsPaddingAlone) {
  constexpr int64_t kLd = kHeadsT * kHeadDimT + 7;  // rows wider than the heads: q of a fused qkv, say
  constexpr int64_t kTokens = kBatchT * kSeqT, kHeadsSize = kTokens * kHeadsT * kHeadDimT;
  const std::vector<float> rows = RandomValues(kTokens * kLd, 67);
  std::vector<float> heads_host(kHeadsSize);
  HeadsFromRows(kBatchT, kSeqT, kHeadsT, kHeadDimT, rows.data(), kLd, heads_host.data());
  DeviceBuffer rows_dev(rows), heads_dev{std::vector<float>(kHeadsSize)};
  LaunchHeadsFromRows(kBatchT, kSeqT, kHeadsT, kHeadDimT, rows_dev.data(), kLd, heads_dev.data(), stream_);
  Sync();
  ExpectClose(heads_host, heads_dev.ToHost(), 0.0f, 0.0f, "heads");

  const std::vector<float> heads = RandomValues(kHeadsSize, 68);
  std::vector<float> back_host = RandomValues(kTokens * kLd, 69);  // the padding columns must survive
  DeviceBuffer in_dev(heads), back_dev(back_host);
  RowsFromHeads(kBatchT, kSeqT, kHeadsT, kHeadDimT, heads.data(), back_host.data(), kLd);
  LaunchRowsFromHeads(kBatchT, kSeqT, kHeadsT, kHeadDimT, in_dev.data(), back_dev.data(), kLd, stream_);
  Sync();
  ExpectClose(back_host, back_dev.ToHost(), 0.0f, 0.0f, "rows");
}

TEST_F(LaunchersGpuTest, CausalSoftmaxAndItsBackwardMatchHost) {
  constexpr int kMatrices = kBatchT * kHeadsT;
  constexpr int64_t kSize = static_cast<int64_t>(kMatrices) * kSeqT * kSeqT;
  const std::vector<float> scores = RandomValues(kSize, 70, -8.0f, 8.0f);
  std::vector<float> p_host = scores;
  CausalSoftmax(kMatrices, kSeqT, p_host.data());
  DeviceBuffer p_dev(scores);
  LaunchCausalSoftmax(kMatrices, kSeqT, p_dev.data(), stream_);
  Sync();
  // Above the diagonal both write 0; on it the device's expf and the host's polynomial each lie
  // within 2e-7 of e^x.
  ExpectClose(p_host, p_dev.ToHost(), kTol, kEps, "p");

  // The backward from the host's probabilities, so only the backward is compared.
  const std::vector<float> dp = RandomValues(kSize, 71);
  std::vector<float> ds_host = dp;
  CausalSoftmaxBackward(kMatrices, kSeqT, p_host.data(), ds_host.data());
  DeviceBuffer p_in_dev(p_host), ds_dev(dp);
  LaunchCausalSoftmaxBackward(kMatrices, kSeqT, p_in_dev.data(), ds_dev.data(), stream_);
  Sync();
  ExpectClose(ds_host, ds_dev.ToHost(), kTol, kEps, "ds");
}

// Token ids of a [kBatchT x kSeqT] microbatch: every id of the vocabulary, most of them repeated.
std::vector<float> Tokens() {
  std::vector<float> tokens(kBatchT * kSeqT);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<float>((i * 7 + i / 5) % kVocabT);
  return tokens;
}

TEST_F(LaunchersGpuTest, EmbeddingMatchesHostExactly) {
  const std::vector<float> tokens = Tokens(), wte = RandomValues(kVocabT * kColsT, 72);
  const std::vector<float> wpe = RandomValues(kSeqT * kColsT, 73);
  std::vector<float> out_host(tokens.size() * kColsT);
  Embedding(kBatchT, kSeqT, kColsT, tokens.data(), wte.data(), wpe.data(), out_host.data());
  DeviceBuffer tokens_dev(tokens), wte_dev(wte), wpe_dev(wpe), out_dev{std::vector<float>(out_host.size())};
  LaunchEmbedding(kBatchT, kSeqT, kColsT, tokens_dev.data(), wte_dev.data(), wpe_dev.data(), out_dev.data(), stream_);
  Sync();
  ExpectClose(out_host, out_dev.ToHost(), 0.0f, 0.0f, "out");
}

// The gradients are sums of dout rows in the host's order (b, t) with no products, so they match
// exactly, and again on a second run (no atomics).
TEST_F(LaunchersGpuTest, EmbeddingBackwardMatchesHostExactlyAccumulatingOrWriting) {
  const std::vector<float> tokens = Tokens(), dout = RandomValues(tokens.size() * kColsT, 74);
  for (const bool accumulate : {true, false}) {
    SCOPED_TRACE(accumulate ? "+=" : "=");
    std::vector<float> dwte_host = RandomValues(kVocabT * kColsT, 75), dwpe_host = RandomValues(kSeqT * kColsT, 76);
    const std::vector<float> dwte0 = dwte_host, dwpe0 = dwpe_host;
    EmbeddingBackward(kBatchT, kSeqT, kColsT, kVocabT, tokens.data(), dout.data(), dwte_host.data(), dwpe_host.data(),
                      accumulate);
    for (int run = 0; run < 2; ++run) {
      DeviceBuffer tokens_dev(tokens), dout_dev(dout), dwte_dev(dwte0), dwpe_dev(dwpe0);
      LaunchEmbeddingBackward(kBatchT, kSeqT, kColsT, kVocabT, tokens_dev.data(), dout_dev.data(), dwte_dev.data(),
                              dwpe_dev.data(), accumulate, stream_);
      Sync();
      ExpectClose(dwte_host, dwte_dev.ToHost(), 0.0f, 0.0f, "dwte");
      ExpectClose(dwpe_host, dwpe_dev.ToHost(), 0.0f, 0.0f, "dwpe");
    }
  }
}

// A token id outside the vocabulary (the caller's to reject) adds nothing on the device rather
// than writing out of bounds.
TEST_F(LaunchersGpuTest, EmbeddingBackwardSkipsTokensOutsideTheVocabulary) {
  const std::vector<float> tokens = {1.0f, -1.0f, static_cast<float>(kVocabT), std::nanf("")};  // batch 1, seq 4
  const std::vector<float> dout = RandomValues(tokens.size() * kColsT, 77);
  DeviceBuffer tokens_dev(tokens), dout_dev(dout), dwte_dev{std::vector<float>(kVocabT * kColsT, 5.0f)};
  DeviceBuffer dwpe_dev{std::vector<float>(tokens.size() * kColsT, 5.0f)};
  LaunchEmbeddingBackward(1, static_cast<int>(tokens.size()), kColsT, kVocabT, tokens_dev.data(), dout_dev.data(),
                          dwte_dev.data(), dwpe_dev.data(), false, stream_);
  Sync();
  std::vector<float> dwte_expected(kVocabT * kColsT, 0.0f);
  for (int c = 0; c < kColsT; ++c) dwte_expected[kColsT + c] = dout[c];  // only token 1, at t = 0
  ExpectClose(dwte_expected, dwte_dev.ToHost(), 0.0f, 0.0f, "dwte");
  ExpectClose(dout, dwpe_dev.ToHost(), 0.0f, 0.0f, "dwpe");  // batch 1: dwpe is dout
}

}  // namespace
}  // namespace stagecraft::kernels
