// Tests for column_sums.h, the plan of the CUDA column sums (bias and LayerNorm weight
// gradients): over a sweep of shapes, the row chunks cover every row exactly once with none
// empty, the tiles cover every column, the grid stays within CUDA's limits, the GPU gets the
// blocks the plan aims for, and the scratch holds one partial per chunk, column and output.
#include "stagecraft/kernels/column_sums.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace stagecraft::kernels {
namespace {

const std::vector<int64_t> kRows = {1, 2, 7, 8, 9, 15, 16, 17, 37, 100, 255, 256, 1000, 1500, 8192, 65537, 1 << 20};
const std::vector<int64_t> kCols = {1, 2, 31, 32, 33, 75, 300, 768, 2048, 8192, 50257, 1 << 20};

std::string Shape(int64_t rows, int64_t cols) { return std::to_string(rows) + " x " + std::to_string(cols); }

TEST(ColumnSumPlan, ChunksCoverEveryRowOnceAndTilesEveryColumn) {
  for (const int64_t rows : kRows) {
    for (const int64_t cols : kCols) {
      SCOPED_TRACE(Shape(rows, cols));
      const ColumnSumPlan plan = PlanColumnSums(rows, cols);
      ASSERT_GE(plan.chunks, 1);
      ASSERT_GE(plan.rows_per_chunk, 1);
      // Chunk i holds rows [i·per, min((i + 1)·per, rows)): together all rows, the last one non-empty.
      EXPECT_GE(plan.chunks * plan.rows_per_chunk, rows);
      EXPECT_LT((plan.chunks - 1) * plan.rows_per_chunk, rows) << "the last chunk is empty";
      int64_t covered = 0;
      for (int64_t chunk = 0; chunk < plan.chunks; ++chunk) {
        const int64_t begin = chunk * plan.rows_per_chunk;
        covered += std::min(begin + plan.rows_per_chunk, rows) - begin;
      }
      EXPECT_EQ(covered, rows);
      EXPECT_GE(plan.column_tiles * kColumnTile, cols);
      EXPECT_LT((plan.column_tiles - 1) * kColumnTile, cols);
    }
  }
}

TEST(ColumnSumPlan, GridFitsCudaAndAimsForTheTargetBlocks) {
  for (const int64_t rows : kRows) {
    for (const int64_t cols : kCols) {
      SCOPED_TRACE(Shape(rows, cols));
      const ColumnSumPlan plan = PlanColumnSums(rows, cols);
      EXPECT_LE(plan.chunks, 65535) << "gridDim.y";
      EXPECT_LE(plan.column_tiles, (int64_t{1} << 31) - 1) << "gridDim.x";
      // A chunk holds at least kRowLanes rows (one per row lane) unless the tensor has fewer.
      EXPECT_GE(plan.rows_per_chunk, std::min<int64_t>(rows, kRowLanes));
      // As many blocks as aimed for, or as many as there are chunks of kRowLanes rows; rounding
      // the chunk size up may cost up to half the chunks, never more.
      const int64_t aimed = std::min(std::max<int64_t>(rows / kRowLanes, 1),
                                     (kColumnSumTargetBlocks + plan.column_tiles - 1) / plan.column_tiles);
      EXPECT_GE(2 * plan.chunks, aimed);
      EXPECT_LE(plan.chunks, std::max<int64_t>(aimed, 1));
    }
  }
}

TEST(ColumnSumPlan, HandWorkedShapes) {
  // A GPT's LayerNorm: 8192 rows of 768 → 24 tiles, ceil(1024 / 24) = 43 chunks of 191 rows.
  const ColumnSumPlan ln = PlanColumnSums(8192, 768);
  EXPECT_EQ(ln.column_tiles, 24);
  EXPECT_EQ(ln.rows_per_chunk, 191);
  EXPECT_EQ(ln.chunks, 43);
  // The MLP's bias: 256 rows of 8192 → 256 tiles, 4 chunks of 64 rows.
  const ColumnSumPlan mlp = PlanColumnSums(256, 8192);
  EXPECT_EQ(mlp.column_tiles, 256);
  EXPECT_EQ(mlp.chunks, 4);
  EXPECT_EQ(mlp.rows_per_chunk, 64);
  // One row: one chunk, whatever the width.
  EXPECT_EQ(PlanColumnSums(1, 50257).chunks, 1);
  EXPECT_EQ(PlanColumnSums(1, 50257).column_tiles, 1571);
}

TEST(ColumnSumPlan, ScratchHoldsOnePartialPerChunkColumnAndOutput) {
  EXPECT_EQ(ColumnSumScratchFloats(8192, 768, 1), 43 * 768);
  EXPECT_EQ(ColumnSumScratchFloats(8192, 768, 2), 2 * 43 * 768);
  EXPECT_EQ(ColumnSumScratchFloats(3, 5, 1), 5);
  // No shape, no plan and no scratch (the launchers reject such shapes before planning).
  EXPECT_EQ(PlanColumnSums(0, 5).chunks, 0);
  EXPECT_EQ(PlanColumnSums(5, 0).column_tiles, 0);
  EXPECT_EQ(ColumnSumScratchFloats(-1, 5, 2), 0);
  // Bounded whatever the rows: at most about kColumnSumTargetBlocks partials per column tile.
  for (const int64_t cols : kCols) {
    const int64_t tiles = PlanColumnSums(1 << 20, cols).column_tiles;
    EXPECT_LE(ColumnSumScratchFloats(1 << 20, cols, 1), (kColumnSumTargetBlocks / tiles + 1) * cols) << cols;
  }
}

}  // namespace
}  // namespace stagecraft::kernels
