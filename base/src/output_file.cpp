// Output files that never destroy (see output_file.h): symbolic links followed, streams written
// in place, regular files replaced atomically, and a command's outputs committed together.
#include "stagecraft/base/output_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include <fmt/format.h>

#include "stagecraft/base/error.h"
#include "stagecraft/base/input_file.h"

namespace stagecraft {
namespace {

constexpr int kMaxLinkHops = 40;  // as the kernel's own limit on symbolic links in a path

std::string Named(const std::string& path, std::string_view flag) {
  return flag.empty() ? path : fmt::format("{} {}", flag, path);
}

[[noreturn]] void CannotWrite(const std::string& path, std::string_view flag, const std::string& reason) {
  throw InputError(fmt::format("{}: cannot write: {}", Named(path, flag), reason));
}

std::string FolderOf(const std::string& path) {
  const std::string folder = std::filesystem::path(path).parent_path().string();
  return folder.empty() ? "." : folder;
}

// The descriptor a path names by number (/dev/fd/N, /proc/self/fd/N, /dev/stdout, /dev/stderr),
// or -1. Their links are not names of files: /proc/self/fd/1 of a pipe reads "pipe:[123]".
int DescriptorOf(const std::string& path) {
  if (path == "/dev/stdout") return STDOUT_FILENO;
  if (path == "/dev/stderr") return STDERR_FILENO;
  for (std::string_view prefix : {"/dev/fd/", "/proc/self/fd/"}) {
    if (path.rfind(prefix, 0) != 0 || path.size() == prefix.size() || path.size() > prefix.size() + 9) continue;
    int fd = 0;
    for (size_t i = prefix.size(); i < path.size(); ++i) {
      if (path[i] < '0' || path[i] > '9') return -1;
      fd = fd * 10 + (path[i] - '0');
    }
    return fd;
  }
  return -1;
}

// `path` with every symbolic link of its last component followed (the folders above it may be
// links: the kernel follows those), up to a descriptor's name (DescriptorOf). A path that does
// not exist is returned as it is.
std::string FollowLinks(const std::string& path, std::string_view flag) {
  std::string current = path;
  for (int hops = 0;; ++hops) {
    struct stat st {};
    if (DescriptorOf(current) >= 0) return current;
    if (::lstat(current.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return current;
    if (hops == kMaxLinkHops) CannotWrite(path, flag, FileErrorReason(ELOOP));
    std::string target(static_cast<size_t>(st.st_size > 0 ? st.st_size : 4096) + 1, '\0');
    const ssize_t n = ::readlink(current.c_str(), target.data(), target.size());
    if (n < 0) CannotWrite(path, flag, FileErrorReason(errno));
    target.resize(static_cast<size_t>(n));
    if (!target.empty() && target.front() != '/') target = (std::filesystem::path(FolderOf(current)) / target).string();
    current = target;
  }
}

mode_t Umask() {
  static const mode_t mask = [] {
    const mode_t old = ::umask(022);
    ::umask(old);
    return old;
  }();
  return mask;
}

// Writes all of `text` to `fd`; returns 0 or the errno of the failure.
int WriteAll(int fd, std::string_view text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n < 0 ? errno : EIO;
    done += static_cast<size_t>(n);
  }
  return 0;
}

// A complete temporary copy of `text` beside `file` (mode: the file's, or a new file's under
// the umask); returns its path. Throws InputError naming `file`; nothing is left behind then.
std::string WriteTemporary(const std::string& file, std::string_view text, std::string_view flag) {
  std::string name = file + ".tmp.XXXXXX";
  const int fd = ::mkostemp(name.data(), O_CLOEXEC);
  if (fd < 0) CannotWrite(file, flag, FileErrorReason(errno));
  struct stat st {};
  const mode_t mode = ::stat(file.c_str(), &st) == 0 && S_ISREG(st.st_mode) ? (st.st_mode & 07777) : (0666 & ~Umask());
  int err = ::fchmod(fd, mode) != 0 ? errno : 0;
  if (err == 0) err = WriteAll(fd, text);
  if (::close(fd) != 0 && err == 0) err = errno;  // NFS and full disks may report only here
  if (err != 0) {
    ::unlink(name.c_str());
    CannotWrite(file, flag, FileErrorReason(err));
  }
  return name;
}

void WriteStream(const OutputTarget& t, std::string_view text) {
  if (t.kind == OutputTarget::Kind::kDescriptor) {
    std::fflush(t.fd == STDERR_FILENO ? stderr : stdout);  // what the command printed there before comes first
    if (const int err = WriteAll(t.fd, text); err != 0) {
      CannotWrite(t.path == "-" ? "standard output" : t.path, t.flag, FileErrorReason(err));
    }
    return;
  }
  const int fd = ::open(t.resolved.c_str(), O_WRONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) CannotWrite(t.path, t.flag, FileErrorReason(errno));
  int err = WriteAll(fd, text);
  if (::close(fd) != 0 && err == 0) err = errno;
  if (err != 0) CannotWrite(t.path, t.flag, FileErrorReason(err));
}

// What makes two targets the same file: device and inode when it exists, else its absolute name.
std::string Identity(const OutputTarget& t) {
  if (t.kind == OutputTarget::Kind::kDescriptor) return fmt::format("fd {}", t.fd);
  struct stat st {};
  if (::stat(t.resolved.c_str(), &st) == 0) return fmt::format("{}:{}", st.st_dev, st.st_ino);
  return std::filesystem::absolute(t.resolved).lexically_normal().string();
}

}  // namespace

OutputTarget CheckOutputPath(const std::string& path, std::string_view flag) {
  OutputTarget t;
  t.flag = std::string(flag);
  t.path = path;
  if (path.empty()) throw InputError(fmt::format("{}an empty file name", flag.empty() ? "" : std::string(flag) + ": "));
  t.resolved = path == "-" ? "/dev/stdout" : FollowLinks(path, flag);
  if (const int fd = DescriptorOf(t.resolved); fd >= 0) {
    // An open descriptor: written to as it is, never replaced.
    const int mode = ::fcntl(fd, F_GETFL);
    if (mode < 0) CannotWrite(path, flag, FileErrorReason(EBADF));
    if ((mode & O_ACCMODE) == O_RDONLY) CannotWrite(path, flag, "open for reading only");
    t.kind = OutputTarget::Kind::kDescriptor;
    t.fd = fd;
    t.resolved = path;
    return t;
  }
  struct stat st {};
  if (::stat(t.resolved.c_str(), &st) != 0) {
    if (errno != ENOENT) CannotWrite(path, flag, FileErrorReason(errno));
    // A new file: its folder must exist and take new files.
    const std::string folder = FolderOf(t.resolved);
    struct stat dir {};
    if (::stat(folder.c_str(), &dir) != 0) CannotWrite(path, flag, fmt::format("folder {}: {}", folder, FileErrorReason(errno)));
    if (::access(folder.c_str(), W_OK | X_OK) != 0) CannotWrite(path, flag, fmt::format("folder {}: {}", folder, FileErrorReason(errno)));
    return t;
  }
  if (S_ISDIR(st.st_mode)) CannotWrite(path, flag, FileErrorReason(EISDIR));
  if (S_ISBLK(st.st_mode)) CannotWrite(path, flag, "is a block device");
  if (S_ISSOCK(st.st_mode)) CannotWrite(path, flag, "is a socket");
  if (::access(t.resolved.c_str(), W_OK) != 0) CannotWrite(path, flag, FileErrorReason(errno));
  if (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode)) {
    t.kind = OutputTarget::Kind::kStream;
    return t;
  }
  // A regular file is replaced through a temporary in its folder.
  const std::string folder = FolderOf(t.resolved);
  if (::access(folder.c_str(), W_OK | X_OK) != 0) CannotWrite(path, flag, fmt::format("folder {}: {}", folder, FileErrorReason(errno)));
  t.existed = true;
  return t;
}

void WriteOutputFile(const std::string& path, std::string_view text, std::string_view flag) {
  OutputSet set;
  set.Set(set.Add(path, flag), std::string(text));
  set.Commit();
}

void WriteTextFileAtomically(const std::string& path, std::string_view text) {
  const std::string temporary = WriteTemporary(path, text, {});
  if (::rename(temporary.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(temporary.c_str());
    CannotWrite(path, {}, FileErrorReason(err));
  }
}

int OutputSet::Add(const std::string& path, std::string_view flag) {
  Output o;
  o.target = CheckOutputPath(path, flag);
  // Two outputs into one file would leave only the last; two onto standard output would mix.
  // Character devices (/dev/null) take any number.
  struct stat st {};
  const bool device = o.target.kind == OutputTarget::Kind::kStream && ::stat(o.target.resolved.c_str(), &st) == 0 &&
                      S_ISCHR(st.st_mode);
  if (!device) {
    const std::string identity = Identity(o.target);
    for (const Output& earlier : outputs_) {
      if (Identity(earlier.target) == identity) {
        throw InputError(fmt::format("{} and {} name the same file", Named(earlier.target.path, earlier.target.flag),
                                     Named(path, flag)));
      }
    }
  }
  outputs_.push_back(std::move(o));
  return static_cast<int>(outputs_.size()) - 1;
}

bool OutputSet::WritesStdout() const {
  for (const Output& o : outputs_) {
    if (o.target.kind == OutputTarget::Kind::kDescriptor && o.target.fd == STDOUT_FILENO) return true;
  }
  return false;
}

void OutputSet::Set(int handle, std::string text) {
  Output& o = outputs_.at(static_cast<size_t>(handle));
  o.text = std::move(text);
  o.has_text = true;
}

void OutputSet::Commit() {
  try {
    CommitOrThrow();
  } catch (...) {
    for (Output& o : outputs_) {
      if (!o.temporary.empty()) ::unlink(o.temporary.c_str());
      o.temporary.clear();
    }
    throw;
  }
}

void OutputSet::CommitOrThrow() {
  // 1. Every regular file's text, complete, in a temporary beside it.
  for (Output& o : outputs_) {
    if (o.has_text && o.target.kind == OutputTarget::Kind::kFile) {
      o.temporary = WriteTemporary(o.target.resolved, o.text, o.target.flag);
    }
  }
  // 2. Streams, in place.
  for (const Output& o : outputs_) {
    if (o.has_text && o.target.kind != OutputTarget::Kind::kFile) WriteStream(o.target, o.text);
  }
  // 3. The renames; a failure takes back the files this commit created.
  for (size_t i = 0; i < outputs_.size(); ++i) {
    Output& o = outputs_[i];
    if (o.temporary.empty()) continue;
    if (::rename(o.temporary.c_str(), o.target.resolved.c_str()) != 0) {
      const int err = errno;
      for (size_t k = 0; k < i; ++k) {
        const Output& done = outputs_[k];
        if (done.has_text && done.target.kind == OutputTarget::Kind::kFile && !done.target.existed) {
          ::unlink(done.target.resolved.c_str());
        }
      }
      CannotWrite(o.target.path, o.target.flag, FileErrorReason(err));
    }
    o.temporary.clear();
  }
}

}  // namespace stagecraft
