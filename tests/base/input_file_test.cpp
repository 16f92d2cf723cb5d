// Reading files the user named (base/input_file.h): the reason of each failure, the size
// bound, devices and FIFOs refused before they are opened, `-` as standard input.
#include "stagecraft/base/input_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

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

TEST_F(InputFileTest, ADeviceIsRefusedByItsKind) {
  const std::string tail = ", not a regular file (name a regular file, or - for standard input)";
  EXPECT_EQ(ErrorOf([] { ReadInputFile("/dev/zero", 1 << 20, "a scenario file"); }),
            "/dev/zero: cannot read: a character device" + tail);
  EXPECT_EQ(ErrorOf([] { ReadInputFile("/dev/null", 1 << 20, "a scenario file"); }),
            "/dev/null: cannot read: a character device" + tail);
  EXPECT_EQ(ErrorOf([] { CheckInputFile("/dev/null"); }), "/dev/null: cannot read: a character device" + tail);
}

// A FIFO with no writer would block the open for ever: it is refused before it is opened, here
// with no writer at all (the test would hang, not fail, if it were opened).
TEST_F(InputFileTest, AFifoIsRefusedBeforeItIsOpened) {
  const std::string fifo = Path("pipe");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string want = fifo + ": cannot read: a FIFO, not a regular file (name a regular file, or - for "
                                  "standard input)";
  EXPECT_EQ(ErrorOf([&] { ReadInputFile(fifo, 1 << 20, "a scenario file"); }), want);
  EXPECT_EQ(ErrorOf([&] { CheckInputFile(fifo); }), want);
  // Through a symbolic link too: the link is followed to what it names.
  fs::create_symlink(fifo, Path("link"));
  EXPECT_EQ(ErrorOf([&] { ReadInputFile(Path("link"), 1 << 20, "a scenario file"); }),
            Path("link") + ": cannot read: a FIFO, not a regular file (name a regular file, or - for standard input)");
}

// `-` reads this process's standard input, bounded like a file.
TEST_F(InputFileTest, DashIsStandardInput) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const int saved = ::dup(STDIN_FILENO);
  ASSERT_GE(saved, 0);
  ASSERT_EQ(::dup2(fds[0], STDIN_FILENO), STDIN_FILENO);
  ::close(fds[0]);
  const std::string text = "name: piped\n";
  ASSERT_EQ(::write(fds[1], text.data(), text.size()), static_cast<ssize_t>(text.size()));
  ::close(fds[1]);
  const std::string read = ReadInputFile("-", 1 << 20, "a scenario file");
  CheckInputFile("-");  // nothing to check before reading
  ASSERT_EQ(::dup2(saved, STDIN_FILENO), STDIN_FILENO);
  ::close(saved);
  EXPECT_EQ(read, text);
}

TEST(WithoutByteOrderMark, SkipsOnlyALeadingMark) {
  EXPECT_EQ(WithoutByteOrderMark("\xEF\xBB\xBF" "0F0"), "0F0");
  EXPECT_EQ(WithoutByteOrderMark("0F0\xEF\xBB\xBF"), "0F0\xEF\xBB\xBF");
  EXPECT_EQ(WithoutByteOrderMark("\xEF\xBB"), "\xEF\xBB");
  EXPECT_EQ(WithoutByteOrderMark(""), "");
}

TEST(FileErrorReasonTest, LowersOnlyTheFirstLetter) {
  EXPECT_EQ(FileErrorReason(ENOENT), "no such file or directory");
  EXPECT_EQ(FileErrorReason(EACCES), "permission denied");
  EXPECT_EQ(FileErrorReason(EISDIR), "is a directory");
}

}  // namespace
}  // namespace stagecraft
