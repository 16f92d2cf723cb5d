// Tests for schedules/src/csv_io.cpp: round trips of every generator, hand-worked PyTorch CSV
// files lowered by the lock-step rule, validation of imported files, and malformed input.
#include "stagecraft/schedules/csv_io.h"

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "fuzz_corpus.h"
#include "generator_cases.h"
#include "stagecraft/base/error.h"
#include "stagecraft/schedules/generators.h"
#include "stagecraft/schedules/lower.h"
#include "stagecraft/schedules/validate.h"
#include "stagecraft/schedules/weights.h"

namespace stagecraft::schedules {
namespace {

using test_cases::GeneratorCase;

std::vector<GeneratorCase> AllCases() { return test_cases::SmallGeneratorCases(); }

std::string CaseName(const GeneratorCase& c) {
  std::ostringstream out;
  out << c.info->name << " ranks=" << c.params.ranks << " microbatches=" << c.params.microbatches
      << " chunks=" << c.params.chunks << " steps=" << c.params.steps;
  return out.str();
}

CsvImportOptions OptionsFor(const GeneratorCase& c) {
  CsvImportOptions options;
  options.name = std::string(c.info->name);
  options.chunks = c.params.chunks;
  options.placement = c.info->placement;
  options.microbatches = c.params.microbatches;
  options.steps = c.params.steps;
  options.weights = c.info->weights;
  return options;
}

// operator== says only "differ"; name the first difference so a failure is readable.
testing::AssertionResult SameSchedule(const Schedule& got, const Schedule& want) {
  if (got == want) return testing::AssertionSuccess();
  if (!(got.shape == want.shape) || got.microbatches != want.microbatches || got.steps != want.steps ||
      got.weights != want.weights || got.lowered != want.lowered || got.name != want.name ||
      got.ops.size() != want.ops.size()) {
    return testing::AssertionFailure() << "header differs (ranks " << got.ranks() << " vs " << want.ranks()
                                       << ", lowered " << got.lowered << " vs " << want.lowered << ")";
  }
  for (size_t r = 0; r < got.ops.size(); ++r) {
    for (size_t i = 0; i < std::max(got.ops[r].size(), want.ops[r].size()); ++i) {
      const bool in_got = i < got.ops[r].size(), in_want = i < want.ops[r].size();
      if (in_got && in_want && got.ops[r][i] == want.ops[r][i]) continue;
      return testing::AssertionFailure()
             << "rank " << r << " op " << i << ": got "
             << (in_got ? ActionString(got.ops[r][i], got.microbatches) : "-") << " want "
             << (in_want ? ActionString(want.ops[r][i], want.microbatches) : "-");
    }
  }
  return testing::AssertionFailure() << "differ";
}

std::string ReadFixture(const std::string& name) {
  std::ifstream in(std::string(STAGECRAFT_TEST_DATA) + "/csv/" + name, std::ios::binary);
  EXPECT_TRUE(in.good()) << name;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

Schedule ImportFixture(const std::string& name) { return ImportCsv(ReadFixture(name), name, CsvImportOptions{}); }

TEST(CsvIoTest, RoundTripsEveryGeneratorComputeOnly) {
  for (const GeneratorCase& c : AllCases()) {
    const Schedule generated = Generate(c.info->name, c.params);
    const std::string csv = ExportCsv(generated, CsvForm::kComputeOnly);
    EXPECT_TRUE(SameSchedule(ImportCsv(csv, "gen.csv", OptionsFor(c)), generated)) << CaseName(c) << "\n" << csv;
  }
}

bool HasComms(const Schedule& s) {
  for (const auto& rank_ops : s.ops) {
    for (const Op& op : rank_ops) {
      if (IsComm(op.kind)) return true;
    }
  }
  return false;
}

// The CSV carries every compute and comm op in order. Lower and AssignWeights place STEPs
// alike (after the SENDs that follow a stage's last backward), so re-assigning weights leaves
// Lower's output unchanged; only `lowered` differs for one rank, where there is nothing to send.
TEST(CsvIoTest, RoundTripsEveryGeneratorComputeComms) {
  for (const GeneratorCase& c : AllCases()) {
    const Schedule lowered = Lower(Generate(c.info->name, c.params));
    const std::string csv = ExportCsv(lowered, CsvForm::kComputeComms);
    Schedule want = lowered;
    AssignWeights(&want);
    EXPECT_TRUE(want == lowered) << CaseName(c) << ": AssignWeights moved a STEP of Lower's output";
    want.lowered = HasComms(want);
    EXPECT_EQ(want.lowered, c.params.ranks > 1) << CaseName(c);
    const Schedule imported = ImportCsv(csv, "gen.csv", OptionsFor(c));
    EXPECT_TRUE(SameSchedule(imported, want)) << CaseName(c) << "\n" << csv;
    for (const Diagnostic& d : Validate(imported)) ADD_FAILURE() << CaseName(c) << ": " << d.message;
  }
}

// With chunks = 0 and microbatches = 0 the shape comes from the file: one step, chunks from
// the highest stage, microbatches from the highest index.
TEST(CsvIoTest, InfersChunksAndMicrobatchesOfOneStep) {
  for (GeneratorCase c : AllCases()) {
    if (c.params.steps != 1) continue;
    // On one rank both placements put every stage there: the file cannot tell them apart.
    if (c.params.ranks == 1 && c.info->placement != Placement::kLoop) continue;
    const Schedule generated = Generate(c.info->name, c.params);
    CsvImportOptions options = OptionsFor(c);
    options.chunks = 0;
    options.microbatches = 0;
    options.steps = 7;  // ignored without a microbatch count
    const Schedule got = ImportCsv(ExportCsv(generated, CsvForm::kComputeOnly), "gen.csv", options);
    EXPECT_TRUE(SameSchedule(got, generated)) << CaseName(c);
  }
}

// 1F1B, p = 2, m = 2 over two steps; worked out from the 1F1B rule (rank r warms up with
// p-1-r forwards): microbatch indices are global (step 1 prints 2 and 3), STEPs are not written.
TEST(CsvIoTest, ExportsGlobalMicrobatchesWithoutSteps) {
  const Schedule s = Generate("1f1b", test_cases::Params(2, 2, 2));
  EXPECT_EQ(ExportCsv(s, CsvForm::kComputeOnly),
            "0F0,0F1,0B0,0B1,0F2,0F3,0B2,0B3\n"
            "1F0,1B0,1F1,1B1,1F2,1B2,1F3,1B3\n");
  const Schedule back =
      ImportCsv(ExportCsv(s, CsvForm::kComputeOnly), "x.csv", {.name = "1f1b", .microbatches = 2, .steps = 2});
  // rank 0: 0F0 0F1 0B0 0B1 STEP(version 1) 0F2 ...; 0F2 is step 1, microbatch 0, reads version 1.
  ASSERT_EQ(back.ops[0][4].kind, OpKind::kStep);
  EXPECT_EQ(back.ops[0][4].version, 1);
  const Op& f2 = back.ops[0][5];
  EXPECT_EQ(f2.kind, OpKind::kF);
  EXPECT_EQ(f2.step, 1);
  EXPECT_EQ(f2.microbatch, 0);
  EXPECT_EQ(f2.version, 1);
  EXPECT_TRUE(SameSchedule(back, s));
}

TEST(CsvIoTest, ExportsEmptyRankAsEmptyLine) {
  Schedule s;
  s.shape.ranks = 3;
  s.ops = {{Op{OpKind::kF, 0, 0, 0, 0, -1}}, {}, {Op{OpKind::kB, 2, 0, 0, 0, -1}}};
  EXPECT_EQ(ExportCsv(s, CsvForm::kComputeOnly), "0F0\n\n2B0\n");
}

TEST(CsvIoTest, ToleratesCrLfSpacesAndIdleCells) {
  const Schedule plain = ImportFixture("1f1b_2x2.csv");
  const Schedule messy =
      ImportCsv(" 0F0 , 0F1,,0B0,\t0B1 ,,\r\n1F0,1B0,1F1,1B1\r\n\r\n , ,\n", "1f1b_2x2.csv", CsvImportOptions{});
  EXPECT_EQ(messy, plain);
  EXPECT_EQ(plain.ranks(), 2);
  EXPECT_EQ(plain.shape.chunks, 1);
  EXPECT_EQ(plain.microbatches, 2);
  EXPECT_EQ(plain.steps, 1);
  EXPECT_FALSE(plain.lowered);
  EXPECT_EQ(plain.name, "imported");
}

TEST(CsvIoTest, LeadingEmptyRowIsARankWithNoOps) {
  const Schedule s = ImportCsv("\n1F0,1B0\n", "x.csv", CsvImportOptions{});
  ASSERT_EQ(s.ranks(), 2);
  EXPECT_TRUE(s.ops[0].empty());
  EXPECT_EQ(s.ops[1].size(), 3u);  // 1F0, 1B0 and the STEP AssignWeights adds
}

TEST(CsvIoTest, CommCellsSetPeersAndLowered) {
  const Schedule s = ImportCsv(
      "0F0,0SEND_F0,0RECV_B0,0B0\n"
      "1RECV_F0,1F0,1B0,1SEND_B0,1SEND_F0,0RECV_F0\n",
      "x.csv", CsvImportOptions{});
  EXPECT_TRUE(s.lowered);
  EXPECT_EQ(s.ops[0][1].kind, OpKind::kSendF);
  EXPECT_EQ(s.ops[0][1].peer, 1);
  EXPECT_EQ(s.ops[0][2].kind, OpKind::kRecvB);
  EXPECT_EQ(s.ops[0][2].peer, 1);
  EXPECT_EQ(s.ops[1][0].kind, OpKind::kRecvF);
  EXPECT_EQ(s.ops[1][0].peer, 0);
  // ops[1]: RECV_F, F, B, SEND_B, SEND_F, STEP, RECV_F (the STEP goes after the sends that
  // follow the last backward).
  const Op& send_b = s.ops[1][3];
  EXPECT_EQ(send_b.kind, OpKind::kSendB);
  EXPECT_EQ(send_b.peer, 0);
  EXPECT_EQ(s.ops[1][4].kind, OpKind::kSendF);  // stage 1 is the last stage: no next rank
  EXPECT_EQ(s.ops[1][4].peer, -1);
  EXPECT_EQ(s.ops[1][5].kind, OpKind::kStep);
  EXPECT_EQ(s.ops[1][6].kind, OpKind::kRecvF);  // stage 0 has no previous stage
  EXPECT_EQ(s.ops[1][6].peer, -1);
  EXPECT_FALSE(Validate(s).empty());
}

TEST(CsvIoTest, HandWrittenFilesValidateClean) {
  for (const char* name : {"1f1b_2x2.csv", "gpipe_3x3.csv"}) {
    const Schedule s = ImportFixture(name);
    for (const Diagnostic& d : Validate(s)) ADD_FAILURE() << name << ": " << d.message;
    for (const Diagnostic& d : Validate(Lower(s))) ADD_FAILURE() << name << " lowered: " << d.message;
  }
}

TEST(CsvIoTest, MissingBackwardIsReported) {
  const Schedule s = ImportFixture("1f1b_2x2_missing_backward.csv");
  bool missing = false;
  for (const Diagnostic& d : Validate(s)) missing = missing || d.code == DiagCode::kMissing;
  EXPECT_TRUE(missing);
}

// A compute_comms file imports with its own transfers, which Validate checks as they are:
// 1F1B on two ranks with a RECV moved after its consumer, or a SEND removed (the fuzz corpus
// keeps both). Lowering again drops them and gives a valid schedule.
TEST(CsvIoTest, TransfersOfTheFileAreKeptAndValidatedAsTheyAre) {
  const std::pair<const char*, const char*> cases[] = {
      {"transfers-recv-after-consumer.csv", "order: rank 1 #1 (1RECV_F0) posted after its consumer rank 1 #0 (1F0)"},
      {"transfers-send-removed.csv", "missing: step 0 microbatch 1: no SEND of activations from stage 0 to stage 1"},
  };
  for (const auto& [name, problem] : cases) {
    const Schedule s = ImportCsv(test_cases::FuzzCorpusText("csv", name), name, CsvImportOptions{});
    EXPECT_TRUE(s.lowered) << name;
    const auto diags = Validate(s);
    EXPECT_EQ(SummarizeDiagnostics(diags), std::string("1 problem(s): ") + problem) << name;
    for (const Diagnostic& d : Validate(Lower(s))) ADD_FAILURE() << name << " lowered again: " << d.message;
  }
}

// A cell's text is quoted in the error with its control bytes escaped (one plain line).
TEST(CsvIoTest, ControlBytesInACellAreEscapedInTheMessage) {
  try {
    ImportCsv(test_cases::FuzzCorpusText("csv", "control-bytes-in-a-cell.csv"), "c.csv", CsvImportOptions{});
    ADD_FAILURE() << "imported";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("c.csv:1:2: missing microbatch number in '0F\\x1b[2J1'"),
              std::string::npos)
        << e.what();
  }
}

// Lock-step lowering (lower.h), worked by hand. Each round visits rank 0 then rank 1; a rank
// places its next compute op if its input is there; a placed producer appends its SEND to its
// own list and the RECV to the consumer's list at that moment.
//   round 1: r0 0F0 -> r0 [0F0 0SEND_F0], r1 [1RECV_F0]; r1 1F0 (recv there) -> r1 += 1F0
//   round 2: r0 0F1 -> r0 += 0F1 0SEND_F1, r1 += 1RECV_F1; r1 1B0 (last stage, ready)
//            -> r1 += 1B0 1SEND_B0, r0 += 0RECV_B0
//   round 3: r0 0B0 (recv there) -> r0 += 0B0; r1 1F1 -> r1 += 1F1
//   round 4: r0 0B1 waits (no RECV_B1 yet); r1 1B1 -> r1 += 1B1 1SEND_B1, r0 += 0RECV_B1
//   round 5: r0 0B1 -> r0 += 0B1
TEST(CsvIoTest, Lowers1F1BTwoRanksAsWorkedByHand) {
  const Schedule lowered = Lower(ImportFixture("1f1b_2x2.csv"));
  EXPECT_EQ(ExportCsv(lowered, CsvForm::kComputeComms),
            "0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0RECV_B1,0B1\n"
            "1RECV_F0,1F0,1RECV_F1,1B0,1SEND_B0,1F1,1B1,1SEND_B1\n");
  EXPECT_EQ(ExportCsv(lowered, CsvForm::kComputeOnly), ReadFixture("1f1b_2x2.csv"));
}

// GPipe, 3 ranks x 3 microbatches (all F then all B), same rule, ranks visited 0, 1, 2:
//   rounds 1-3: r0 0Fk + 0SEND_Fk, r1 += 1RECV_Fk; r1 1Fk + 1SEND_Fk, r2 += 2RECV_Fk; r2 2Fk
//   round 4: r0 0B0 waits; r1 1B0 waits; r2 2B0 + 2SEND_B0, r1 += 1RECV_B0
//   round 5: r0 waits; r1 1B0 + 1SEND_B0, r0 += 0RECV_B0; r2 2B1 + 2SEND_B1, r1 += 1RECV_B1
//   round 6: r0 0B0; r1 1B1 + 1SEND_B1, r0 += 0RECV_B1; r2 2B2 + 2SEND_B2, r1 += 1RECV_B2
//   round 7: r0 0B1; r1 1B2 + 1SEND_B2, r0 += 0RECV_B2
//   round 8: r0 0B2
TEST(CsvIoTest, LowersGpipeThreeRanksAsWorkedByHand) {
  const Schedule lowered = Lower(ImportFixture("gpipe_3x3.csv"));
  EXPECT_EQ(ExportCsv(lowered, CsvForm::kComputeComms),
            "0F0,0SEND_F0,0F1,0SEND_F1,0F2,0SEND_F2,0RECV_B0,0B0,0RECV_B1,0B1,0RECV_B2,0B2\n"
            "1RECV_F0,1F0,1SEND_F0,1RECV_F1,1F1,1SEND_F1,1RECV_F2,1F2,1SEND_F2,"
            "1RECV_B0,1B0,1SEND_B0,1RECV_B1,1B1,1SEND_B1,1RECV_B2,1B2,1SEND_B2\n"
            "2RECV_F0,2F0,2RECV_F1,2F1,2RECV_F2,2F2,2B0,2SEND_B0,2B1,2SEND_B1,2B2,2SEND_B2\n");
}

struct BadCell {
  const char* text;
  int row;
  int col;
  const char* mentions;  // a word the message must contain
};

TEST(CsvIoTest, MalformedCellsNameRowAndColumn) {
  const std::vector<BadCell> cases = {
      {"0F0,0X0\n", 1, 2, "'X'"},
      {"0F0\n1F0,F0\n", 2, 2, "stage"},
      {"0F\n", 1, 1, "microbatch"},
      {"0F0\n\n ,0F-1\n", 3, 2, "negative"},
      {"0F0,0B0,0STEP1\n", 1, 3, "STEP"},
      {"0F99999999999\n", 1, 1, "range"},
      {"99999999999F0\n", 1, 1, "range"},
      {"0F0,99999999999\n", 1, 2, "range"},
      {"0F0,12\n", 1, 2, "kind"},
      {"0F0x\n", 1, 1, "x"},
      {"0SEND_X0\n", 1, 1, "SEND_X"},
  };
  for (const BadCell& c : cases) {
    try {
      ImportCsv(c.text, "bad.csv", CsvImportOptions{});
      ADD_FAILURE() << "no error for " << c.text;
    } catch (const InputError& e) {
      const std::string what = e.what();
      const std::string prefix = "bad.csv:" + std::to_string(c.row) + ":" + std::to_string(c.col) + ": ";
      EXPECT_EQ(what.rfind(prefix, 0), 0u) << what;
      EXPECT_NE(what.find(c.mentions), std::string::npos) << what;
      EXPECT_NE(what.find("(expected e.g. 0F0, 2I1, 1SEND_F0)"), std::string::npos) << what;
    }
  }
}

TEST(CsvIoTest, FileWithoutRowsIsAnError) {
  for (const char* text : {"", "\n\n", " , \r\n,\n"}) {
    try {
      ImportCsv(text, "empty.csv", CsvImportOptions{});
      ADD_FAILURE() << "no error for '" << text << "'";
    } catch (const InputError& e) {
      EXPECT_STREQ(e.what(), "empty.csv: no rows");
    }
  }
}

TEST(CsvIoTest, HugeIndicesAreAnErrorNotAnAllocation) {
  for (const char* text : {"0F2147483647\n", "0F0\n2000000000F0\n"}) {
    try {
      ImportCsv(text, "big.csv", CsvImportOptions{.chunks = 0, .microbatches = 0});
      ADD_FAILURE() << "no error for " << text;
    } catch (const InputError& e) {
      EXPECT_EQ(std::string(e.what()).rfind("big.csv: schedule too large", 0), 0u) << e.what();
    }
  }
}

// Found by fuzzing: a few cells whose indices span many more units than the file has forward
// actions, or options that do, were refused only at 2^29 units, after gigabytes of tables.
TEST(CsvIoTest, SparseIndicesAreAnErrorNotAnAllocation) {
  const auto error = [](const char* text, const CsvImportOptions& options) {
    try {
      ImportCsv(text, "sparse.csv", options);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error("0I369702621\n", CsvImportOptions{.chunks = 0}),
            "sparse.csv: 1 stages x 369702622 microbatches x 1 steps need 369702622 forward actions, one each, "
            "but there are 0");
  // One step repeated a billion times is refused before it is copied out.
  EXPECT_EQ(error("0F0,0B0\n", CsvImportOptions{.microbatches = 1, .steps = 1 << 30, .repeat_one_step = true}),
            "sparse.csv: schedule too large (1 stages x 1 microbatches x 1073741824 steps)");
  // Options whose product overflows 64 bits.
  EXPECT_EQ(error("0F0\n", CsvImportOptions{.chunks = INT32_MAX, .microbatches = INT32_MAX, .steps = INT32_MAX}),
            "sparse.csv: schedule too large (2147483647 stages x 2147483647 microbatches x 2147483647 steps)");
  // A file a few forward actions short still reaches Validate, which names each missing one.
  const Schedule short_one = ImportCsv("0F0,0B0,0B1\n", "short.csv", CsvImportOptions{.chunks = 0});
  EXPECT_EQ(short_one.microbatches, 2);
  EXPECT_FALSE(Validate(short_one).empty());
}

TEST(CsvIoTest, MicrobatchBeyondTheStepsNamesItsCell) {
  CsvImportOptions options;
  options.microbatches = 2;
  options.steps = 1;
  try {
    ImportCsv("0F0,0F1\n1F0,1F2\n", "x.csv", options);
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("x.csv:2:2: ", 0), 0u) << e.what();
  }
}

}  // namespace
}  // namespace stagecraft::schedules

namespace stagecraft::schedules {
namespace {

// A V schedule worked by hand, p = 2, m = 2 (GPipe order down the V and back): rank 0 holds
// stages 0 and 3, rank 1 stages 1 and 2.
constexpr char kVFile[] =
    "0F0,0F1,3F0,3F1,3B0,3B1,0B0,0B1\n"
    "1F0,1F1,2F0,2F1,2B0,2B1,1B0,1B1\n";

CsvImportOptions Inferred() {
  CsvImportOptions options;
  options.chunks = 0;
  return options;
}

TEST(CsvIoTest, InfersTheVPlacementFromTheStagesEachRankRuns) {
  const Schedule s = ImportCsv(kVFile, "v.csv", Inferred());
  EXPECT_EQ(s.shape.placement, Placement::kV);
  EXPECT_EQ(s.shape.chunks, 2);
  for (const Diagnostic& d : Validate(s)) ADD_FAILURE() << d.message;
  for (const Diagnostic& d : Validate(Lower(s))) ADD_FAILURE() << "lowered: " << d.message;
  // Told the loop placement, the same file puts stage 3 on rank 1, where row 1 does not run it.
  CsvImportOptions loop;
  loop.chunks = 2;
  EXPECT_FALSE(Validate(ImportCsv(kVFile, "v.csv", loop)).empty());
}

TEST(CsvIoTest, InfersTheLoopPlacementOfAnInterleavedFile) {
  const Schedule generated = Generate("interleaved", test_cases::Params(2, 4, 1, 2));
  const Schedule s = ImportCsv(ExportCsv(generated, CsvForm::kComputeOnly), "i.csv", Inferred());
  EXPECT_EQ(s.shape.placement, Placement::kLoop);
  EXPECT_EQ(s.shape.chunks, 2);
  EXPECT_TRUE(Validate(s).empty());
}

TEST(CsvIoTest, AFileNeitherPlacementExplainsNamesTheCell) {
  try {
    ImportCsv("0F0,3F0\n1F0,3F0\n", "odd.csv", Inferred());
    ADD_FAILURE() << "imported";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "odd.csv:1:2: rank 0 runs stage 3, which neither the loop placement (stage s on rank s mod 2) "
                           "nor the V placement (rank r holds stages r and 3 - r) puts there");
  }
}

// PyTorch's sharding actions (UNSHARD, RESHARD, REDUCE_GRAD, with or without a microbatch)
// are read and skipped: the file imports as it would without them.
TEST(CsvIoTest, SkipsPyTorchsShardingActions) {
  const std::string with =
      "0UNSHARD,0F0,0F1,3F0,3F1,3B0,3B1,0B0,0B1,0REDUCE_GRAD,3REDUCE_GRAD0,0RESHARD\n"
      "1UNSHARD,2UNSHARD,1F0,1F1,2F0,2F1,2B0,2B1,1B0,1B1,,1RESHARD\n";
  EXPECT_TRUE(SameSchedule(ImportCsv(with, "v.csv", Inferred()), ImportCsv(kVFile, "v.csv", Inferred())));
  try {
    ImportCsv("0UNSHARD1x\n", "bad.csv", Inferred());
    ADD_FAILURE() << "imported";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("bad.csv:1:1: unexpected 'x' after the microbatch in '0UNSHARD1x'"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace stagecraft::schedules

namespace stagecraft::schedules {
namespace {

// At m = p, stagecraft's interleaved follows Megatron-LM (every chunk-forward before the first
// backward); PyTorch's Interleaved1F1B caps the warm-up instead. PyTorch's order for p = 2,
// m = 2, v = 2, worked by hand from its rule (rank 1 warms up with (v-1)·m + 0 = 2), imports,
// validates and differs from ours on rank 1 only.
TEST(CsvIoTest, PyTorchsInterleavedOrderAtMEqualsPImports) {
  constexpr char kPyTorch[] =
      "0F0,0F1,2F0,2F1,2B0,2B1,0B0,0B1\n"
      "1F0,1F1,3F0,3B0,3F1,3B1,1B0,1B1\n";
  const Schedule theirs = ImportCsv(kPyTorch, "interleaved-pytorch.csv", Inferred());
  EXPECT_EQ(theirs.shape.placement, Placement::kLoop);
  EXPECT_EQ(theirs.shape.chunks, 2);
  for (const Diagnostic& d : Validate(Lower(theirs))) ADD_FAILURE() << d.message;
  const std::string ours = ExportCsv(Generate("interleaved", test_cases::Params(2, 2, 1, 2)), CsvForm::kComputeOnly);
  EXPECT_EQ(ours, "0F0,0F1,2F0,2F1,2B0,2B1,0B0,0B1\n1F0,1F1,3F0,3F1,3B0,3B1,1B0,1B1\n");
}

}  // namespace
}  // namespace stagecraft::schedules

namespace stagecraft::schedules {
namespace {

// An overlapped pair (DualPipe's "(F;B)OVERLAP_F_B") reads as its two ops in order, the second
// marked overlapped: 1F1B for p = 2, m = 4 with rank 0's 0F2 and 0B1 written as one pair imports
// as the plain file does but for that mark, and exports back to the same text. A pair that is
// not an F then a B or an I is refused at its cell.
TEST(CsvIoTest, ReadsAndWritesAnOverlappedPair) {
  const std::string plain = "0F0,0F1,0B0,0F2,0B1,0F3,0B2,0B3\n1F0,1B0,1F1,1B1,1F2,1B2,1F3,1B3\n";
  const std::string paired = "0F0,0F1,0B0,(0F2;0B1)OVERLAP_F_B,0F3,0B2,0B3\n1F0,1B0,1F1,1B1,1F2,1B2,1F3,1B3\n";
  const Schedule got = ImportCsv(paired, "p.csv", Inferred());
  Schedule want = ImportCsv(plain, "p.csv", Inferred());
  ASSERT_EQ(want.ops[0][4].kind, OpKind::kB);
  want.ops[0][4].overlapped = true;  // 0B1, after 0F2
  EXPECT_TRUE(SameSchedule(got, want));
  EXPECT_TRUE(Validate(got).empty());
  EXPECT_EQ(ExportCsv(got, CsvForm::kComputeOnly), paired);
  // Lowered, the pair stays one cell with its receives before it and its sends after it.
  const std::string comms = ExportCsv(Lower(got), CsvForm::kComputeComms);
  EXPECT_NE(comms.find("(0F2;0B1)OVERLAP_F_B,0SEND_F2"), std::string::npos) << comms;
  EXPECT_TRUE(SameSchedule(ImportCsv(comms, "c.csv", Inferred()), Lower(got)));

  const std::vector<std::pair<std::string, std::string>> bad = {
      {"(0F0;0B0;0F1)OVERLAP_F_B\n", "bad.csv:1:1: an overlapped pair holds two actions"},
      {"0F0,(0B0;0F1)OVERLAP_F_B\n", "bad.csv:1:2: an overlapped pair is an F then a B or an I"},
      {"0F0,(0F1;0W0)OVERLAP_F_B\n", "bad.csv:1:2: an overlapped pair is an F then a B or an I"},
      {"(0F0;0UNSHARD)OVERLAP_F_B\n", "bad.csv:1:1: an overlapped pair is an F then a B or an I"},
  };
  for (const auto& [text, message] : bad) {
    try {
      ImportCsv(text, "bad.csv", Inferred());
      ADD_FAILURE() << "imported " << text;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  }
}

// Pairs that cannot run fused are refused: one that overlaps its own forward (one stage: its B
// needs the F just before it), and, over two ranks, one whose backward needs its partner's
// output through the other rank (0B0 waits for 1B0, which waits for 0F0's activations: fused,
// 0F0 cannot start before 0B0's input is there, a cycle the lowering cannot break either).
TEST(CsvIoTest, APairWhoseHalvesDependOnEachOtherIsRefused) {
  const Schedule own = ImportCsv("(0F0;0B0)OVERLAP_F_B\n", "own.csv", Inferred());
  const auto own_diags = Validate(own);
  ASSERT_FALSE(own_diags.empty());
  EXPECT_NE(own_diags[0].message.find("overlaps its own forward"), std::string::npos) << own_diags[0].message;

  const Schedule chained = ImportCsv("(0F0;0B0)OVERLAP_F_B\n1F0,1B0\n", "chain.csv", Inferred());
  bool deadlock = false;
  for (const Diagnostic& d : Validate(chained)) deadlock = deadlock || d.code == DiagCode::kDeadlock;
  EXPECT_TRUE(deadlock);
  EXPECT_THROW(Lower(chained), InputError);
}

}  // namespace
}  // namespace stagecraft::schedules
