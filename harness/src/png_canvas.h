// A small RGB canvas for the PNG plots (plan --plot, execute --plot): lines two pixels wide,
// filled boxes, upper-case labels in a 3 x 5 pixel font, and the PNG (stb's writer). Internal
// to harness/src.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace stagecraft::harness {

class Canvas {
 public:
  Canvas(int w, int h) : w_(w), h_(h), rgb_(static_cast<size_t>(w) * h * 3, 255) {}
  void Set(int x, int y, uint32_t color);
  void Fill(int x0, int y0, int x1, int y1, uint32_t color);
  void Line(int x0, int y0, int x1, int y1, uint32_t color);  // Bresenham's, two pixels wide
  // Upper-case text at scale `s` from (x, y), its top left; a character the font lacks is a gap.
  void Text(int x, int y, std::string_view text, int s, uint32_t color);
  const std::vector<uint8_t>& rgb() const { return rgb_; }
  // The PNG; throws InputError ("--plot: ...") where the build has no PNG writer.
  std::string Png() const;

 private:
  int w_, h_;
  std::vector<uint8_t> rgb_;
};

// The pixel of a value along one axis of `cells` pixels from lo to hi, clamped to the axis.
int Cell(double v, double lo, double hi, int cells);

}  // namespace stagecraft::harness
