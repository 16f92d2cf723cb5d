// The schedule IR as JSON: every field of Schedule and Op, one op object per line so large
// schedules stay readable and diffable. FromJson names the JSON path of any bad field.
#include "stagecraft/schedules/json_io.h"

#include <cstdint>
#include <utility>

#include <fmt/format.h>

#include "json_reader.h"
#include "json_writer.h"
#include "stagecraft/base/error.h"
#include "stagecraft/base/printable.h"
#include "stagecraft/schedules/unit_index.h"

namespace stagecraft::schedules {
namespace {

using Json = JsonValue;

void WriteOp(JsonWriter& w, const Op& op) {
  w.StartObject();
  WriteMembers(w, {{"kind", KindName(op.kind)}});
  WriteMembers(w, {IntMember{"stage", op.stage}, {"microbatch", op.microbatch}, {"step", op.step},
                   {"version", op.version}, {"peer", op.peer}});
  if (op.overlapped) {  // written only when set, so schedules without pairs read as before
    Key(w, "overlapped");
    w.Bool(true);
  }
  if (op.tensor != Tensor::kNone) WriteMembers(w, {{"tensor", TensorName(op.tensor)}});  // copies and all-to-alls
  w.EndObject();
}

// The header fields, one per line, in the order they are written.
void WriteHeader(JsonTextStream& out, JsonWriter& w, const Schedule& s) {
  auto line = [&](std::string_view key) {
    out.BreakLine(1);
    Key(w, key);
  };
  line("schedule");
  WriteString(w, s.name);
  for (const IntMember& m : {IntMember{"ranks", s.shape.ranks}, {"chunks", s.shape.chunks}}) {
    line(m.key);
    w.Int64(m.value);
  }
  line("placement");
  WriteString(w, PlacementName(s.shape.placement));
  for (const IntMember& m : {IntMember{"microbatches", s.microbatches}, {"steps", s.steps}}) {
    line(m.key);
    w.Int64(m.value);
  }
  line("weights");
  WriteString(w, PolicyName(s.weights));
  for (const auto& [key, value] : {std::pair<std::string_view, bool>{"recompute", s.recompute},
                                   {"vertical_sync", s.vertical_sync},
                                   {"lowered", s.lowered}}) {
    line(key);
    w.Bool(value);
  }
  if (s.data_parallel != 1) {  // written only with replicas: one-replica files stay as they were
    line("data_parallel");
    w.Int64(s.data_parallel);
  }
}

// Reads typed fields out of parsed JSON; every failure names the source and the JSON path.
class Reader {
 public:
  explicit Reader(std::string_view source) : source_(source) {}

  [[noreturn]] void Fail(std::string_view path, std::string_view what) const {
    throw InputError(fmt::format("{}: {}: {}", source_, path, what));
  }

  // `path` ends in the field's key ("ranks", "ops[1][3].kind"): the key is what follows the
  // last '.', or the whole path at the top level (npos + 1 == 0).
  const Json& Field(const Json& obj, const std::string& path) const {
    const std::string key = path.substr(path.find_last_of('.') + 1);
    const Json* value = FindMember(obj, key);
    if (value == nullptr) Fail(path, "missing field");
    return *value;
  }

  int32_t Int(const Json& obj, const std::string& path) const {
    const Json& j = Field(obj, path);
    if (!IsInteger(j)) Fail(path, fmt::format("expected an integer, got {}", TypeName(j)));
    if (!j.IsInt()) Fail(path, fmt::format("{} does not fit a 32-bit integer", NumberText(j)));
    return j.GetInt();
  }

  int32_t Positive(const Json& obj, const std::string& path) const {
    const int32_t value = Int(obj, path);
    if (value < 1) Fail(path, fmt::format("must be >= 1 (got {})", value));
    return value;
  }

  bool Bool(const Json& obj, const std::string& path) const {
    const Json& j = Field(obj, path);
    if (!j.IsBool()) Fail(path, fmt::format("expected true or false, got {}", TypeName(j)));
    return j.GetBool();
  }

  std::string String(const Json& obj, const std::string& path) const {
    const Json& j = Field(obj, path);
    if (!j.IsString()) Fail(path, fmt::format("expected a string, got {}", TypeName(j)));
    return std::string(StringOf(j));
  }

  const Json& Array(const Json& j, const std::string& path) const {
    if (!j.IsArray()) Fail(path, fmt::format("expected an array, got {}", TypeName(j)));
    return j;
  }

 private:
  std::string_view source_;
};

Op OpFromJson(const Reader& in, const Json& j, const std::string& path) {
  if (!j.IsObject()) in.Fail(path, fmt::format("expected an op object, got {}", TypeName(j)));
  Op op;
  const std::string kind = in.String(j, path + ".kind");
  if (!ParseKind(kind, &op.kind)) in.Fail(path + ".kind", fmt::format("unknown kind '{}'", kind));
  op.stage = in.Int(j, path + ".stage");
  op.microbatch = in.Int(j, path + ".microbatch");
  op.step = in.Int(j, path + ".step");
  op.version = in.Int(j, path + ".version");
  op.peer = in.Int(j, path + ".peer");
  if (FindMember(j, "overlapped") != nullptr) op.overlapped = in.Bool(j, path + ".overlapped");
  if (FindMember(j, "tensor") != nullptr) {
    const std::string tensor = in.String(j, path + ".tensor");
    if (!ParseTensor(tensor, &op.tensor)) {
      in.Fail(path + ".tensor", fmt::format("unknown tensor '{}' (expected activations, weights, optimizer or gradients)",
                                            Printable(tensor)));
    }
  }
  return op;
}

void HeaderFromJson(const Reader& in, const Json& j, Schedule* s) {
  s->name = in.String(j, "schedule");
  s->shape.ranks = in.Positive(j, "ranks");
  s->shape.chunks = in.Positive(j, "chunks");
  if (const std::string placement = in.String(j, "placement"); !ParsePlacement(placement, &s->shape.placement)) {
    in.Fail("placement", fmt::format("unknown placement '{}' (expected loop or v)", placement));
  }
  s->microbatches = in.Positive(j, "microbatches");
  s->steps = in.Positive(j, "steps");
  const std::string weights = in.String(j, "weights");
  if (!ParsePolicy(weights, &s->weights)) {
    in.Fail("weights", fmt::format("unknown weights policy '{}' (expected {})", weights, PolicyChoices()));
  }
  s->recompute = in.Bool(j, "recompute");
  s->vertical_sync = in.Bool(j, "vertical_sync");
  s->lowered = in.Bool(j, "lowered");
  if (FindMember(j, "data_parallel") != nullptr) s->data_parallel = in.Positive(j, "data_parallel");
}

}  // namespace

std::string_view PlacementName(Placement placement) { return placement == Placement::kV ? "v" : "loop"; }

bool ParsePlacement(std::string_view text, Placement* placement) {
  if (text != "loop" && text != "v") return false;
  *placement = text == "v" ? Placement::kV : Placement::kLoop;
  return true;
}

std::string ToJson(const Schedule& schedule) {
  // Header fields one per line, then each op compact on its own line: a pretty dump of the
  // whole tree would spend six lines per op.
  JsonTextStream out(256 + schedule.OpCount() * 80);
  JsonWriter w(out);
  w.StartObject();
  WriteHeader(out, w, schedule);
  out.BreakLine(1);
  Key(w, "ops");
  w.StartArray();
  for (const auto& rank_ops : schedule.ops) {
    out.BreakLine(2);
    w.StartArray();
    for (const Op& op : rank_ops) {
      out.BreakLine(3);
      WriteOp(w, op);
    }
    if (!rank_ops.empty()) out.BreakLine(2);
    w.EndArray();
  }
  if (!schedule.ops.empty()) out.BreakLine(1);
  w.EndArray();
  out.BreakLine(0);
  w.EndObject();
  return out.Take() + "\n";
}

Schedule FromJson(std::string_view text, std::string_view source) {
  rapidjson::Document root;
  if (JsonSyntaxError error; !ParseJson(text, &root, &error)) {
    throw InputError(fmt::format("{}: not valid JSON: {}", source, error.Located()));
  }
  const Reader in(source);
  if (!root.IsObject()) in.Fail("(root)", fmt::format("expected an object, got {}", TypeName(root)));
  Schedule s;
  HeaderFromJson(in, root, &s);
  const Json& ops = in.Array(in.Field(root, "ops"), "ops");
  if (ops.Size() != static_cast<size_t>(s.shape.ranks)) {
    in.Fail("ops", fmt::format("expected one list per rank ({}), got {}", s.shape.ranks, ops.Size()));
  }
  s.ops.resize(ops.Size());
  int64_t forwards = 0;
  for (rapidjson::SizeType r = 0; r < ops.Size(); ++r) {
    const std::string rank_path = fmt::format("ops[{}]", r);
    const Json& rank_ops = in.Array(ops[r], rank_path);
    s.ops[r].reserve(rank_ops.Size());
    for (rapidjson::SizeType i = 0; i < rank_ops.Size(); ++i) {
      s.ops[r].push_back(OpFromJson(in, rank_ops[i], fmt::format("{}[{}]", rank_path, i)));
      forwards += IsForward(s.ops[r].back().kind) ? 1 : 0;
    }
  }
  // Validate and the other passes index the shape's units densely.
  if (const std::string why = CheckUnitSpace(source, int64_t{s.shape.ranks} * s.shape.chunks, s.microbatches,
                                             s.steps, forwards);
      !why.empty()) {
    throw InputError(why);
  }
  return s;
}

}  // namespace stagecraft::schedules
