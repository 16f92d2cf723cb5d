// PyTorch torch.distributed.pipelining CSV interop: one row per rank, one action per cell.
// Export writes global microbatch indices and no STEPs; import parses strictly, rebuilds
// (step, microbatch) from the global index and lets AssignWeights restore versions and STEPs.
#include "stagecraft/schedules/csv_io.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "stagecraft/base/error.h"
#include "stagecraft/base/input_file.h"
#include "stagecraft/base/printable.h"
#include "stagecraft/schedules/edges.h"
#include "stagecraft/schedules/unit_index.h"
#include "stagecraft/schedules/weights.h"

namespace stagecraft::schedules {
namespace {

constexpr std::string_view kExpected = "(expected e.g. 0F0, 2I1, 1SEND_F0)";
constexpr std::string_view kBlank = " \t";
constexpr std::string_view kOverlapSuffix = ")OVERLAP_F_B";

// One parsed cell before the step split, kept with its position for later errors.
struct Cell {
  OpKind kind = OpKind::kF;
  int32_t stage = 0;
  int64_t global_microbatch = 0;
  int row = 0;  // 1-based
  int col = 0;  // 1-based cell number in the row
  bool overlapped = false;  // second half of an "(F;B)OVERLAP_F_B" cell (Op::overlapped)
};

struct CellError {
  std::string what;
};

std::string_view Trim(std::string_view text) {
  const size_t first = text.find_first_not_of(kBlank);
  if (first == std::string_view::npos) return {};
  const size_t last = text.find_last_not_of(kBlank);
  return text.substr(first, last - first + 1);
}

std::vector<std::string_view> Split(std::string_view text, char sep) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    const size_t end = text.find(sep, start);
    if (end == std::string_view::npos) {
      parts.push_back(text.substr(start));
      return parts;
    }
    parts.push_back(text.substr(start, end - start));
    start = end + 1;
  }
}

// Lines of the file with "\r\n" tolerated; the empty piece after a final "\n" is no line.
std::vector<std::string_view> Lines(std::string_view text) {
  std::vector<std::string_view> lines = Split(text, '\n');
  if (!lines.empty() && lines.back().empty()) lines.pop_back();
  for (auto& line : lines) {
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  }
  return lines;
}

bool IsBlankRow(std::string_view line) { return line.find_first_not_of(" \t,") == std::string_view::npos; }

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsKindChar(char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_'; }

// Parses the leading run of digits of `*rest` into `*value` and consumes it.
// Returns an empty string on success, else what is wrong with it.
std::string ParseNumber(std::string_view* rest, std::string_view what, std::string_view cell, int32_t* value) {
  size_t n = 0;
  while (n < rest->size() && IsDigit((*rest)[n])) ++n;
  if (n == 0) {
    if (!rest->empty() && rest->front() == '-') return fmt::format("negative {} in '{}'", what, Printable(cell));
    return fmt::format("missing {} number in '{}'", what, Printable(cell));
  }
  const auto [end, ec] = std::from_chars(rest->data(), rest->data() + n, *value);
  if (ec == std::errc::result_out_of_range) return fmt::format("{} out of range in '{}'", what, Printable(cell));
  rest->remove_prefix(n);
  return {};
}

// PyTorch's actions for FSDP-style sharding inside a pipeline, and its REDUCE_GRAD: they move
// no activation or gradient between stages, so an import skips them (Lower places this IR's
// REDUCE_GRADs anew from Schedule::data_parallel). Their microbatch is optional ("0UNSHARD").
constexpr std::string_view kSkippedKinds[] = {"UNSHARD", "RESHARD", "REDUCE_GRAD"};

// Strict "<digits><KIND><digits>"; STEP is rejected because the file never carries it. Sets
// *skip for an action of kSkippedKinds.
std::string ParseCell(std::string_view cell, Cell* out, bool* skip) {
  std::string_view rest = cell;
  int32_t stage = 0;
  *skip = false;
  if (std::string why = ParseNumber(&rest, "stage", cell, &stage); !why.empty()) return why;
  size_t n = 0;
  while (n < rest.size() && IsKindChar(rest[n])) ++n;
  const std::string_view kind_text = rest.substr(0, n);
  if (kind_text.empty()) return fmt::format("missing action kind in '{}'", Printable(cell));
  if (std::find(std::begin(kSkippedKinds), std::end(kSkippedKinds), kind_text) != std::end(kSkippedKinds)) {
    rest.remove_prefix(n);
    int32_t microbatch = 0;
    if (!rest.empty()) {
      if (std::string why = ParseNumber(&rest, "microbatch", cell, &microbatch); !why.empty()) return why;
      if (!rest.empty()) {
        return fmt::format("unexpected '{}' after the microbatch in '{}'", Printable(rest), Printable(cell));
      }
    }
    *skip = true;
    return {};
  }
  OpKind kind;
  if (!ParseKind(kind_text, &kind)) {
    return fmt::format("unknown action kind '{}' in '{}'", Printable(kind_text), Printable(cell));
  }
  if (ProducesVersion(kind)) return fmt::format("STEP is not a CSV action in '{}'", Printable(cell));
  if (IsCopy(kind)) {
    return fmt::format("{} is not a CSV action in '{}' (PyTorch's actions have no copies: use a JSON schedule)",
                       KindName(kind), Printable(cell));
  }
  if (IsAllToAll(kind)) {
    return fmt::format("ALL_TO_ALL is not a CSV action in '{}' (the scenario's pipeline.expert_parallel places them)",
                       Printable(cell));
  }
  rest.remove_prefix(n);
  int32_t microbatch = 0;
  if (std::string why = ParseNumber(&rest, "microbatch", cell, &microbatch); !why.empty()) return why;
  if (!rest.empty()) {
    return fmt::format("unexpected '{}' after the microbatch in '{}'", Printable(rest), Printable(cell));
  }
  out->kind = kind;
  out->stage = stage;
  out->global_microbatch = microbatch;
  return {};
}

std::vector<std::vector<Cell>> ParseRows(std::string_view text, std::string_view source) {
  std::vector<std::string_view> lines = Lines(WithoutByteOrderMark(text));
  while (!lines.empty() && IsBlankRow(lines.back())) lines.pop_back();
  if (lines.empty()) throw InputError(fmt::format("{}: no rows", source));
  std::vector<std::vector<Cell>> rows(lines.size());
  for (size_t r = 0; r < lines.size(); ++r) {
    const std::vector<std::string_view> cells = Split(lines[r], ',');
    for (size_t c = 0; c < cells.size(); ++c) {
      const std::string_view cell = Trim(cells[c]);
      if (cell.empty()) continue;  // an idle slot
      // An overlapped pair, "(0F7;7B3)OVERLAP_F_B" (DualPipe): an F then a B or an I, kept as a
      // pair (Op::overlapped on the second).
      const bool pair = cell.front() == '(' && cell.ends_with(kOverlapSuffix);
      std::vector<std::string_view> parts{cell};
      if (pair) {
        parts = Split(cell.substr(1, cell.size() - 1 - kOverlapSuffix.size()), ';');
        if (parts.size() != 2) {
          throw InputError(fmt::format("{}:{}:{}: an overlapped pair holds two actions, got '{}' {}", source, r + 1,
                                       c + 1, Printable(cell), kExpected));
        }
      }
      for (size_t k = 0; k < parts.size(); ++k) {
        Cell parsed;
        parsed.row = static_cast<int>(r) + 1;
        parsed.col = static_cast<int>(c) + 1;
        parsed.overlapped = pair && k == 1;
        bool skip = false;
        if (std::string why = ParseCell(Trim(parts[k]), &parsed, &skip); !why.empty()) {
          throw InputError(fmt::format("{}:{}:{}: {} {}", source, parsed.row, parsed.col, why, kExpected));
        }
        const bool wants = Info(parsed.kind).phase == (k == 0 ? Phase::kForward : Phase::kInputBackward);
        if (pair && (skip || !wants)) {
          throw InputError(fmt::format("{}:{}:{}: an overlapped pair is an F then a B or an I, got '{}'", source,
                                       parsed.row, parsed.col, Printable(cell)));
        }
        if (!skip) rows[r].push_back(parsed);
      }
    }
  }
  return rows;
}

void CheckOptions(const CsvImportOptions& options, std::string_view source) {
  if (options.chunks < 0) throw InputError(fmt::format("{}: chunks must be >= 0 (got {})", source, options.chunks));
  if (options.microbatches < 0) {
    throw InputError(fmt::format("{}: microbatches must be >= 0 (got {})", source, options.microbatches));
  }
  if (options.steps < 1) throw InputError(fmt::format("{}: steps must be >= 1 (got {})", source, options.steps));
}

// Which placement puts every stage a row names on that row's rank, as PyTorch's schedule
// validator infers its stage-to-rank map from the actions: the loop (stage s on rank s mod P)
// when it fits, else the V (two stages per rank, r and 2P − 1 − r). Throws naming the first rank
// that neither explains.
Placement InferPlacement(const std::vector<std::vector<Cell>>& rows, int64_t chunks, std::string_view source) {
  const int ranks = static_cast<int>(rows.size());
  std::string why_not;
  for (const Placement placement : {Placement::kLoop, Placement::kV}) {
    if (placement == Placement::kV && chunks != 2) break;
    const Shape shape{ranks, static_cast<int>(chunks), placement};
    bool fits = true;
    for (int r = 0; r < ranks && fits; ++r) {
      for (const Cell& cell : rows[r]) {
        if (cell.stage < shape.stages() && shape.RankOf(cell.stage) == r) continue;
        if (why_not.empty()) {
          why_not = fmt::format("{}:{}:{}: rank {} runs stage {}, which neither the loop placement (stage s on rank "
                                "s mod {}) nor the V placement (rank r holds stages r and {} - r) puts there",
                                source, cell.row, cell.col, r, cell.stage, ranks, 2 * ranks - 1);
        }
        fits = false;
        break;
      }
    }
    if (fits) return placement;
  }
  throw InputError(why_not);
}

}  // namespace

std::string ExportCsv(const Schedule& schedule, CsvForm form) {
  // PyTorch's _dump_csv writes each action's repr, "" for an idle slot, one row per rank; its
  // _load_csv (Python's csv.reader) takes "\n" as well as the "\r\n" csv.writer ends rows with.
  std::string out;
  for (const auto& rank_ops : schedule.ops) {
    std::vector<std::string> cells;
    for (size_t i = 0; i < rank_ops.size(); ++i) {
      const Op& op = rank_ops[i];
      if (ProducesVersion(op.kind)) continue;  // AssignWeights rebuilds STEPs on import
      if (IsAllToAll(op.kind)) continue;  // PyTorch has no form; a scenario's expert parallelism places them again
      if (ReducesGradients(op.kind)) {  // PyTorch's form names no microbatch
        if (form == CsvForm::kComputeComms) cells.push_back(fmt::format("{}REDUCE_GRAD", op.stage));
        continue;
      }
      if (IsCopy(op.kind)) {
        throw InputError(fmt::format("{}: rank {} has {}, and PyTorch's actions have no form for copies (OFFLOAD, "
                                     "RELOAD): write it as JSON",
                                     Printable(schedule.name), &rank_ops - schedule.ops.data(),
                                     ActionString(op, schedule.microbatches)));
      }
      if (IsComm(op.kind) && form == CsvForm::kComputeOnly) continue;
      if (op.overlapped && i > 0 && IsForward(rank_ops[i - 1].kind) && !cells.empty()) {
        cells.back() = fmt::format("({};{}){}", cells.back(), ActionString(op, schedule.microbatches),
                                   kOverlapSuffix.substr(1));
        continue;
      }
      cells.push_back(ActionString(op, schedule.microbatches));
    }
    out += fmt::format("{}\n", fmt::join(cells, ","));
  }
  return out;
}

Schedule ImportCsv(std::string_view text, std::string_view source, const CsvImportOptions& options) {
  CheckOptions(options, source);
  std::vector<std::vector<Cell>> rows = ParseRows(text, source);
  const bool repeat = options.repeat_one_step && options.microbatches > 0;
  const int ranks = static_cast<int>(rows.size());
  int32_t max_stage = 0;
  int64_t max_global = 0;
  int64_t forwards = 0;
  for (const auto& row : rows) {
    for (const Cell& cell : row) {
      if (repeat && cell.global_microbatch >= options.microbatches) {
        throw InputError(fmt::format("{}:{}:{}: microbatch {} is beyond one step of {} microbatches", source,
                                     cell.row, cell.col, cell.global_microbatch, options.microbatches));
      }
      max_stage = std::max(max_stage, cell.stage);
      max_global = std::max(max_global, cell.global_microbatch);
      forwards += IsForward(cell.kind) ? 1 : 0;
    }
  }

  // Without a microbatch count the whole file is one step.
  const int64_t chunks = options.chunks > 0 ? options.chunks : (int64_t{max_stage} + ranks) / ranks;
  const int64_t microbatches = options.microbatches > 0 ? options.microbatches : max_global + 1;
  const int64_t steps = options.microbatches > 0 ? options.steps : 1;
  // The passes keep dense per-(stage, step, microbatch) tables: a stray "0F2000000000" must be
  // an error here, not a multi-gigabyte allocation in AssignWeights.
  if (const std::string why =
          CheckUnitSpace(source, ranks * chunks, microbatches, steps, repeat ? forwards * steps : forwards);
      !why.empty()) {
    throw InputError(why);
  }
  if (repeat) {
    for (auto& row : rows) {
      const size_t one = row.size();
      for (int t = 1; t < options.steps; ++t) {
        for (size_t i = 0; i < one; ++i) {
          Cell next = row[i];
          next.global_microbatch += int64_t{t} * options.microbatches;
          row.push_back(next);
        }
      }
    }
  }

  const Placement placement = options.chunks > 0 ? options.placement : InferPlacement(rows, chunks, source);

  Schedule s;
  s.name = options.name;
  s.shape = Shape{ranks, static_cast<int>(chunks), placement};
  s.microbatches = static_cast<int>(microbatches);
  s.steps = static_cast<int>(steps);
  s.weights = options.weights;
  s.ops.resize(ranks);

  const int64_t total = int64_t{s.microbatches} * s.steps;
  for (int r = 0; r < ranks; ++r) {
    for (const Cell& cell : rows[r]) {
      if (cell.global_microbatch >= total) {
        throw InputError(fmt::format("{}:{}:{}: microbatch {} is beyond {} step(s) of {} microbatches", source,
                                     cell.row, cell.col, cell.global_microbatch, s.steps, s.microbatches));
      }
      Op op;
      op.kind = cell.kind;
      op.stage = cell.stage;
      op.overlapped = cell.overlapped;
      op.step = static_cast<int32_t>(cell.global_microbatch / s.microbatches);
      op.microbatch = static_cast<int32_t>(cell.global_microbatch % s.microbatches);
      if (IsComm(op.kind)) {
        op.peer = PeerOf(s.shape, op);
        s.lowered = true;
      }
      s.ops[r].push_back(op);
    }
  }
  AssignWeights(&s);
  return s;
}

}  // namespace stagecraft::schedules
