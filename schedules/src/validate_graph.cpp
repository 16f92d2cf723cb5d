// Communication checks and deadlock detection for Validate (Boost.Graph).
#include "validate_graph.h"

#include <algorithm>
#include <map>
#include <queue>

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/strong_components.hpp>
#include <fmt/format.h>

#include "stagecraft/base/check.h"
#include "stagecraft/schedules/unit_index.h"

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
    case OpKind::kStep: break;
  }
  SC_CHECK(false, "no unit slot for STEP");
}

const Pos& Units::Producer(bool forward, size_t unit) const {
  if (forward) return f[unit];
  return b[unit].rank >= 0 ? b[unit] : i[unit];
}

std::string OpName(const Schedule& s, Pos p) {
  return fmt::format("rank {} #{} ({})", p.rank, p.index, ActionString(s.ops[p.rank][p.index], s.microbatches));
}

namespace {

// One cross-rank edge of the data flow: producer (stage `from`) to consumer (stage `to`).
struct Flow {
  bool forward;
  int from, to;
  int step, mb;
};

template <typename Fn>
void ForEachCrossRankFlow(const Schedule& s, Fn&& fn) {
  for (int step = 0; step < s.steps; ++step) {
    for (int stage = 0; stage + 1 < s.stages(); ++stage) {
      if (s.shape.RankOf(stage) == s.shape.RankOf(stage + 1)) continue;
      for (int mb = 0; mb < s.microbatches; ++mb) {
        fn(Flow{true, stage, stage + 1, step, mb});
        fn(Flow{false, stage + 1, stage, step, mb});
      }
    }
  }
}

void CheckCommOp(const Schedule& s, Pos p, std::vector<Diagnostic>* diags) {
  const Op& op = s.ops[p.rank][p.index];
  const bool send = op.kind == OpKind::kSendF || op.kind == OpKind::kSendB;
  const bool forward = op.kind == OpKind::kSendF || op.kind == OpKind::kRecvF;
  // The stage at the other end of the transfer.
  const int other = forward == send ? op.stage + 1 : op.stage - 1;
  if (other < 0 || other >= s.stages()) {
    diags->push_back({DiagCode::kCommMismatch, fmt::format("{}: stage {} has no neighbour to {} this", OpName(s, p),
                                                           op.stage, send ? "send" : "receive")});
    return;
  }
  if (s.shape.RankOf(other) == p.rank) {
    diags->push_back({DiagCode::kCommMismatch,
                      fmt::format("{}: stage {} is on the same rank, nothing to transfer", OpName(s, p), other)});
  } else if (op.peer != s.shape.RankOf(other)) {
    diags->push_back({DiagCode::kCommMismatch, fmt::format("{}: peer is rank {} but stage {} lives on rank {}",
                                                           OpName(s, p), op.peer, other, s.shape.RankOf(other))});
  }
}

// FIFO matching per channel: the k-th SEND from a to b must be the k-th RECV at b from a.
void CheckChannelOrder(const Schedule& s, std::vector<Diagnostic>* diags) {
  struct Item {
    bool forward;
    int producer_stage, step, mb;
    Pos pos;
    bool operator==(const Item& o) const {
      return forward == o.forward && producer_stage == o.producer_stage && step == o.step && mb == o.mb;
    }
  };
  std::map<std::pair<int, int>, std::vector<Item>> sends, recvs;
  for (int r = 0; r < s.ranks(); ++r) {
    for (int i = 0; i < static_cast<int>(s.ops[r].size()); ++i) {
      const Op& op = s.ops[r][i];
      if (!IsComm(op.kind) || op.peer < 0 || op.peer >= s.ranks()) continue;
      const bool forward = op.kind == OpKind::kSendF || op.kind == OpKind::kRecvF;
      if (op.kind == OpKind::kSendF || op.kind == OpKind::kSendB) {
        sends[{r, op.peer}].push_back({forward, op.stage, op.step, op.microbatch, {r, i}});
      } else {
        const int producer = forward ? op.stage - 1 : op.stage + 1;
        recvs[{op.peer, r}].push_back({forward, producer, op.step, op.microbatch, {r, i}});
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
  ForEachCrossRankFlow(s, [&](const Flow& fl) {
    const size_t from = idx(fl.from, fl.step, fl.mb), to = idx(fl.to, fl.step, fl.mb);
    const Pos producer = u.Producer(fl.forward, from);
    const Pos consumer = u.Producer(fl.forward, to);
    const Pos send = fl.forward ? u.send_f[from] : u.send_b[from];
    const Pos recv = fl.forward ? u.recv_f[to] : u.recv_b[to];
    const char* what = fl.forward ? "activations" : "gradients";
    const std::string unit = fmt::format("step {} microbatch {}", fl.step, fl.mb);
    if (send.rank < 0) {
      diags->push_back({DiagCode::kMissing, fmt::format("{}: no SEND of {} from stage {} to stage {}", unit, what,
                                                        fl.from, fl.to)});
    } else if (producer.rank == send.rank && send.index < producer.index) {
      diags->push_back({DiagCode::kOrder, fmt::format("{} posted before its producer {}", OpName(s, send),
                                                      OpName(s, producer))});
    }
    if (recv.rank < 0) {
      diags->push_back({DiagCode::kMissing, fmt::format("{}: no RECV of {} at stage {} from stage {}", unit, what,
                                                        fl.to, fl.from)});
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
  ForEachCrossRankFlow(s, [&](const Flow& fl) {
    const size_t from = idx(fl.from, fl.step, fl.mb), to = idx(fl.to, fl.step, fl.mb);
    const Pos send = fl.forward ? u.send_f[from] : u.send_b[from];
    const Pos source = send.rank >= 0 ? send : u.Producer(fl.forward, from);
    const Pos consumer = u.Producer(fl.forward, to);
    if (source.rank >= 0 && consumer.rank >= 0 && source.rank != consumer.rank) {
      boost::add_edge(vertex(source), vertex(consumer), g);
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
    diags->push_back({DiagCode::kDeadlock, fmt::format("deadlock: cycle of {} ops: {}", cycle.size(), text)});
  }
}

}  // namespace stagecraft::schedules::detail
