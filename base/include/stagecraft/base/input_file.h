// Reading a file the user named: one clear InputError for each way it can fail ("PATH: cannot
// read: is a directory"), and a bound on how much is read, so that /dev/zero or a huge file
// is refused instead of exhausting memory.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace stagecraft {

// The limits of the formats users name on the command line or in a scenario, far above any
// real file of that kind (docs/reliability.md).
inline constexpr int64_t kMaxYamlBytes = int64_t{64} << 20;        // scenario, topology, profile
inline constexpr int64_t kMaxCsvBytes = int64_t{256} << 20;        // PyTorch schedule orders
inline constexpr int64_t kMaxJsonBytes = int64_t{1} << 30;         // metrics files and traces

// `text` without the UTF-8 byte-order mark that some editors put first (Windows' Notepad, Excel's
// "CSV UTF-8"): every text format read here skips it, as YAML does.
constexpr std::string_view WithoutByteOrderMark(std::string_view text) {
  constexpr std::string_view kBom = "\xEF\xBB\xBF";
  return text.starts_with(kBom) ? text.substr(kBom.size()) : text;
}

// The reason an I/O call failed, as a user reads it: "no such file or directory",
// "permission denied", "is a directory", ... (strerror, first letter lowered).
std::string FileErrorReason(int err);

// The name that reads standard input wherever a command reads one file.
inline constexpr std::string_view kStandardInput = "-";

// The whole file, at most `max_bytes`: a regular file, or standard input for `-`. Anything else
// (a directory, a FIFO, a socket, a device) is refused before it is opened for reading: a FIFO
// with no writer would block for ever, a device has no end. Throws InputError "PATH: cannot
// read: REASON", or "PATH: larger than N, the limit for WHAT" past the limit.
std::string ReadInputFile(const std::string& path, int64_t max_bytes, std::string_view what);

// Checks without reading that `path` names a file ReadInputFile can read (`-`, or an existing,
// readable regular file); throws InputError "PATH: cannot read: REASON". For files a command
// reads later, so that it fails before any work.
void CheckInputFile(const std::string& path);

}  // namespace stagecraft
