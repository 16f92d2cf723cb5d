// LoadLabeledSet: the MLP's training.data (see model.h).
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <string_view>

#include <fmt/format.h>

#include "stagecraft/base/error.h"
#include "stagecraft/base/input_file.h"
#include "stagecraft/exec/model.h"

namespace stagecraft::exec {
namespace {

constexpr int64_t kMaxSetBytes = int64_t{1} << 30;  // what one run may read

// The whole file, inflated when gzip-compressed (zlib reads a plain file as it is).
std::string ReadAll(const std::string& path) {
  CheckInputFile(path);  // a regular, readable file: gzopen would block on a FIFO
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) throw InputError(fmt::format("{}: training.data: cannot read: {}", path, FileErrorReason(errno)));
  std::string text;
  char buffer[1 << 16];
  int n = 0;
  while ((n = gzread(f, buffer, sizeof(buffer))) > 0) {
    text.append(buffer, static_cast<size_t>(n));
    if (static_cast<int64_t>(text.size()) > kMaxSetBytes) {
      gzclose(f);
      throw InputError(fmt::format("{}: training.data: over {} bytes of text", path, kMaxSetBytes));
    }
  }
  int err = 0;
  const char* why = n < 0 ? gzerror(f, &err) : nullptr;
  gzclose(f);
  if (why != nullptr) throw InputError(fmt::format("{}: training.data: cannot inflate: {}", path, why));
  return text;
}

// The numbers of one line; false when a cell is not a finite number.
bool Cells(std::string_view line, std::vector<double>* out) {
  out->clear();
  while (true) {
    const size_t comma = line.find(',');
    std::string_view cell = line.substr(0, comma);
    while (!cell.empty() && (cell.front() == ' ' || cell.front() == '\t')) cell.remove_prefix(1);
    while (!cell.empty() && (cell.back() == ' ' || cell.back() == '\t' || cell.back() == '\r')) cell.remove_suffix(1);
    double v = 0;
    const auto [end, ec] = std::from_chars(cell.data(), cell.data() + cell.size(), v);
    if (cell.empty() || ec != std::errc() || end != cell.data() + cell.size() || !std::isfinite(v)) return false;
    out->push_back(v);
    if (comma == std::string_view::npos) return true;
    line.remove_prefix(comma + 1);
  }
}

}  // namespace

std::shared_ptr<const LabeledSet> LoadLabeledSet(const std::string& path, int hidden) {
  const std::string text = ReadAll(path);
  auto set = std::make_shared<LabeledSet>();
  std::vector<double> features;  // row-major, `set->features` per row
  std::vector<double> cells;
  size_t at = 0;
  for (int64_t line_no = 1; at < text.size(); ++line_no) {
    const size_t end = std::min(text.find('\n', at), text.size());
    const std::string_view line(text.data() + at, end - at);
    at = end + 1;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    const auto fail = [&](const std::string& what) {
      throw InputError(fmt::format("{}: training.data: line {}: {}", path, line_no, what));
    };
    if (!Cells(line, &cells)) {
      if (set->rows == 0 && features.empty() && line_no == 1) continue;  // a header of names
      fail("expected numbers separated by commas (features, then the class)");
    }
    if (cells.size() < 2) fail("expected at least one feature and the class");
    const int width = static_cast<int>(cells.size()) - 1;
    if (set->rows == 0) {
      if (width > hidden) fail(fmt::format("{} features, more than model.mlp.hidden {}", width, hidden));
      set->features = width;
    } else if (width != set->features) {
      fail(fmt::format("{} features where the rows before have {}", width, set->features));
    }
    const double label = cells.back();
    if (label != std::floor(label) || label < 0 || label >= hidden) {
      fail(fmt::format("class {} is not an integer in [0, model.mlp.hidden {})", label, hidden));
    }
    features.insert(features.end(), cells.begin(), cells.end() - 1);
    set->labels.push_back(static_cast<float>(label));
    ++set->rows;
  }
  if (set->rows == 0) throw InputError(fmt::format("{}: training.data: no rows", path));
  // Each feature standardised over the set (a constant one becomes 0), then padded to hidden.
  set->x.assign(static_cast<size_t>(set->rows) * hidden, 0.0f);
  for (int c = 0; c < set->features; ++c) {
    double sum = 0, sum2 = 0;
    for (int64_t r = 0; r < set->rows; ++r) sum += features[r * set->features + c];
    const double mean = sum / static_cast<double>(set->rows);
    for (int64_t r = 0; r < set->rows; ++r) sum2 += std::pow(features[r * set->features + c] - mean, 2);
    const double sd = std::sqrt(sum2 / static_cast<double>(set->rows));
    for (int64_t r = 0; r < set->rows; ++r) {
      set->x[r * hidden + c] = sd > 0 ? static_cast<float>((features[r * set->features + c] - mean) / sd) : 0.0f;
    }
  }
  return set;
}

}  // namespace stagecraft::exec
