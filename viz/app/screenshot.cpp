// glReadPixels of the back buffer, rows flipped (GL's origin is bottom-left, PNG's top-left),
// then stb's PNG writer. The stb implementation is compiled here, static, so it cannot clash
// with a copy inside another library.
#include "screenshot.h"

#include <GL/gl.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#define STB_IMAGE_WRITE_IMPLEMENTATION
#define STB_IMAGE_WRITE_STATIC
#include <stb_image_write.h>

namespace stagecraft::viz::app {

std::string WriteScreenshot(const std::string& path, int width, int height) {
  if (width <= 0 || height <= 0) return "cannot take a screenshot of an empty window";
  const size_t row_bytes = static_cast<size_t>(width) * 3;
  std::vector<unsigned char> pixels(row_bytes * height);
  glReadBuffer(GL_BACK);
  glPixelStorei(GL_PACK_ALIGNMENT, 1);
  glReadPixels(0, 0, width, height, GL_RGB, GL_UNSIGNED_BYTE, pixels.data());
  if (const GLenum err = glGetError(); err != GL_NO_ERROR) {
    return "glReadPixels failed (GL error " + std::to_string(err) + ")";
  }
  std::vector<unsigned char> flipped(pixels.size());
  for (int y = 0; y < height; ++y) {
    std::memcpy(&flipped[static_cast<size_t>(y) * row_bytes], &pixels[static_cast<size_t>(height - 1 - y) * row_bytes],
                row_bytes);
  }
  const std::string tmp = path + ".tmp";
  if (!stbi_write_png(tmp.c_str(), width, height, 3, flipped.data(), static_cast<int>(row_bytes))) {
    std::remove(tmp.c_str());
    return path + ": cannot be written";
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    std::remove(tmp.c_str());
    return path + ": cannot be written (" + why + ")";
  }
  return "";
}

}  // namespace stagecraft::viz::app
