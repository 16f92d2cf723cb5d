// Communication checks and deadlock detection for Validate (Boost.Graph).
#include "validate_graph.h"

#include <algorithm>
#include <map>
#include <optional>
#include <queue>

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/strong_components.hpp>
#include <fmt/format.h>

#include "stagecraft/base/check.h"
#include "stagecraft/schedules/edges.h"

namespace stagecraft::schedules::detail {

Pos& Units::Slot(OpKind kind, size_t unit) {
  switch (kind) {
    case OpKind::kF: return f[unit];
    case OpKind::kB: return b[unit];
    case OpKind::kI: return i[unit];
    case OpKind::kW: return w[unit];
    case OpKind::kSendF: return send_f[unit];
    case OpKind::kRecvF: return recv_f[unit];
    case OpKind::kSendB: return send_b[unit];
    case OpKind::kRecvB: return recv_b[unit];
    case OpKind::kStep:
    case OpKind::kReduceGrad: break;
  }
  SC_CHECK(false, "no unit slot for STEP or REDUCE_GRAD");
}

const Pos& Units::Producer(Flow flow, size_t unit) const {
  if (flow == Flow::kActivation) return f[unit];
  return b[unit].rank >= 0 ? b[unit] : i[unit];
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
void CheckChannelOrder(const Schedule& s, std::vector<Diagnostic>* diags) {
  struct Item {
    std::optional<Edge> edge;  // what the op carries; nullopt for a stage without that neighbour
    Pos pos;
    bool operator==(const Item& o) const { return edge == o.edge; }
  };
  std::map<std::pair<int, int>, std::vector<Item>> sends, recvs;
  for (int r = 0; r < s.ranks(); ++r) {
    for (int i = 0; i < static_cast<int>(s.ops[r].size()); ++i) {
      const Op& op = s.ops[r][i];
      if (!IsComm(op.kind) || op.peer < 0 || op.peer >= s.ranks()) continue;
      if (IsSend(op.kind)) {
        sends[{r, op.peer}].push_back({CommEdge(s.shape, op), {r, i}});
      } else {
        recvs[{op.peer, r}].push_back({CommEdge(s.shape, op), {r, i}});
      }
    }
  }
  for (const auto& [channel, send_list] : sends) {
    const auto& recv_list = recvs[channel];
    const size_t n = std::min(send_list.size(), recv_list.size());
    for (size_t k = 0; k < n; ++k) {
      if (send_list[k] == recv_list[k]) continue;
      diags->push_back({DiagCode::kCommMismatch,
                        fmt::format("channel rank {} -> rank {}: transfer #{} is sent by {} but received by {}",
                                    channel.first, channel.second, k, OpName(s, send_list[k].pos),
                                    OpName(s, recv_list[k].pos))});
      break;
    }
  }
}

}  // namespace

void CheckComms(const Schedule& s, const Units& u, std::vector<Diagnostic>* diags) {
  bool any_comm = false;
  for (int r = 0; r < s.ranks(); ++r) {
    for (int i = 0; i < static_cast<int>(s.ops[r].size()); ++i) {
      if (!IsComm(s.ops[r][i].kind)) continue;
      any_comm = true;
      CheckCommOp(s, {r, i}, diags);
    }
  }
  if (!any_comm && !s.lowered) return;
  const UnitIndex idx(s);
  ForEachCrossRankEdge(s, [&](const Edge& e) {
    const size_t from = idx(e.from_stage, e.step, e.microbatch), to = idx(e.to_stage, e.step, e.microbatch);
    const Pos producer = u.Producer(e.flow, from);
    const Pos consumer = u.Producer(e.flow, to);
    const Pos send = u.Send(e.flow, from);
    const Pos recv = u.Recv(e.flow, to);
    const char* what = e.flow == Flow::kActivation ? "activations" : "gradients";
    const std::string unit = fmt::format("step {} microbatch {}", e.step, e.microbatch);
    if (send.rank < 0) {
      diags->push_back({DiagCode::kMissing, fmt::format("{}: no SEND of {} from stage {} to stage {}", unit, what,
                                                        e.from_stage, e.to_stage)});
    } else if (producer.rank == send.rank && send.index < producer.index) {
      diags->push_back({DiagCode::kOrder, fmt::format("{} posted before its producer {}", OpName(s, send),
                                                      OpName(s, producer))});
    }
    if (recv.rank < 0) {
      diags->push_back({DiagCode::kMissing, fmt::format("{}: no RECV of {} at stage {} from stage {}", unit, what,
                                                        e.to_stage, e.from_stage)});
    } else if (consumer.rank == recv.rank && recv.index > consumer.index) {
      diags->push_back({DiagCode::kOrder, fmt::format("{} posted after its consumer {}", OpName(s, recv),
                                                      OpName(s, consumer))});
    }
  });
  CheckChannelOrder(s, diags);
}

void FindDeadlocks(const Schedule& s, const Units& u, std::vector<Diagnostic>* diags) {
  using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS>;
  std::vector<size_t> offset(s.ranks() + 1, 0);
  for (int r = 0; r < s.ranks(); ++r) offset[r + 1] = offset[r] + s.ops[r].size();
  Graph g(offset.back());
  auto vertex = [&](Pos p) { return offset[p.rank] + p.index; };
  for (int r = 0; r < s.ranks(); ++r) {
    for (size_t i = 1; i < s.ops[r].size(); ++i) boost::add_edge(offset[r] + i - 1, offset[r] + i, g);
  }
  // Cross-rank data edges: the consumer waits for the SEND when there is one, else for the
  // producer itself (compute_only form). Same-rank constraints are order checks instead.
  const UnitIndex idx(s);
  ForEachCrossRankEdge(s, [&](const Edge& e) {
    const size_t from = idx(e.from_stage, e.step, e.microbatch), to = idx(e.to_stage, e.step, e.microbatch);
    const Pos send = u.Send(e.flow, from);
    const Pos source = send.rank >= 0 ? send : u.Producer(e.flow, from);
    const Pos consumer = u.Producer(e.flow, to);
    if (source.rank >= 0 && consumer.rank >= 0 && source.rank != consumer.rank) {
      boost::add_edge(vertex(source), vertex(consumer), g);
      // The second op of an overlapped pair starts with the first: its partner F waits too.
      if (consumer.index > 0 && s.ops[consumer.rank][consumer.index].overlapped) {
        boost::add_edge(vertex(source), vertex({consumer.rank, consumer.index - 1}), g);
      }
    }
  });

  std::vector<int> component(boost::num_vertices(g));
  const int n = boost::strong_components(g, component.data());
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
