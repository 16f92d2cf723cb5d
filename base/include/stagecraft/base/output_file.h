// Output files of a command (DESIGN.md §7): every path is checked before any work starts, and
// nothing is written until everything is computed; writing never destroys what a path names.
//
//   "-" (standard output),         the open descriptor, written to in place (with the offset
//   /dev/stdout, /dev/stderr,      and append mode the shell gave it)
//   /dev/fd/N, /proc/self/fd/N
//   a regular file, or a new name  replaced atomically: a temporary beside it, renamed over it
//                                  (an existing file keeps its permission bits)
//   a symbolic link                followed: its final target is written by these rules (a
//                                  dangling link creates its target); the link stays a link
//   a FIFO, a character device     written in place, streaming (/dev/null, a terminal, a pipe)
//   a directory, a block device,   refused
//   a socket
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace stagecraft {

struct OutputTarget {
  enum class Kind { kFile, kStream, kDescriptor };
  std::string flag;      // the option that named it ("--json"), for messages; may be empty
  std::string path;      // as given
  std::string resolved;  // the file written: symbolic links followed (kDescriptor: as given)
  Kind kind = Kind::kFile;
  int fd = -1;           // kDescriptor: the open descriptor written to (1 for "-")
  bool existed = false;  // kFile: a file was there before (it is replaced, not created)
};

// Checks that `path` can be written as the table above says: for a regular file or a new
// name, its folder exists and is writable; a stream must be writable. Throws InputError
// "FLAG PATH: cannot write: REASON" ("is a directory", "permission denied", "no such file or
// directory" for a missing folder, "is a block device").
OutputTarget CheckOutputPath(const std::string& path, std::string_view flag = {});

// Writes `text` to `path` as the table above says (a single output; see OutputSet for several).
// Throws InputError naming the path; a regular file is then left as it was.
void WriteOutputFile(const std::string& path, std::string_view text, std::string_view flag = {});

// Writes a regular file (or a new one) atomically through a temporary in the same folder,
// renamed over it once complete; on failure the file is left as it was. For files a command
// owns, such as `execute`'s OUT.partial: it does not check what `path` names.
void WriteTextFileAtomically(const std::string& path, std::string_view text);

// The outputs of one command, as one transaction: Add checks each path up front (and refuses
// two names for the same file); Commit writes all texts. If Commit fails, no regular file is
// left new or changed: every text goes to a temporary first, streams are written next, and the
// renames come last (a failing rename removes the files this commit created). What a stream
// already received cannot be taken back.
class OutputSet {
 public:
  OutputSet() = default;
  OutputSet(const OutputSet&) = delete;
  OutputSet& operator=(const OutputSet&) = delete;

  // Checks `path` (CheckOutputPath) and returns its handle for Set.
  int Add(const std::string& path, std::string_view flag = {});
  const OutputTarget& target(int handle) const { return outputs_.at(static_cast<size_t>(handle)).target; }
  // True when some output is standard output (a command then prints its table to stderr).
  bool WritesStdout() const;

  void Set(int handle, std::string text);
  // Writes every output that was given a text; throws InputError naming the output that failed.
  void Commit();

 private:
  void CommitOrThrow();
  struct Output {
    OutputTarget target;
    std::string text;
    bool has_text = false;
    std::string temporary;  // kFile, during Commit
  };
  std::vector<Output> outputs_;
};

}  // namespace stagecraft
