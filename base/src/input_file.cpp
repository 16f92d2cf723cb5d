// Bounded, checked reading of files the user named (see input_file.h).
#include "stagecraft/base/input_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "stagecraft/base/error.h"

namespace stagecraft {
namespace {

std::string LimitText(int64_t bytes) {
  if (bytes >= (int64_t{1} << 30) && bytes % (int64_t{1} << 30) == 0) return fmt::format("{} GiB", bytes >> 30);
  if (bytes >= (int64_t{1} << 20) && bytes % (int64_t{1} << 20) == 0) return fmt::format("{} MiB", bytes >> 20);
  return fmt::format("{} bytes", bytes);
}

[[noreturn]] void CannotRead(const std::string& path, int err) {
  throw InputError(fmt::format("{}: cannot read: {}", path, FileErrorReason(err)));
}

// What a file that is not a regular one is, as a user reads it.
std::string_view KindOf(mode_t mode) {
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "not a regular file";
}

// Refuses everything but a regular file: a directory as "is a directory", a FIFO, a socket or a
// device by its kind. A FIFO with no writer would block the reader for ever, and a device has no
// end or size to go by, so none of them is opened for reading (docs/reliability.md, class 8).
void RequireRegular(const std::string& path, mode_t mode) {
  if (S_ISREG(mode)) return;
  if (S_ISDIR(mode)) CannotRead(path, EISDIR);
  throw InputError(fmt::format("{}: cannot read: {}, not a regular file (name a regular file, or - for standard input)",
                               path, KindOf(mode)));
}

// Closes the descriptor on every path out.
struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

std::string FileErrorReason(int err) {
  std::string reason = std::strerror(err);
  if (!reason.empty() && reason[0] >= 'A' && reason[0] <= 'Z' && !(reason.size() > 1 && reason[1] >= 'A' && reason[1] <= 'Z')) {
    reason[0] = static_cast<char>(reason[0] - 'A' + 'a');
  }
  return reason;
}

std::string ReadInputFile(const std::string& path, int64_t max_bytes, std::string_view what) {
  if (path.empty()) throw InputError("an empty file name");
  const bool standard_input = path == kStandardInput;
  const std::string name = standard_input ? "standard input" : path;
  if (!standard_input) {
    // Checked before the open: opening a FIFO for reading blocks until a writer comes.
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) CannotRead(path, errno);
    RequireRegular(path, st.st_mode);
  }
  // O_NONBLOCK: a path swapped for a FIFO since the check still cannot block the open, and the
  // fstat below refuses it.
  const Fd opened{standard_input ? -1 : ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)};
  const int fd = standard_input ? STDIN_FILENO : opened.fd;
  if (fd < 0) CannotRead(path, errno);
  struct stat st {};
  if (::fstat(fd, &st) != 0) CannotRead(name, errno);
  if (!standard_input) RequireRegular(path, st.st_mode);
  if (S_ISDIR(st.st_mode)) CannotRead(name, EISDIR);
  const auto too_large = [&] {
    return InputError(fmt::format("{}: larger than {}, the limit for {}", name, LimitText(max_bytes), what));
  };
  std::string text;
  if (S_ISREG(st.st_mode)) {
    if (st.st_size > max_bytes) throw too_large();
    text.reserve(static_cast<size_t>(st.st_size));
  }
  // Read until the end: a regular file may grow while it is read, and standard input (a pipe or
  // a terminal) has no size to go by.
  char chunk[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) CannotRead(name, errno);
    if (n == 0) break;
    if (static_cast<int64_t>(text.size()) + n > max_bytes) throw too_large();
    text.append(chunk, static_cast<size_t>(n));
  }
  return text;
}

void CheckInputFile(const std::string& path) {
  if (path.empty()) throw InputError("an empty file name");
  if (path == kStandardInput) return;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) CannotRead(path, errno);
  RequireRegular(path, st.st_mode);
  if (::access(path.c_str(), R_OK) != 0) CannotRead(path, errno);
}

}  // namespace stagecraft
