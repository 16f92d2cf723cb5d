// LoadTokenFile: the transformer's training.data (see gpt.h).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "stagecraft/base/error.h"
#include "stagecraft/base/input_file.h"
#include "stagecraft/exec/gpt.h"

namespace stagecraft::exec {
namespace {

constexpr int32_t kShardMagic = 20240520;  // llm.c's data shards
constexpr size_t kShardHeaderInts = 256;

// The first `bytes` bytes of a regular file (all of it when shorter); `size` gets its size.
std::string ReadPrefix(const std::string& path, int64_t bytes, int64_t* size) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) throw InputError(fmt::format("{}: training.data: cannot read: {}", path, FileErrorReason(errno)));
  std::string text;
  int err = 0;
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    err = errno;
  } else if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw InputError(fmt::format("{}: training.data: not a regular file ({})", path,
                                 S_ISDIR(st.st_mode) ? "a directory" : "a device, FIFO or socket has no size to check"));
  } else {
    *size = st.st_size;
    text.resize(static_cast<size_t>(std::min<int64_t>(bytes, st.st_size)));
    size_t done = 0;
    while (done < text.size()) {
      const ssize_t n = ::read(fd, text.data() + done, text.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        err = n < 0 ? errno : EIO;
        break;
      }
      done += static_cast<size_t>(n);
    }
  }
  ::close(fd);
  if (err != 0) throw InputError(fmt::format("{}: training.data: cannot read: {}", path, FileErrorReason(err)));
  return text;
}

}  // namespace

std::shared_ptr<const std::vector<int32_t>> LoadTokenFile(const std::string& path, int vocab, int seq,
                                                          int64_t max_tokens) {
  constexpr int64_t kHeaderBytes = kShardHeaderInts * sizeof(int32_t);
  // Enough for the widest tokens of a shard; a text file's tokens are its bytes.
  const int64_t want = max_tokens > (INT64_MAX - kHeaderBytes) / 4 ? INT64_MAX : kHeaderBytes + 4 * max_tokens;
  int64_t file_bytes = 0;
  const std::string bytes = ReadPrefix(path, want, &file_bytes);
  auto tokens = std::make_shared<std::vector<int32_t>>();
  int32_t header[3] = {};
  if (bytes.size() >= sizeof(header)) std::memcpy(header, bytes.data(), sizeof(header));
  if (file_bytes >= kHeaderBytes && header[0] == kShardMagic) {
    const int32_t version = header[1];
    if (version != 1 && version != 2) {
      throw InputError(fmt::format("{}: training.data: llm.c shard version {} (expected 1: uint16 tokens, or 2: "
                                   "uint32)",
                                   path, version));
    }
    const int64_t width = version == 1 ? 2 : 4;
    const int64_t have = (file_bytes - kHeaderBytes) / width;
    if (header[2] < 0 || have < header[2]) {
      throw InputError(fmt::format("{}: training.data: the header promises {} tokens, the file holds {}", path,
                                   header[2], have));
    }
    const int64_t count = std::min<int64_t>({header[2], max_tokens, (static_cast<int64_t>(bytes.size()) - kHeaderBytes) / width});
    tokens->resize(static_cast<size_t>(count));
    const char* at = bytes.data() + kHeaderBytes;
    for (int64_t i = 0; i < count; ++i, at += width) {
      if (width == 2) {
        uint16_t v;
        std::memcpy(&v, at, 2);
        (*tokens)[static_cast<size_t>(i)] = v;
      } else {
        uint32_t v;
        std::memcpy(&v, at, 4);
        (*tokens)[static_cast<size_t>(i)] = v > INT32_MAX ? -1 : static_cast<int32_t>(v);
      }
    }
  } else {
    const size_t count = static_cast<size_t>(std::min<int64_t>(max_tokens, static_cast<int64_t>(bytes.size())));
    tokens->reserve(count);
    for (size_t i = 0; i < count; ++i) tokens->push_back(static_cast<unsigned char>(bytes[i]));
  }
  if (tokens->size() < static_cast<size_t>(seq) + 1) {
    throw InputError(fmt::format("{}: training.data: {} tokens, fewer than model.transformer.seq + 1 = {}", path,
                                 tokens->size(), seq + 1));
  }
  for (size_t i = 0; i < tokens->size(); ++i) {
    const int32_t v = (*tokens)[i];
    if (v < 0 || v >= vocab) {
      throw InputError(fmt::format("{}: training.data: token {} at position {} is outside model.transformer.vocab {}{}",
                                   path, v, i, vocab,
                                   header[0] == kShardMagic ? "" : " (a text file's tokens are its bytes, up to 255)"));
    }
  }
  return tokens;
}

}  // namespace stagecraft::exec
