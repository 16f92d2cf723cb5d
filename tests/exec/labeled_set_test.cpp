// LoadLabeledSet (model.h): a CSV worked by hand (standardised features, zero padding, classes,
// a header line, gzip or plain), the microbatches it makes, and each kind of bad file in one line.
#include <zlib.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "stagecraft/base/error.h"
#include "stagecraft/exec/model.h"

namespace stagecraft::exec {
namespace {

class LabeledSetTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& name, const std::string& text) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path) << text;
    return path;
  }
  std::string WriteGz(const std::string& name, const std::string& text) {
    const std::string path = (dir_ / name).string();
    gzFile f = gzopen(path.c_str(), "wb");
    gzwrite(f, text.data(), static_cast<unsigned>(text.size()));
    gzclose(f);
    return path;
  }
  std::string Error(const std::string& path, int hidden = 4) {
    try {
      LoadLabeledSet(path, hidden);
    } catch (const InputError& e) {
      return e.what();
    }
    return "no error";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_ = std::filesystem::temp_directory_path() / ("labeled_set_" + std::to_string(::getpid()));
  void SetUp() override { std::filesystem::create_directories(dir_); }
};

// Feature 0: 1, 3 (mean 2, sd 1) -> -1, 1; feature 1: 5, 5 (constant) -> 0, 0; padded to 4.
TEST_F(LabeledSetTest, StandardisesPadsAndReadsTheClasses) {
  const std::string text = "a,b,class\n1,5,2\n3,5,0\n";
  for (const std::string& path : {Write("s.csv", text), WriteGz("s.csv.gz", text)}) {
    const auto set = LoadLabeledSet(path, 4);
    ASSERT_EQ(set->rows, 2);
    EXPECT_EQ(set->features, 2);
    EXPECT_EQ(set->x, (std::vector<float>{-1, 0, 0, 0, 1, 0, 0, 0}));
    EXPECT_EQ(set->labels, (std::vector<float>{2, 0}));
  }
}

// Microbatch g of b rows takes rows (g·b + r) mod N, in the file's order.
TEST_F(LabeledSetTest, MicrobatchesWalkTheRowsInOrder) {
  MlpModel m{.layers = 1, .hidden = 4, .loss = kernels::LossKind::kCrossEntropy};
  m.data = LoadLabeledSet(Write("s.csv", "1,0\n2,1\n3,2\n"), 4);
  std::vector<float> x(8), y(2);
  MicrobatchInput(m, 2, 1, x.data());  // rows 2 and 0
  MicrobatchTarget(m, 2, 1, y.data());
  const float sd = std::sqrt(2.0f / 3.0f);
  EXPECT_FLOAT_EQ(x[0], 1 / sd);
  EXPECT_FLOAT_EQ(x[4], -1 / sd);
  EXPECT_EQ(y, (std::vector<float>{2, 0}));
}

TEST_F(LabeledSetTest, BadFilesAreOneLineNamingTheLine) {
  const std::string p = Write("bad.csv", "1,2,0\n1,x,0\n");
  EXPECT_EQ(Error(p), p + ": training.data: line 2: expected numbers separated by commas (features, then the class)");
  const std::string w = Write("w.csv", "1,2,0\n1,0\n");
  EXPECT_EQ(Error(w), w + ": training.data: line 2: 1 features where the rows before have 2");
  const std::string c = Write("c.csv", "1,2,4\n");
  EXPECT_EQ(Error(c), c + ": training.data: line 1: class 4 is not an integer in [0, model.mlp.hidden 4)");
  const std::string f = Write("f.csv", "1,2,3,4,5,0\n");
  EXPECT_EQ(Error(f), f + ": training.data: line 1: 5 features, more than model.mlp.hidden 4");
  const std::string e = Write("e.csv", "a,b\n\n");
  EXPECT_EQ(Error(e), e + ": training.data: no rows");
  EXPECT_NE(Error((dir_ / "none.csv").string()).find("cannot read"), std::string::npos);
}

}  // namespace
}  // namespace stagecraft::exec
