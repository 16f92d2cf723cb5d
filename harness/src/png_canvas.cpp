// The plots' canvas (png_canvas.h).
#include "png_canvas.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>

#include "stagecraft/base/error.h"

#ifdef STAGECRAFT_HAVE_STB
#define STB_IMAGE_WRITE_IMPLEMENTATION
#define STB_IMAGE_WRITE_STATIC
#include <stb_image_write.h>
#endif

namespace stagecraft::harness {
namespace {

// A 3 x 5 pixel font for the plots' labels: each glyph is five rows of three bits.
struct Glyph {
  char c;
  uint8_t rows[5];
};
constexpr Glyph kFont[] = {
    {'0', {7, 5, 5, 5, 7}}, {'1', {2, 6, 2, 2, 7}}, {'2', {7, 1, 7, 4, 7}}, {'3', {7, 1, 7, 1, 7}},
    {'4', {5, 5, 7, 1, 1}}, {'5', {7, 4, 7, 1, 7}}, {'6', {7, 4, 7, 5, 7}}, {'7', {7, 1, 1, 1, 1}},
    {'8', {7, 5, 7, 5, 7}}, {'9', {7, 5, 7, 1, 7}}, {'.', {0, 0, 0, 0, 2}}, {'/', {1, 1, 2, 4, 4}},
    {'-', {0, 0, 7, 0, 0}}, {'A', {2, 5, 7, 5, 5}}, {'B', {6, 5, 6, 5, 6}}, {'C', {7, 4, 4, 4, 7}},
    {'D', {6, 5, 5, 5, 6}}, {'E', {7, 4, 6, 4, 7}}, {'G', {7, 4, 5, 5, 7}}, {'H', {5, 5, 7, 5, 5}},
    {'I', {7, 2, 2, 2, 7}}, {'K', {5, 5, 6, 5, 5}}, {'L', {4, 4, 4, 4, 7}}, {'M', {5, 7, 7, 5, 5}},
    {'N', {6, 5, 5, 5, 5}}, {'O', {7, 5, 5, 5, 7}}, {'P', {7, 5, 7, 4, 4}}, {'R', {6, 5, 6, 5, 5}},
    {'S', {7, 4, 7, 1, 7}}, {'T', {7, 2, 2, 2, 2}}, {'U', {5, 5, 5, 5, 7}}, {'V', {5, 5, 5, 5, 2}},
    {'W', {5, 5, 7, 7, 5}}, {'Y', {5, 5, 2, 2, 2}}, {'F', {7, 4, 6, 4, 4}}, {'X', {5, 5, 2, 5, 5}},
    {'(', {1, 2, 2, 2, 1}}, {')', {4, 2, 2, 2, 4}}, {',', {0, 0, 0, 2, 4}}, {'Z', {7, 1, 2, 4, 7}},
    {'J', {1, 1, 1, 5, 7}}, {'Q', {7, 5, 5, 7, 1}}, {':', {0, 2, 0, 2, 0}}, {'+', {0, 2, 7, 2, 0}},
};

#ifdef STAGECRAFT_HAVE_STB
void AppendTo(void* context, void* data, int size) {
  static_cast<std::string*>(context)->append(static_cast<const char*>(data), static_cast<size_t>(size));
}
#endif

}  // namespace

void Canvas::Set(int x, int y, uint32_t color) {
  if (x < 0 || y < 0 || x >= w_ || y >= h_) return;
  uint8_t* p = &rgb_[(static_cast<size_t>(y) * w_ + x) * 3];
  p[0] = color >> 16 & 255;
  p[1] = color >> 8 & 255;
  p[2] = color & 255;
}

void Canvas::Fill(int x0, int y0, int x1, int y1, uint32_t color) {
  for (int y = y0; y <= y1; ++y) {
    for (int x = x0; x <= x1; ++x) Set(x, y, color);
  }
}

void Canvas::Line(int x0, int y0, int x1, int y1, uint32_t color) {
  const int dx = std::abs(x1 - x0), dy = -std::abs(y1 - y0), sx = x0 < x1 ? 1 : -1, sy = y0 < y1 ? 1 : -1;
  for (int err = dx + dy;;) {
    Fill(x0, y0, x0 + 1, y0 + 1, color);
    if (x0 == x1 && y0 == y1) break;
    const int e2 = 2 * err;
    if (e2 >= dy) err += dy, x0 += sx;
    if (e2 <= dx) err += dx, y0 += sy;
  }
}

void Canvas::Text(int x, int y, std::string_view text, int s, uint32_t color) {
  for (const char raw : text) {
    const char c = static_cast<char>(std::toupper(static_cast<unsigned char>(raw)));
    for (const Glyph& g : kFont) {
      if (g.c != c) continue;
      for (int row = 0; row < 5; ++row) {
        for (int col = 0; col < 3; ++col) {
          if (g.rows[row] >> (2 - col) & 1) Fill(x + col * s, y + row * s, x + col * s + s - 1, y + row * s + s - 1, color);
        }
      }
    }
    x += 4 * s;
  }
}

std::string Canvas::Png() const {
#ifdef STAGECRAFT_HAVE_STB
  std::string png;
  if (!stbi_write_png_to_func(AppendTo, &png, w_, h_, 3, rgb_.data(), w_ * 3)) {
    throw InputError("--plot: cannot encode the PNG");
  }
  return png;
#else
  throw InputError("--plot: this build has no PNG writer (install libstb-dev and build again)");
#endif
}

int Cell(double v, double lo, double hi, int cells) {
  const int c = static_cast<int>(std::floor((v - lo) / (hi - lo) * cells));
  return std::clamp(c, 0, cells - 1);
}

}  // namespace stagecraft::harness
