// LoadTokenFile: the transformer's training.data (see gpt.h).
#include <cstring>
#include <fstream>
#include <iterator>

#include <fmt/format.h>

#include "stagecraft/base/error.h"
#include "stagecraft/exec/gpt.h"

namespace stagecraft::exec {
namespace {

constexpr int32_t kShardMagic = 20240520;  // llm.c's data shards
constexpr size_t kShardHeaderInts = 256;

}  // namespace

std::shared_ptr<const std::vector<int32_t>> LoadTokenFile(const std::string& path, int vocab, int seq) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(fmt::format("{}: training.data: cannot open the file", path));
  const std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  auto tokens = std::make_shared<std::vector<int32_t>>();
  int32_t header[3] = {};
  if (bytes.size() >= sizeof(header)) std::memcpy(header, bytes.data(), sizeof(header));
  if (bytes.size() >= kShardHeaderInts * sizeof(int32_t) && header[0] == kShardMagic) {
    const int32_t version = header[1];
    if (version != 1 && version != 2) {
      throw InputError(fmt::format("{}: training.data: llm.c shard version {} (expected 1: uint16 tokens, or 2: "
                                   "uint32)",
                                   path, version));
    }
    const size_t width = version == 1 ? 2 : 4;
    const size_t count = static_cast<size_t>(header[2] < 0 ? 0 : header[2]);
    const size_t have = (bytes.size() - kShardHeaderInts * sizeof(int32_t)) / width;
    if (header[2] < 0 || have < count) {
      throw InputError(fmt::format("{}: training.data: the header promises {} tokens, the file holds {}", path,
                                   header[2], have));
    }
    tokens->resize(count);
    const char* at = bytes.data() + kShardHeaderInts * sizeof(int32_t);
    for (size_t i = 0; i < count; ++i, at += width) {
      if (width == 2) {
        uint16_t v;
        std::memcpy(&v, at, 2);
        (*tokens)[i] = v;
      } else {
        uint32_t v;
        std::memcpy(&v, at, 4);
        (*tokens)[i] = v > INT32_MAX ? -1 : static_cast<int32_t>(v);
      }
    }
  } else {
    tokens->reserve(bytes.size());
    for (const char c : bytes) tokens->push_back(static_cast<unsigned char>(c));
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
