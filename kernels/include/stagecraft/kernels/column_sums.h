// How the CUDA launchers sum a [rows x cols] tensor over its rows, one sum per column (the bias
// gradient, LayerNorm's weight gradients): the columns in tiles of kColumnTile, the rows in
// chunks. Pass 1 gives each (tile, chunk) a block of kColumnTile x kRowLanes threads; thread
// (x, y) adds rows y, y + kRowLanes, ... of its chunk for column x of its tile, in order, and
// the block adds its kRowLanes partials per column in a fixed tree into a scratch array of
// chunks x cols partials. Pass 2 adds each column's partials in chunk order.
// The plan depends on rows and cols alone (not on the GPU), so the order of every addition,
// hence the result, is the same bit for bit on every run and every GPU. Host-only, so the
// plan is tested on the CPU.
#pragma once

#include <algorithm>
#include <cstdint>

namespace stagecraft::kernels {

inline constexpr int kColumnTile = 32;  // a warp reads 32 neighbouring floats of a row: 128 bytes
inline constexpr int kRowLanes = 8;     // threads per column in a block (kColumnTile x kRowLanes = 256)
// Pass 1 aims for about this many blocks (several per SM on any current GPU) by cutting the
// rows into more chunks when there are few column tiles, never below kRowLanes rows a chunk
// (fewer only when the whole tensor has fewer rows).
inline constexpr int64_t kColumnSumTargetBlocks = 1024;

struct ColumnSumPlan {
  int64_t column_tiles = 0;
  int64_t chunks = 0;          // row chunks: every one holds at least one row
  int64_t rows_per_chunk = 0;  // the last chunk may hold fewer
};

// An empty plan (no blocks, no scratch) unless rows, cols > 0.
constexpr ColumnSumPlan PlanColumnSums(int64_t rows, int64_t cols) {
  if (rows <= 0 || cols <= 0) return ColumnSumPlan{};
  const int64_t tiles = (cols + kColumnTile - 1) / kColumnTile;
  const int64_t most_chunks = std::max<int64_t>(rows / kRowLanes, 1);  // so chunks hold >= kRowLanes rows
  const int64_t wanted = (kColumnSumTargetBlocks + tiles - 1) / tiles;
  const int64_t chunks = std::clamp<int64_t>(wanted, 1, most_chunks);
  const int64_t per_chunk = (rows + chunks - 1) / chunks;
  // Recounted at that size, so that no chunk is empty (1500 rows for 187 chunks: 9 a chunk, which
  // fills 167).
  return ColumnSumPlan{tiles, (rows + per_chunk - 1) / per_chunk, per_chunk};
}

// Scratch floats the two passes need for `outputs` sums per column (1: the bias gradient; 2:
// LayerNorm's dgamma and dbeta).
constexpr int64_t ColumnSumScratchFloats(int64_t rows, int64_t cols, int outputs) {
  return outputs * PlanColumnSums(rows, cols).chunks * cols;
}

}  // namespace stagecraft::kernels
