// Output files (base/output_file.h): regular files replaced atomically with their mode kept,
// symbolic links followed and kept, FIFOs and devices written in place, refusals named, and a
// command's outputs committed as one transaction.
#include "stagecraft/base/output_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "scratch_dir.h"
#include "stagecraft/base/error.h"

namespace stagecraft {
namespace {

namespace fs = std::filesystem;

class OutputFileTest : public ScratchDirTest {
 protected:
  std::vector<std::string> Entries() const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir_)) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }

  static std::string Slurp(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

  template <class F>
  static std::string ErrorOf(F f) {
    try {
      f();
    } catch (const InputError& e) {
      return e.what();
    }
    return "(no error)";
  }
};

TEST_F(OutputFileTest, WritesAndReplacesARegularFileLeavingNoTemporary) {
  const std::string path = Path("out.json");
  WriteOutputFile(path, "first version, longer than the second");
  EXPECT_EQ(Slurp(path), "first version, longer than the second");
  WriteOutputFile(path, "second");
  EXPECT_EQ(Slurp(path), "second");
  WriteOutputFile(path, "");
  EXPECT_EQ(Slurp(path), "");
  EXPECT_EQ(Entries(), std::vector<std::string>{"out.json"});
}

TEST_F(OutputFileTest, AReplacedFileKeepsItsPermissionBits) {
  const std::string path = Path("out.json");
  WriteOutputFile(path, "one");
  ASSERT_EQ(::chmod(path.c_str(), 0640), 0);
  WriteOutputFile(path, "two");
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0640u);
  EXPECT_EQ(Slurp(path), "two");
}

TEST_F(OutputFileTest, ASymbolicLinkIsFollowedAndStaysALink) {
  const std::string target = Path("target.json");
  const std::string link = Path("link.json");
  fs::create_symlink("target.json", link);  // relative, dangling: the target is created
  WriteOutputFile(link, "made");
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(target)));
  EXPECT_EQ(Slurp(target), "made");
  WriteOutputFile(link, "replaced");  // now the link's target exists: it is replaced
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_EQ(Slurp(target), "replaced");
  EXPECT_EQ(Entries(), (std::vector<std::string>{"link.json", "target.json"}));
}

TEST_F(OutputFileTest, AChainOfLinksIsFollowedToItsEndAcrossFolders) {
  fs::create_directories(dir_ / "sub");
  fs::create_symlink(dir_ / "sub" / "b.json", Path("a.json"));  // absolute
  fs::create_symlink("c.json", dir_ / "sub" / "b.json");         // relative to sub/
  WriteOutputFile(Path("a.json"), "end");
  EXPECT_EQ(Slurp((dir_ / "sub" / "c.json").string()), "end");
  EXPECT_TRUE(fs::is_symlink(Path("a.json")));
  EXPECT_TRUE(fs::is_symlink(dir_ / "sub" / "b.json"));
}

TEST_F(OutputFileTest, ALinkLoopIsRefused) {
  fs::create_symlink("b", Path("a"));
  fs::create_symlink("a", Path("b"));
  const std::string what = ErrorOf([&] { CheckOutputPath(Path("a"), "--json"); });
  EXPECT_EQ(what, "--json " + Path("a") + ": cannot write: too many levels of symbolic links");
}

TEST_F(OutputFileTest, AFifoIsWrittenInPlaceAndStaysAFifo) {
  const std::string fifo = Path("pipe");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::string received;
  std::thread reader([&] { received = Slurp(fifo); });
  WriteOutputFile(fifo, "streamed text");
  reader.join();
  EXPECT_EQ(received, "streamed text");
  EXPECT_TRUE(fs::is_fifo(fifo));
  EXPECT_EQ(Entries(), std::vector<std::string>{"pipe"});
}

TEST_F(OutputFileTest, ACharacterDeviceIsWrittenInPlaceAndNotReplaced) {
  const OutputTarget t = CheckOutputPath("/dev/null", "--trace");
  EXPECT_EQ(t.kind, OutputTarget::Kind::kStream);
  WriteOutputFile("/dev/null", "discarded");
  EXPECT_TRUE(fs::is_character_file("/dev/null"));
  // A link to it is followed to the device, which is written in place.
  fs::create_symlink("/dev/null", Path("null"));
  WriteOutputFile(Path("null"), "discarded");
  EXPECT_TRUE(fs::is_symlink(Path("null")));
  EXPECT_TRUE(fs::is_character_file("/dev/null"));
}

TEST_F(OutputFileTest, AFullDeviceReportsTheWriteError) {
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full here";
  EXPECT_EQ(ErrorOf([] { WriteOutputFile("/dev/full", "x", "--json"); }),
            "--json /dev/full: cannot write: no space left on device");
}

TEST_F(OutputFileTest, DashIsStandardOutput) {
  const OutputTarget t = CheckOutputPath("-", "--json");
  EXPECT_EQ(t.kind, OutputTarget::Kind::kDescriptor);
  EXPECT_EQ(t.fd, 1);
  ::testing::internal::CaptureStdout();
  WriteOutputFile("-", "{\"to\": \"stdout\"}\n");
  EXPECT_EQ(::testing::internal::GetCapturedStdout(), "{\"to\": \"stdout\"}\n");
  EXPECT_TRUE(Entries().empty());
}

TEST_F(OutputFileTest, DescriptorNamesWriteToTheDescriptor) {
  // /dev/stdout is standard output, whatever it is (a pipe's /proc link reads "pipe:[N]").
  EXPECT_EQ(CheckOutputPath("/dev/stdout").fd, 1);
  EXPECT_EQ(CheckOutputPath("/dev/stderr").fd, 2);
  ::testing::internal::CaptureStdout();
  WriteOutputFile("/dev/stdout", "through /dev/stdout\n");
  EXPECT_EQ(::testing::internal::GetCapturedStdout(), "through /dev/stdout\n");
  // A pipe's write end by its /proc and /dev/fd names, and through a link to one of them.
  int ends[2];
  ASSERT_EQ(::pipe(ends), 0);
  fs::create_symlink("/dev/fd/" + std::to_string(ends[1]), Path("to-pipe"));
  WriteOutputFile("/proc/self/fd/" + std::to_string(ends[1]), "one ");
  WriteOutputFile("/dev/fd/" + std::to_string(ends[1]), "two ");
  WriteOutputFile(Path("to-pipe"), "three");
  ::close(ends[1]);
  char buffer[64] = {};
  ASSERT_EQ(::read(ends[0], buffer, sizeof buffer), 13);
  EXPECT_EQ(std::string(buffer), "one two three");
  EXPECT_TRUE(fs::is_symlink(Path("to-pipe")));
  // The read end, and a closed descriptor, are refused.
  const std::string read_end = "/dev/fd/" + std::to_string(ends[0]);
  EXPECT_EQ(ErrorOf([&] { CheckOutputPath(read_end, "--json"); }), "--json " + read_end + ": cannot write: open for reading only");
  ::close(ends[0]);
  EXPECT_EQ(ErrorOf([&] { CheckOutputPath(read_end); }), read_end + ": cannot write: bad file descriptor");
  // "-" and /dev/stdout are one output.
  OutputSet set;
  set.Add("-", "--json");
  EXPECT_NE(ErrorOf([&] { set.Add("/dev/stdout", "--trace"); }).find("name the same file"), std::string::npos);
}

TEST_F(OutputFileTest, RefusalsNameThePathAndTheReason) {
  EXPECT_EQ(ErrorOf([&] { CheckOutputPath(dir_.string(), "--json"); }),
            "--json " + dir_.string() + ": cannot write: is a directory");
  const std::string missing = Path("no_such_dir/trace.json");
  EXPECT_EQ(ErrorOf([&] { CheckOutputPath(missing, "--trace"); }),
            "--trace " + missing + ": cannot write: folder " + Path("no_such_dir") + ": no such file or directory");
  std::ofstream(Path("file")) << "x";
  EXPECT_EQ(ErrorOf([&] { CheckOutputPath(Path("file/inside.json")); }),
            Path("file/inside.json") + ": cannot write: not a directory");
  if (fs::exists("/dev/loop0") && fs::is_block_file("/dev/loop0")) {
    EXPECT_EQ(ErrorOf([] { CheckOutputPath("/dev/loop0"); }), "/dev/loop0: cannot write: is a block device");
  }
  EXPECT_EQ(ErrorOf([] { CheckOutputPath("", "--json"); }), "--json: an empty file name");
  EXPECT_EQ(Entries(), std::vector<std::string>{"file"});
}

TEST_F(OutputFileTest, AFolderWithoutWritePermissionIsRefused) {
  if (::geteuid() == 0) GTEST_SKIP() << "root writes into any folder";
  fs::create_directories(dir_ / "locked");
  fs::permissions(dir_ / "locked", fs::perms::owner_read | fs::perms::owner_exec);
  const std::string path = (dir_ / "locked" / "out.json").string();
  EXPECT_EQ(ErrorOf([&] { CheckOutputPath(path); }),
            path + ": cannot write: folder " + (dir_ / "locked").string() + ": permission denied");
  fs::permissions(dir_ / "locked", fs::perms::owner_all);
}

TEST_F(OutputFileTest, TwoOutputsIntoOneFileAreRefusedButDevicesTakeAny) {
  OutputSet set;
  set.Add(Path("a.json"), "--json");
  EXPECT_EQ(ErrorOf([&] { set.Add(Path("a.json"), "--trace"); }),
            "--json " + Path("a.json") + " and --trace " + Path("a.json") + " name the same file");
  fs::create_symlink("a.json", Path("alias.json"));
  EXPECT_NE(ErrorOf([&] { set.Add(Path("alias.json"), "--trace"); }).find("name the same file"), std::string::npos);
  set.Add("-", "--json");
  EXPECT_NE(ErrorOf([&] { set.Add("-", "--trace"); }).find("name the same file"), std::string::npos);
  set.Add("/dev/null", "--trace");
  set.Add("/dev/null", "--trace");
  EXPECT_TRUE(set.WritesStdout());
}

TEST_F(OutputFileTest, ACommitThatFailsLeavesNoNewFileAndNoTemporary) {
  OutputSet set;
  const int first = set.Add(Path("first.json"), "--json");
  const int second = set.Add(Path("second.json"), "--trace");
  set.Set(first, "one");
  set.Set(second, "two");
  // Between the check and the commit, the second name becomes a non-empty folder: its rename
  // fails after the first file was renamed into place.
  fs::create_directories(dir_ / "second.json" / "inside");
  const std::string what = ErrorOf([&] { set.Commit(); });
  EXPECT_EQ(what.rfind("--trace " + Path("second.json") + ": cannot write: ", 0), 0u) << what;
  EXPECT_EQ(Entries(), std::vector<std::string>{"second.json"});
}

TEST_F(OutputFileTest, ACommitThatFailsKeepsAReplacedFileAsItWas) {
  const std::string kept = Path("kept.json");
  WriteOutputFile(kept, "old");
  fs::create_directories(dir_ / "sub");
  OutputSet set;
  const int a = set.Add(kept, "--json");
  const int b = set.Add((dir_ / "sub" / "trace.json").string(), "--trace");
  set.Set(a, "replacement");
  set.Set(b, "trace");
  fs::remove(dir_ / "sub");  // the second output's folder is gone by the time of the commit
  const std::string what = ErrorOf([&] { set.Commit(); });
  EXPECT_NE(what.find("--trace " + (dir_ / "sub" / "trace.json").string() + ": cannot write: "), std::string::npos)
      << what;
  EXPECT_EQ(Slurp(kept), "old");
  EXPECT_EQ(Entries(), std::vector<std::string>{"kept.json"});
}

TEST_F(OutputFileTest, WriteTextFileAtomicallyLeavesTheOldFileWhenItFails) {
  const std::string path = Path("progress.json");
  WriteTextFileAtomically(path, "old");
  fs::create_directories(dir_ / "taken" / "inside");
  const std::string what = ErrorOf([&] { WriteTextFileAtomically(Path("taken"), "{}"); });
  EXPECT_EQ(what.rfind(Path("taken") + ": cannot write: ", 0), 0u) << what;
  EXPECT_EQ(Slurp(path), "old");
  EXPECT_EQ(Entries(), (std::vector<std::string>{"progress.json", "taken"}));
}

}  // namespace
}  // namespace stagecraft
