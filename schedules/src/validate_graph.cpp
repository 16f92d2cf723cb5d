// Communication checks and deadlock detection for Validate (Boost.Graph).
#include "validate_graph.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <queue>

#include <boost/graph/compressed_sparse_row_graph.hpp>
#include <boost/graph/strong_components.hpp>
#include <fmt/format.h>

#include "stagecraft/base/check.h"
#include "stagecraft/base/stop.h"
#include "stagecraft/schedules/edges.h"

namespace stagecraft::schedules::detail {

Pos& Units::Slot(OpKind kind, size_t unit) {
  SC_CHECK(Info(kind).number == ActionNumber::kMicrobatch, "no unit slot for STEP or REDUCE_GRAD");
  return of_kind[static_cast<size_t>(kind)][unit];
}

const Pos& Units::Producer(Flow flow, size_t unit) const {
  if (flow == Flow::kActivation) return At(OpKind::kF, unit);
  return At(OpKind::kB, unit).rank >= 0 ? At(OpKind::kB, unit) : At(OpKind::kI, unit);
}

std::string OpName(const Schedule& s, Pos p) {
  return fmt::format("rank {} #{} ({})", p.rank, p.index, ActionString(s.ops[p.rank][p.index], s.microbatches));
}

namespace {

template <typename Fn>
void ForEachCrossRankEdge(const Schedule& s, Fn&& fn) {
  ForEachEdge(s, [&](const Edge& e) {
    if (e.CrossesRanks()) fn(e);
  });
}

void CheckCommOp(const Schedule& s, Pos p, std::vector<Diagnostic>* diags) {
  const Op& op = s.ops[p.rank][p.index];
  const bool send = IsSend(op.kind);
  const std::optional<Edge> edge = CommEdge(s.shape, op);
  if (!edge) {
    diags->push_back({DiagCode::kCommMismatch, fmt::format("{}: stage {} has no neighbour to {} this", OpName(s, p),
                                                           op.stage, send ? "send" : "receive")});
    return;
  }
  // The stage and rank at the other end of the transfer.
  const int other = send ? edge->to_stage : edge->from_stage;
  const int other_rank = send ? edge->to_rank : edge->from_rank;
  if (other_rank == p.rank) {
    diags->push_back({DiagCode::kCommMismatch,
                      fmt::format("{}: stage {} is on the same rank, nothing to transfer", OpName(s, p), other)});
  } else if (op.peer != other_rank) {
    diags->push_back({DiagCode::kCommMismatch, fmt::format("{}: peer is rank {} but stage {} lives on rank {}",
                                                           OpName(s, p), op.peer, other, other_rank)});
  }
}

// FIFO matching per channel: the k-th SEND from a to b must be the k-th RECV at b from a.
void CheckChannelOrder(const Schedule& s, std::vector<Diagnostic>* diags, StopCheck& check) {
  // Each channel's SENDs and RECVs by position only (a schedule has millions); what one carries
  // is worked out when the two are compared, nullopt for a stage without that neighbour.
  std::map<std::pair<int, int>, std::vector<Pos>> sends, recvs;
  for (int r = 0; r < s.ranks(); ++r) {
    for (int i = 0; i < static_cast<int>(s.ops[r].size()); ++i) {
      check();
      const Op& op = s.ops[r][i];
      if (!IsComm(op.kind) || op.peer < 0 || op.peer >= s.ranks()) continue;
      (IsSend(op.kind) ? sends[{r, op.peer}] : recvs[{op.peer, r}]).push_back({r, i});
    }
  }
  auto carried = [&s](Pos p) { return CommEdge(s.shape, s.ops[p.rank][p.index]); };
  for (const auto& [channel, send_list] : sends) {
    const auto& recv_list = recvs[channel];
    const size_t n = std::min(send_list.size(), recv_list.size());
    for (size_t k = 0; k < n; ++k) {
      check();
      if (carried(send_list[k]) == carried(recv_list[k])) continue;
      diags->push_back({DiagCode::kCommMismatch,
                        fmt::format("channel rank {} -> rank {}: transfer #{} is sent by {} but received by {}",
                                    channel.first, channel.second, k, OpName(s, send_list[k]),
                                    OpName(s, recv_list[k]))});
      break;
    }
  }
}

// Kahn's peeling of the dependency graph: each rank's ops in order (op v before op v + 1 of the
// same rank; `offset[r]` is rank r's first vertex, `offset.back()` the count) plus `cross`,
// the cross-rank edges. True when every op can be taken once all its predecessors are, i.e.
// the graph has no cycle. Linear, stoppable, and sized by the cross-rank edges only; the
// strongly connected components that name a cycle are looked for only when there is one.
// `Index` holds a vertex or an edge count: 32 bits (half the memory) below 2^32 of each.
template <typename Index>
bool IsAcyclicAs(const std::vector<size_t>& offset, const std::vector<std::pair<size_t, size_t>>& cross,
                 StopCheck& check) {
  const size_t n = offset.back();
  std::vector<bool> first_of_rank(n + 1, false);
  for (size_t start : offset) first_of_rank[start] = true;
  // Cross-rank successors in compressed rows: those of v are next[first[v]] .. next[first[v + 1] - 1].
  std::vector<Index> first(n + 1, 0);
  std::vector<Index> waiting(n, 0);  // predecessors not taken yet
  for (const auto& [from, to] : cross) {
    check();
    ++first[from + 1];
    ++waiting[to];
  }
  for (size_t v = 0; v < n; ++v) {
    check();
    first[v + 1] += first[v];
    waiting[v] += first_of_rank[v] ? 0 : 1;
  }
  std::vector<Index> next(cross.size()), fill(first.begin(), first.end() - 1);
  for (const auto& [from, to] : cross) {
    check();
    next[fill[from]++] = static_cast<Index>(to);
  }
  fill = {};
  std::vector<size_t> ready;
  for (size_t start : offset) {
    if (start < n && waiting[start] == 0) ready.push_back(start);
  }
  size_t taken = 0;
  auto release = [&](size_t v) {
    if (--waiting[v] == 0) ready.push_back(v);
  };
  while (!ready.empty()) {
    check();
    const size_t v = ready.back();
    ready.pop_back();
    ++taken;
    if (!first_of_rank[v + 1]) release(v + 1);
    for (Index k = first[v]; k < first[v + 1]; ++k) release(next[k]);
  }
  return taken == n;
}

bool IsAcyclic(const std::vector<size_t>& offset, const std::vector<std::pair<size_t, size_t>>& cross,
               StopCheck& check) {
  constexpr size_t kNarrow = std::numeric_limits<uint32_t>::max();
  if (offset.back() < kNarrow && cross.size() < kNarrow) return IsAcyclicAs<uint32_t>(offset, cross, check);
  return IsAcyclicAs<size_t>(offset, cross, check);
}

}  // namespace

void CheckComms(const Schedule& s, const Units& u, std::vector<Diagnostic>* diags, const std::atomic<bool>* stop) {
  StopCheck check(stop);
  bool any_comm = false;
  for (int r = 0; r < s.ranks(); ++r) {
    for (int i = 0; i < static_cast<int>(s.ops[r].size()); ++i) {
      check();
      if (!IsComm(s.ops[r][i].kind)) continue;
      any_comm = true;
      CheckCommOp(s, {r, i}, diags);
    }
  }
  if (!any_comm && !s.lowered) return;
  const UnitIndex idx(s);
  ForEachCrossRankEdge(s, [&](const Edge& e) {
    check();
    const size_t from = idx(e.from_stage, e.step, e.microbatch), to = idx(e.to_stage, e.step, e.microbatch);
    const Pos producer = u.Producer(e.flow, from);
    const Pos consumer = u.Producer(e.flow, to);
    const Pos send = u.Send(e.flow, from);
    const Pos recv = u.Recv(e.flow, to);
    const char* what = e.flow == Flow::kActivation ? "activations" : "gradients";
    const auto unit = [&] { return fmt::format("step {} microbatch {}", e.step, e.microbatch); };
    if (send.rank < 0) {
      diags->push_back({DiagCode::kMissing, fmt::format("{}: no SEND of {} from stage {} to stage {}", unit(), what,
                                                        e.from_stage, e.to_stage)});
    } else if (producer.rank == send.rank && send.index < producer.index) {
      diags->push_back({DiagCode::kOrder, fmt::format("{} posted before its producer {}", OpName(s, send),
                                                      OpName(s, producer))});
    }
    if (recv.rank < 0) {
      diags->push_back({DiagCode::kMissing, fmt::format("{}: no RECV of {} at stage {} from stage {}", unit(), what,
                                                        e.to_stage, e.from_stage)});
    } else if (consumer.rank == recv.rank && recv.index > consumer.index) {
      diags->push_back({DiagCode::kOrder, fmt::format("{} posted after its consumer {}", OpName(s, recv),
                                                      OpName(s, consumer))});
    }
  });
  CheckChannelOrder(s, diags, check);
}

void FindDeadlocks(const Schedule& s, const Units& u, std::vector<Diagnostic>* diags, const std::atomic<bool>* stop) {
  StopCheck check(stop);
  std::vector<size_t> offset(s.ranks() + 1, 0);
  for (int r = 0; r < s.ranks(); ++r) offset[r + 1] = offset[r] + s.ops[r].size();
  auto vertex = [&](Pos p) { return offset[p.rank] + p.index; };
  // The cross-rank data edges: the consumer waits for the SEND when there is one, else for the
  // producer itself (compute_only form). Same-rank constraints are order checks instead.
  std::vector<std::pair<size_t, size_t>> edges;
  const UnitIndex idx(s);
  ForEachCrossRankEdge(s, [&](const Edge& e) {
    check();
    const size_t from = idx(e.from_stage, e.step, e.microbatch), to = idx(e.to_stage, e.step, e.microbatch);
    const Pos send = u.Send(e.flow, from);
    const Pos source = send.rank >= 0 ? send : u.Producer(e.flow, from);
    const Pos consumer = u.Producer(e.flow, to);
    if (source.rank >= 0 && consumer.rank >= 0 && source.rank != consumer.rank) {
      edges.emplace_back(vertex(source), vertex(consumer));
      // The second op of an overlapped pair starts with the first: its partner F waits too.
      if (consumer.index > 0 && s.ops[consumer.rank][consumer.index].overlapped) {
        edges.emplace_back(vertex(source), vertex({consumer.rank, consumer.index - 1}));
      }
    }
  });
  if (IsAcyclic(offset, edges, check)) return;
  // A cycle: the whole graph, each rank's order included, laid out once as a compressed sparse
  // row graph for its strongly connected components.
  for (int r = 0; r < s.ranks(); ++r) {
    for (size_t i = 1; i < s.ops[r].size(); ++i) edges.emplace_back(offset[r] + i - 1, offset[r] + i);
  }
  using Graph = boost::compressed_sparse_row_graph<boost::directedS>;
  const Graph g(boost::edges_are_unsorted_multi_pass, edges.begin(), edges.end(), offset.back());
  edges = {};

  std::vector<int> component(boost::num_vertices(g));
  const int n = boost::strong_components(
      g, boost::make_iterator_property_map(component.begin(), boost::get(boost::vertex_index, g)));
  std::vector<int> size(n, 0);
  for (int c : component) ++size[c];
  std::vector<Pos> pos_of(offset.back());
  for (int r = 0; r < s.ranks(); ++r) {
    for (int i = 0; i < static_cast<int>(s.ops[r].size()); ++i) pos_of[offset[r] + i] = {r, i};
  }
  std::vector<bool> reported(n, false);
  for (size_t v = 0; v < component.size(); ++v) {
    const int c = component[v];
    if (size[c] < 2 || reported[c]) continue;
    reported[c] = true;
    // Shortest cycle through v inside its component (BFS back to v).
    std::vector<long> parent(component.size(), -1);
    std::queue<size_t> q;
    q.push(v);
    long last = -1;
    while (!q.empty() && last < 0) {
      const size_t x = q.front();
      q.pop();
      for (auto [e, end] = boost::out_edges(x, g); e != end; ++e) {
        const size_t y = boost::target(*e, g);
        if (component[y] != c) continue;
        if (y == v) { last = static_cast<long>(x); break; }
        if (parent[y] >= 0) continue;
        parent[y] = static_cast<long>(x);
        q.push(y);
      }
    }
    std::vector<size_t> cycle;
    for (long x = last; x >= 0 && static_cast<size_t>(x) != v; x = parent[x]) cycle.push_back(x);
    cycle.push_back(v);
    std::reverse(cycle.begin(), cycle.end());
    constexpr size_t kShown = 12;
    std::string text;
    for (size_t k = 0; k < cycle.size() && k < kShown; ++k) text += (k ? " -> " : "") + OpName(s, pos_of[cycle[k]]);
    if (cycle.size() > kShown) text += fmt::format(" -> ... ({} ops)", cycle.size());
    text += " -> back to the first";
    diags->push_back({DiagCode::kDeadlock, fmt::format("cycle of {} ops: {}", cycle.size(), text)});
  }
}

}  // namespace stagecraft::schedules::detail
