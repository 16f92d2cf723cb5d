// Validation internals shared by validate.cpp and validate_graph.cpp (private).
#pragma once

#include <array>
#include <atomic>
#include <string>
#include <vector>

#include "stagecraft/schedules/edges.h"
#include "stagecraft/schedules/validate.h"

namespace stagecraft::schedules::detail {

struct Pos {
  int rank = -1;
  int index = -1;
};

// Where each op of each (stage, step, microbatch) sits, and each STEP by stage and version.
struct Units {
  // By kind and unit, every kind of op that belongs to a microbatch (op_kinds.h ActionNumber).
  std::array<std::vector<Pos>, kNumOpKinds> of_kind;
  std::vector<std::vector<Pos>> steps;    // steps[stage][version]
  std::vector<std::vector<Pos>> reduces;  // REDUCE_GRADs: reduces[stage][version of their STEP]

  void Resize(size_t n, int stages) {
    for (const OpKindInfo& row : kOpKinds) {
      of_kind[static_cast<size_t>(row.kind)].assign(row.number == ActionNumber::kMicrobatch ? n : 0, Pos{});
    }
    steps.assign(stages, {});
    reduces.assign(stages, {});
  }
  const Pos& At(OpKind kind, size_t unit) const { return of_kind[static_cast<size_t>(kind)][unit]; }
  Pos& Slot(OpKind kind, size_t unit);
  // For an edge of `flow` out of / into `unit`: its producing (or consuming) op, F or B/I,
  // and the SEND on the producer's side / RECV on the consumer's side.
  const Pos& Producer(Flow flow, size_t unit) const;
  const Pos& Send(Flow flow, size_t unit) const { return At(CommKindOf(Stream::kSend, flow), unit); }
  const Pos& Recv(Flow flow, size_t unit) const { return At(CommKindOf(Stream::kRecv, flow), unit); }
};

std::string OpName(const Schedule& s, Pos p);  // "rank 1 #4 (1F3)"

// SEND/RECV checks: presence (when lowered), peers, placement around producer/consumer, and
// the FIFO order of each channel.
// `stop` as Validate's.
void CheckComms(const Schedule& s, const Units& units, std::vector<Diagnostic>* diags,
                const std::atomic<bool>* stop);

// OFFLOAD / RELOAD checks, rank by rank in list order: each copy names a tensor that exists,
// an OFFLOAD takes what is on the device and a RELOAD brings back what was offloaded, and no op
// reads a tensor (its activations, weight version, optimizer state) between the two.
void CheckCopies(const Schedule& s, std::vector<Diagnostic>* diags);

// Builds the dependency graph (per-rank order + cross-rank data edges) and reports each
// cycle as a deadlock with the ops on it. `stop` as Validate's.
void FindDeadlocks(const Schedule& s, const Units& units, std::vector<Diagnostic>* diags,
                   const std::atomic<bool>* stop);

}  // namespace stagecraft::schedules::detail
