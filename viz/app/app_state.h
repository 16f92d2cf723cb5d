// What the viewer window holds: the opened traces (read-only, shared, owned apart from the view),
// how they pair up into predicted-vs-measured overlays, the messages to show, and the view state
// (a small plain struct). The panels read and change it; nothing here touches GL.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "stagecraft/viz/groups.h"
#include "stagecraft/viz/overlay.h"
#include "stagecraft/viz/timeline.h"
#include "stagecraft/viz/trace_set.h"

namespace stagecraft::viz::app {

struct OpenTrace {
  std::shared_ptr<const LoadedTrace> data;  // its summary: data->trace.summary
};

using viz::Group;  // a block of lanes (groups.h)

struct Message {
  std::string text;  // one line
  bool error = true;  // false: a warning (e.g. skipped ops)
};

struct Toggles {
  bool sub_lanes = false;   // predicted and measured as two sub-lanes instead of outline over fill
  bool bubbles = false;     // tint idle compute time per rank
  bool comm_lanes = true;   // send/recv lanes under each compute lane
  float disagree_pct = 20;  // outline a predicted op in red when its measured duration is off by more
  bool compute_only = true; // disagreement list: compute ops only (send/recv durations are waits)
  int memory_trace = -1;    // memory plot: -1 every trace, else one trace index
};

// A mouse selection being dragged (right button, or shift + left) to zoom to.
struct SelectDrag {
  bool active = false;
  float x0_px = 0;  // where it started, in view pixels
};

// File > Open: the path being typed and the last error, shown inline.
struct OpenDialog {
  bool pending = false;  // open the popup on the next frame
  std::string path;
  std::string error;
};

// The op the disagreement list last jumped to: outlined, and the lanes scroll to it once.
struct Jump {
  int group = -1;
  int matched = -1;
  bool scroll_pending = false;
};

struct AppState {
  std::vector<OpenTrace> traces;
  std::vector<Group> groups;
  std::vector<Message> load_messages;     // kept until the traces are closed
  std::vector<Message> overlay_messages;  // recomputed whenever the set of traces changes
  View view;
  Toggles toggles;
  SelectDrag select;
  Jump jump;
  bool fit_pending = true;      // fit all once the timeline knows its width
  OpenDialog open_dialog;
};

// Loads and indexes `path`, then regroups. A failure becomes a message in the window and one
// line on stderr ("stagecraft-view: error: PATH: why"), never an exception. Returns false on
// failure.
bool OpenTraceFile(AppState* state, const std::string& path);
// Adds a trace loaded without error, then regroups. Skipped events become a warning in the
// window and one line on stderr ("stagecraft-view: warning: PATH: 1 event skipped: event 12:
// \"dur\" is negative (-5)").
void AddTrace(AppState* state, std::shared_ptr<const LoadedTrace> trace);
void CloseAll(AppState* state);

// The shift that puts trace `trace_index` of `group` on the shared axis: display = t − shift.
// Every group starts at 0; a measured trace of an overlay is aligned at its first step start.
int64_t ShiftNs(const AppState& state, const Group& group, int trace_index);
int GroupRanks(const AppState& state, const Group& group);
// The latest display end over every group (0 when nothing is open).
int64_t DisplayEndNs(const AppState& state);

void FitAll(AppState* state);
// Centres the view on matched op `matched` of `group` (zooming in when it would be too small).
void JumpTo(AppState* state, int group, int matched);

}  // namespace stagecraft::viz::app
