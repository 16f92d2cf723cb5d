// Reading files the user named (base/input_file.h): the reason of each failure, the size
// bound against regular files, devices and FIFOs.
#include "stagecraft/base/input_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "scratch_dir.h"
#include "stagecraft/base/error.h"

namespace stagecraft {
namespace {

namespace fs = std::filesystem;

template <class F>
std::string ErrorOf(F f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

using InputFileTest = ScratchDirTest;

TEST_F(InputFileTest, ReadsARegularFileWhole) {
  const std::string text = std::string("name: x\n") + std::string(100000, 'y') + '\0' + "tail";
  std::ofstream(Path("a.yaml"), std::ios::binary) << text;
  EXPECT_EQ(ReadInputFile(Path("a.yaml"), kMaxYamlBytes, "a scenario"), text);
  std::ofstream(Path("empty.yaml"));
  EXPECT_EQ(ReadInputFile(Path("empty.yaml"), kMaxYamlBytes, "a scenario"), "");
}

TEST_F(InputFileTest, EachFailureNamesThePathAndItsReason) {
  EXPECT_EQ(ErrorOf([&] { ReadInputFile(dir_.string(), 100, "a scenario"); }),
            dir_.string() + ": cannot read: is a directory");
  EXPECT_EQ(ErrorOf([&] { ReadInputFile(Path("missing.yaml"), 100, "a scenario"); }),
            Path("missing.yaml") + ": cannot read: no such file or directory");
  EXPECT_EQ(ErrorOf([&] { CheckInputFile(dir_.string()); }), dir_.string() + ": cannot read: is a directory");
  EXPECT_EQ(ErrorOf([&] { CheckInputFile(Path("missing.yaml")); }),
            Path("missing.yaml") + ": cannot read: no such file or directory");
  EXPECT_EQ(ErrorOf([&] { ReadInputFile("", 100, "a scenario"); }), "an empty file name");
  if (::geteuid() != 0) {
    std::ofstream(Path("secret.yaml")) << "x";
    fs::permissions(Path("secret.yaml"), fs::perms::none);
    EXPECT_EQ(ErrorOf([&] { ReadInputFile(Path("secret.yaml"), 100, "a scenario"); }),
              Path("secret.yaml") + ": cannot read: permission denied");
    EXPECT_EQ(ErrorOf([&] { CheckInputFile(Path("secret.yaml")); }),
              Path("secret.yaml") + ": cannot read: permission denied");
  }
}

TEST_F(InputFileTest, AFileOverItsLimitIsRefusedNamingTheLimit) {
  std::ofstream(Path("big.yaml"), std::ios::binary) << std::string((1 << 20) + 1, 'x');
  EXPECT_EQ(ErrorOf([&] { ReadInputFile(Path("big.yaml"), 1 << 20, "a scenario file"); }),
            Path("big.yaml") + ": larger than 1 MiB, the limit for a scenario file");
  EXPECT_EQ(ReadInputFile(Path("big.yaml"), (1 << 20) + 1, "a scenario file").size(), (1u << 20) + 1);
}

TEST_F(InputFileTest, AnEndlessDeviceStopsAtTheLimit) {
  EXPECT_EQ(ErrorOf([] { ReadInputFile("/dev/zero", 1 << 20, "a scenario file"); }),
            "/dev/zero: larger than 1 MiB, the limit for a scenario file");
  EXPECT_EQ(ReadInputFile("/dev/null", 1 << 20, "a scenario file"), "");
}

TEST_F(InputFileTest, AFifoIsReadToItsEnd) {
  const std::string fifo = Path("pipe");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::thread writer([&] { std::ofstream(fifo) << "name: piped\n"; });
  EXPECT_EQ(ReadInputFile(fifo, 1 << 20, "a scenario file"), "name: piped\n");
  writer.join();
}

TEST(FileErrorReasonTest, LowersOnlyTheFirstLetter) {
  EXPECT_EQ(FileErrorReason(ENOENT), "no such file or directory");
  EXPECT_EQ(FileErrorReason(EACCES), "permission denied");
  EXPECT_EQ(FileErrorReason(EISDIR), "is a directory");
}

}  // namespace
}  // namespace stagecraft
