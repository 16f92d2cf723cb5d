// exec/gpt_stage.cpp on the cpu device against PyTorch: the forward and every gradient of one
// GPT-2 block and of a small whole model equal torch's float64 values (tests/data/gpt,
// written by scripts/gen-gpt-fixtures.sh; this test does not need torch) within 1e-5 relative
// in fp32. Then, on the same model: I followed by W equals B; recompute equals keeping every
// activation; and the model split over two stages equals it in one. Also the synthetic tokens
// (learnable, and as documented) and the token-file reader.
#include "stagecraft/exec/gpt.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "gpt_reference.h"
#include "stagecraft/base/error.h"
#include "stagecraft/exec/cpu_device.h"
#include "stagecraft/exec/stage.h"

namespace stagecraft::exec {
namespace {

struct Fixture {
  std::map<std::string, int> config;
  std::map<std::string, std::vector<double>> tensors;
  const std::vector<double>& at(const std::string& name) const {
    auto it = tensors.find(name);
    if (it == tensors.end()) throw std::runtime_error("fixture has no tensor " + name);
    return it->second;
  }
};

// The format scripts/gen-gpt-fixtures.sh writes: '#' comments, one 'config K=V ...' line, then
// 'tensor NAME D0 [D1 ...]' followed by prod(D) numbers.
Fixture Load(const std::string& name) {
  const std::string path = std::string(STAGECRAFT_TEST_DATA) + "/gpt/" + name;
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open " + path);
  Fixture f;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream words(line);
    std::string kind;
    words >> kind;
    if (kind == "config") {
      std::string kv;
      while (words >> kv) {
        const size_t eq = kv.find('=');
        if (kv.substr(0, eq) != "eps") f.config[kv.substr(0, eq)] = std::stoi(kv.substr(eq + 1));
      }
    } else if (kind == "tensor") {
      std::string tensor;
      words >> tensor;
      size_t n = 1;
      for (size_t d; words >> d;) n *= d;
      std::vector<double> values(n);
      for (double& v : values) in >> v;
      if (!in) throw std::runtime_error(path + ": tensor " + tensor + " is short");
      f.tensors[tensor] = std::move(values);
    }
  }
  return f;
}

std::vector<float> ToFloat(const std::vector<double>& v) { return {v.begin(), v.end()}; }

// max |got − want| ≤ tol · max |want| over the tensor.
void ExpectClose(const std::vector<float>& got, const std::vector<double>& want, const std::string& what,
                 double tol = 1e-5) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double max_err = 0, max_want = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    max_err = std::max(max_err, std::abs(got[i] - want[i]));
    max_want = std::max(max_want, std::abs(want[i]));
  }
  EXPECT_LE(max_err, tol * max_want) << what << ": max error " << max_err << " against max " << max_want;
}

const char* const kBlockTensors[] = {"ln1.w", "ln1.b", "qkv.w",  "qkv.b",  "proj.w",  "proj.b",
                                     "ln2.w", "ln2.b", "fc.w",   "fc.b",   "fcproj.w", "fcproj.b"};

// The stage's parameter layout (gpt.h) filled from the fixture's tensors named prefix + kBlockTensors.
void PutBlock(const Fixture& f, const std::string& prefix, std::vector<float>* params, const std::string& source_prefix = "") {
  for (const char* name : kBlockTensors) {
    const auto& t = f.at(source_prefix + prefix + name);
    params->insert(params->end(), t.begin(), t.end());
  }
}

// Splits a stage's gradient buffer back into the fixture's names.
std::map<std::string, std::vector<float>> SplitGrads(const std::vector<float>& g, const std::vector<std::string>& names,
                                                     const Fixture& f) {
  std::map<std::string, std::vector<float>> out;
  size_t at = 0;
  for (const std::string& name : names) {
    const size_t n = f.at(name).size();
    out[name] = std::vector<float>(g.begin() + static_cast<long>(at), g.begin() + static_cast<long>(at + n));
    at += n;
  }
  EXPECT_EQ(at, g.size());
  return out;
}

std::vector<float> Download(Device& d, const Buffer& b) {
  std::vector<float> host(static_cast<size_t>(b.size()));
  d.memory().Download(host.data(), b.data(), b.size());
  return host;
}
Buffer Upload(Device& d, const std::vector<float>& host) {
  Buffer b(d, static_cast<int64_t>(host.size()));
  d.memory().Upload(b.data(), host.data(), b.size());
  return b;
}

TEST(GptStageTest, OneBlockMatchesPyTorch) {
  const Fixture f = Load("block.txt");
  const int batch = f.config.at("B"), t = f.config.at("T"), c = f.config.at("C");
  const GptModel model{.layers = 1, .hidden = c, .heads = f.config.at("NH"), .seq = t, .vocab = 1};
  auto device = MakeCpuDevice();
  GptStage stage(*device, model, batch, 0, 1, false, false);
  std::vector<float> host_params;
  PutBlock(f, "", &host_params);
  ASSERT_EQ(static_cast<int64_t>(host_params.size()), stage.ParamFloats());
  Buffer params = Upload(*device, host_params);
  Activations saved;
  Buffer y = stage.Forward(params.data(), Upload(*device, ToFloat(f.at("x"))), &saved, true);
  ExpectClose(Download(*device, y), f.at("y"), "y");
  Buffer grads(*device, stage.ParamFloats());
  Buffer dx = stage.Backward(params.data(), Upload(*device, ToFloat(f.at("dout"))), &saved, {grads.data(), false});
  ExpectClose(Download(*device, dx), f.at("dx"), "dx");
  std::vector<std::string> names;
  for (const char* n : kBlockTensors) names.push_back(std::string("grad.") + n);
  for (const auto& [name, g] : SplitGrads(Download(*device, grads), names, f)) ExpectClose(g, f.at(name), name);
}

// The small model of model.txt on `stages` stages (blocks split as evenly as possible), run
// with I then W (split) or B; returns the loss, logits and every gradient by fixture name.
struct ModelRun {
  float loss = 0;
  std::vector<float> logits;
  std::map<std::string, std::vector<float>> grads;
};

ModelRun RunModel(const Fixture& f, int stages, bool split_backward, bool recompute) {
  const int batch = f.config.at("B"), layers = f.config.at("L");
  const GptModel model{.layers = layers, .hidden = f.config.at("C"), .heads = f.config.at("NH"), .seq = f.config.at("T"),
                       .vocab = f.config.at("V")};
  auto device = MakeCpuDevice();
  struct Piece {
    std::unique_ptr<GptStage> stage;
    Buffer params, grads;
    Activations saved;
    std::vector<std::string> names;
  };
  std::vector<Piece> pieces(static_cast<size_t>(stages));
  int first = 0;
  for (int s = 0; s < stages; ++s) {
    const int blocks = layers / stages + (s < layers % stages ? 1 : 0);
    Piece& p = pieces[static_cast<size_t>(s)];
    const bool embed = s == 0, head = s == stages - 1;
    p.stage = std::make_unique<GptStage>(*device, model, batch, first, blocks, embed, head);
    std::vector<float> host;
    auto add = [&](const std::string& name) {
      const auto& t = f.at(name);
      host.insert(host.end(), t.begin(), t.end());
      p.names.push_back("grad." + name);
    };
    if (embed) add("wte"), add("wpe");
    for (int b = first; b < first + blocks; ++b) {
      for (const char* n : kBlockTensors) add("h." + std::to_string(b) + "." + n);
    }
    if (head) add("lnf.w"), add("lnf.b"), add("lm_head.w");
    EXPECT_EQ(static_cast<int64_t>(host.size()), p.stage->ParamFloats());
    p.params = Upload(*device, host);
    p.grads = Buffer(*device, p.stage->ParamFloats());
    first += blocks;
  }
  Buffer x = Upload(*device, ToFloat(f.at("tokens")));
  for (Piece& p : pieces) {
    x = p.stage->Forward(p.params.data(), std::move(x), &p.saved, !recompute);
    if (recompute) {
      EXPECT_EQ(p.saved.kept.size(), 0u);
      Buffer input(*device, p.saved.inputs[0].size());
      device->memory().Copy(input.data(), p.saved.inputs[0].data(), input.size());
      p.stage->Forward(p.params.data(), std::move(input), &p.saved, true);  // what Recompute does
    }
  }
  ModelRun run;
  run.logits = Download(*device, x);
  const std::vector<float> targets = ToFloat(f.at("targets"));
  Buffer dy(*device, x.size()), loss(*device, 1), target_buf = Upload(*device, targets);
  device->ops().loss.forward(device->op_context(), kernels::LossKind::kCrossEntropy, static_cast<int>(targets.size()),
                             model.vocab, x.data(), target_buf.data(), dy.data(), loss.data(), 1.0f);
  device->memory().Download(&run.loss, loss.data(), 1);
  for (size_t s = pieces.size(); s-- > 0;) {
    Piece& p = pieces[s];
    const GradTarget g{split_backward ? nullptr : p.grads.data(), false};
    dy = p.stage->Backward(p.params.data(), std::move(dy), &p.saved, g);
    if (split_backward) p.stage->BackwardWeight(&p.saved, {p.grads.data(), false});
    EXPECT_EQ(p.saved.Floats(), 0) << "stage " << s << " keeps nothing after its W";
  }
  EXPECT_TRUE(dy.empty()) << "the first stage has no input gradient";
  for (Piece& p : pieces) {
    for (auto& [name, g] : SplitGrads(Download(*device, p.grads), p.names, f)) run.grads[name] = std::move(g);
  }
  return run;
}

TEST(GptStageTest, SmallModelMatchesPyTorch) {
  const Fixture f = Load("model.txt");
  const ModelRun run = RunModel(f, 1, false, false);
  EXPECT_NEAR(run.loss, f.at("loss")[0], 1e-5 * f.at("loss")[0]);
  ExpectClose(run.logits, f.at("logits"), "logits");
  EXPECT_EQ(run.grads.size(), 4 + 12 * static_cast<size_t>(f.config.at("L")) + 1);
  for (const auto& [name, g] : run.grads) ExpectClose(g, f.at(name), name);
}

TEST(GptStageTest, SplitBackwardRecomputeAndStagesGiveTheSameGradients) {
  const Fixture f = Load("model.txt");
  const ModelRun whole = RunModel(f, 1, false, false);
  for (const auto& [stages, split, recompute] : {std::tuple{1, true, false}, std::tuple{1, false, true},
                                                 std::tuple{2, false, false}, std::tuple{2, true, true}}) {
    const ModelRun run = RunModel(f, stages, split, recompute);
    EXPECT_EQ(run.loss, whole.loss);
    for (const auto& [name, g] : run.grads) {
      // The same math in the same order: equal to the last bit.
      EXPECT_EQ(g, whole.grads.at(name)) << name << " stages " << stages << " split " << split << " recompute "
                                         << recompute;
    }
  }
}

}  // namespace
}  // namespace stagecraft::exec

namespace stagecraft::exec {
namespace {

// The synthetic tokens (GptMicrobatch) are learnable: a small model trained on them for a few
// hundred microbatches scores far below ln V (4.16 for V = 64), the loss of a uniform guess,
// and comes within 20% of the rule's own entropy (1.58).
TEST(GptData, TheSyntheticTokensAreLearnable) {
  TrainingConfig config;
  config.gpt = GptModel{.layers = 1, .hidden = 32, .heads = 2, .seq = 16, .vocab = 64, .seed = 3};
  config.microbatch_size = 8;
  config.optimizer = "adam";
  config.lr = 3e-3f;
  config.layers_per_stage = {1};
  const auto result = testing::TrainGptReference(config, 2, 150, testing::Staleness::kFlush, false);
  const double uniform = std::log(64.0);
  // The rule's entropy: the successor with p = 3/4 + 1/(4V), each other token (1 − p)/(V − 1).
  const double p = 0.75 + 0.25 / 64, entropy = -p * std::log(p) - (1 - p) * std::log((1 - p) / 63);
  EXPECT_NEAR(result.losses.front(), uniform, 0.1 * uniform);
  EXPECT_LT(result.losses.back(), 1.2 * entropy) << "first " << result.losses.front();  // 1.66 against 1.58
}

TEST(GptData, TargetsAreTheNextTokensAndTheRuleHoldsThreeTimesInFour) {
  const GptModel m{.layers = 1, .hidden = 8, .heads = 1, .seq = 64, .vocab = 50, .seed = 9};
  constexpr int kBatch = 16;
  std::vector<float> tokens(kBatch * m.seq), targets(kBatch * m.seq);
  GptMicrobatch(m, kBatch, 5, tokens.data(), targets.data());
  int follows = 0;
  for (int r = 0; r < kBatch; ++r) {
    for (int i = 0; i < m.seq; ++i) {
      const float t = tokens[r * m.seq + i], next = targets[r * m.seq + i];
      ASSERT_TRUE(t >= 0 && t < m.vocab && next >= 0 && next < m.vocab);
      if (i + 1 < m.seq) {
        EXPECT_EQ(tokens[r * m.seq + i + 1], next);
      }
      // a = 7: the first of 5, 7, ... prime to 50.
      follows += static_cast<int>(next) == (7 * static_cast<int>(t) + 1) % m.vocab;
    }
  }
  EXPECT_NEAR(follows / static_cast<double>(kBatch * m.seq), 0.75 + 0.25 / m.vocab, 0.05);
  std::vector<float> again(tokens.size()), again_targets(tokens.size());
  GptMicrobatch(m, kBatch, 5, again.data(), again_targets.data());
  EXPECT_EQ(again, tokens);
}

}  // namespace
}  // namespace stagecraft::exec

namespace stagecraft::exec {
namespace {

std::string TempFile(const std::string& name, const std::string& bytes) {
  const std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

// An llm.c shard: 256 int32 of header (magic, version, count), then the tokens.
std::string Shard(int32_t version, int32_t count, const std::vector<uint32_t>& tokens) {
  std::vector<int32_t> header(256, 0);
  header[0] = 20240520, header[1] = version, header[2] = count;
  std::string bytes(reinterpret_cast<const char*>(header.data()), header.size() * 4);
  for (const uint32_t t : tokens) {
    if (version == 1) {
      const auto v = static_cast<uint16_t>(t);
      bytes.append(reinterpret_cast<const char*>(&v), 2);
    } else {
      bytes.append(reinterpret_cast<const char*>(&t), 4);
    }
  }
  return bytes;
}

std::string ErrorOf(const std::string& path, int vocab, int seq) {
  try {
    LoadTokenFile(path, vocab, seq);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(TokenFile, ReadsShardsAndTextAndCutsWindowsOfSeqPlusOne) {
  const auto shard = LoadTokenFile(TempFile("a.bin", Shard(1, 6, {10, 11, 12, 13, 14, 15})), 50, 2);
  EXPECT_EQ(*shard, (std::vector<int32_t>{10, 11, 12, 13, 14, 15}));
  EXPECT_EQ(*LoadTokenFile(TempFile("b.bin", Shard(2, 3, {1, 40000, 2})), 50000, 2), (std::vector<int32_t>{1, 40000, 2}));
  EXPECT_EQ(*LoadTokenFile(TempFile("c.txt", "hi!"), 256, 2), (std::vector<int32_t>{'h', 'i', '!'}));
  // Windows of T + 1 = 3 tokens from (n·T) mod (N − T) = (2n) mod 4: sequences 0, 1, 2 start at 0, 2, 0.
  GptModel m{.layers = 1, .hidden = 4, .heads = 1, .seq = 2, .vocab = 50};
  m.data = shard;
  std::vector<float> tokens(6), targets(6);
  GptMicrobatch(m, 3, 0, tokens.data(), targets.data());
  EXPECT_EQ(tokens, (std::vector<float>{10, 11, 12, 13, 10, 11}));
  EXPECT_EQ(targets, (std::vector<float>{11, 12, 13, 14, 11, 12}));
}

TEST(TokenFile, BadFilesSayWhatIsWrong) {
  EXPECT_NE(ErrorOf(TempFile("d.bin", Shard(1, 9, {1, 2, 3})), 50, 2).find("the header promises 9 tokens, the file holds 3"),
            std::string::npos);
  EXPECT_NE(ErrorOf(TempFile("e.bin", Shard(3, 3, {1, 2, 3})), 50, 2).find("llm.c shard version 3"), std::string::npos);
  EXPECT_NE(ErrorOf(TempFile("f.bin", Shard(1, 4, {1, 2, 60, 3})), 50, 2).find("token 60 at position 2 is outside"),
            std::string::npos);
  EXPECT_NE(ErrorOf(TempFile("g.txt", "ab"), 256, 2).find("2 tokens, fewer than model.transformer.seq + 1 = 3"),
            std::string::npos);
  EXPECT_NE(ErrorOf(TempFile("h.txt", "abcd"), 64, 2).find("a text file's tokens are its bytes"), std::string::npos);
  EXPECT_EQ(ErrorOf(::testing::TempDir() + "/missing.bin", 64, 2),
            ::testing::TempDir() + "/missing.bin: training.data: cannot read: no such file or directory");
  const std::string dir = ::testing::TempDir() + "/tokens.d";
  std::filesystem::create_directories(dir);
  EXPECT_EQ(ErrorOf(dir, 64, 2), dir + ": training.data: not a regular file (a directory)");
  EXPECT_EQ(ErrorOf("/dev/zero", 256, 2),
            "/dev/zero: training.data: not a regular file (a device, FIFO or socket has no size to check)");
}

// Only the prefix a run can use is read: the tokens after it are neither kept nor checked.
TEST(TokenFile, ReadsOnlyThePrefixItIsAskedFor) {
  EXPECT_EQ(*LoadTokenFile(TempFile("i.bin", Shard(1, 6, {10, 11, 12, 13, 14, 99})), 50, 2, 4),
            (std::vector<int32_t>{10, 11, 12, 13}));  // 99 is outside the vocabulary, and never read
  EXPECT_EQ(*LoadTokenFile(TempFile("j.bin", Shard(2, 3, {1, 2, 3})), 50, 2, 100), (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(*LoadTokenFile(TempFile("k.txt", "hello, world"), 256, 2, 5), (std::vector<int32_t>{'h', 'e', 'l', 'l', 'o'}));
  // The header's count is still held against the whole file's size.
  EXPECT_NE(ErrorOf(TempFile("l.bin", Shard(1, 9, {1, 2, 3})), 50, 2).find("the header promises 9 tokens"),
            std::string::npos);
}

}  // namespace
}  // namespace stagecraft::exec
