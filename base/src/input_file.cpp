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
  const Fd in{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY)};
  if (in.fd < 0) CannotRead(path, errno);
  struct stat st {};
  if (::fstat(in.fd, &st) != 0) CannotRead(path, errno);
  if (S_ISDIR(st.st_mode)) CannotRead(path, EISDIR);
  const auto too_large = [&] {
    return InputError(fmt::format("{}: larger than {}, the limit for {}", path, LimitText(max_bytes), what));
  };
  std::string text;
  if (S_ISREG(st.st_mode)) {
    if (st.st_size > max_bytes) throw too_large();
    text.reserve(static_cast<size_t>(st.st_size));
  }
  // Read until the end, whatever the kind of file: a regular file may grow while it is read, and
  // a FIFO or a device has no size to go by.
  char chunk[1 << 16];
  for (;;) {
    const ssize_t n = ::read(in.fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) CannotRead(path, errno);
    if (n == 0) break;
    if (static_cast<int64_t>(text.size()) + n > max_bytes) throw too_large();
    text.append(chunk, static_cast<size_t>(n));
  }
  return text;
}

void CheckInputFile(const std::string& path) {
  if (path.empty()) throw InputError("an empty file name");
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) CannotRead(path, errno);
  if (S_ISDIR(st.st_mode)) CannotRead(path, EISDIR);
  if (::access(path.c_str(), R_OK) != 0) CannotRead(path, errno);
}

}  // namespace stagecraft
