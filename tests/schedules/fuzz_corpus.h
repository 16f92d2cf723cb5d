// Test helper: the text of one seed of a fuzz corpus (tests/fuzz/corpus/<harness>/<name>); the
// readers' tests take some of their cases from there, so a seed and its expected message agree.
#pragma once

#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

namespace stagecraft::schedules::test_cases {

inline std::string FuzzCorpusText(const std::string& harness, const std::string& name) {
  std::ifstream in(std::string(STAGECRAFT_SOURCE_DIR) + "/tests/fuzz/corpus/" + harness + "/" + name, std::ios::binary);
  EXPECT_TRUE(in) << "no seed " << harness << "/" << name;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace stagecraft::schedules::test_cases
