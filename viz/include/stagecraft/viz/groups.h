// How the open traces pair up into blocks on the viewer's shared time axis (kept apart from the
// window so it is tested without a display): each measured trace overlays the first predicted
// trace of the same schedule that is not a replay (else a replay of it, if that is all there
// is); a replay of a run (a predicted trace with costs "replay:...", `stagecraft replay
// --trace-out`) joins the overlaid group of its schedule, and is drawn as its own block right
// under it, so the prediction, the measurement and the replay sit side by side and the summary
// splits the error in two (schedules::SplitError). Everything else is a block of its own.
#pragma once

#include <string>
#include <vector>

#include "stagecraft/viz/overlay.h"
#include "stagecraft/viz/trace_set.h"

namespace stagecraft::viz {

// Whether `trace` is a replay of a measured run (a predicted trace from its own op times).
bool IsReplay(const schedules::Trace& trace);
// What the window calls its source: "replay" for a replay, else the header's source.
std::string SourceLabel(const schedules::Trace& trace);

// One block of lanes on the shared time axis: one schedule, either a lone trace or a predicted
// and a measured trace overlaid (matched by (rank, op_index)).
struct Group {
  int predicted = -1;  // index into the traces; a lone trace that is not "measured" sits here
  int measured = -1;
  // An overlaid group: the replay of its run (index into the traces), -1 if none is open. It is
  // drawn by the lone block that follows, whose `replay_block` is set.
  int replay = -1;
  bool replay_block = false;
  Overlay overlay;     // meaningful when Overlaid()
  bool Overlaid() const { return predicted >= 0 && measured >= 0; }
  int Lone() const { return predicted >= 0 ? predicted : measured; }
};

struct Grouping {
  std::vector<Group> groups;          // in the order their first trace was opened
  std::vector<std::string> messages;  // overlays refused, one line each (MatchTraces words them)
};

// The blocks of `traces` (in the order they were opened).
Grouping GroupTraces(const std::vector<const LoadedTrace*>& traces);

}  // namespace stagecraft::viz
