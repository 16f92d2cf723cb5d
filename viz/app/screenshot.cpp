// glReadPixels of the back buffer, rows flipped (GL's origin is bottom-left, PNG's top-left),
// encoded by stb's PNG writer in memory and written by WriteOutputFile (output_file.h). The stb
// implementation is compiled here, static, so it cannot clash with a copy inside another library.
#include "screenshot.h"

#include <GL/gl.h>

#include <cstring>
#include <vector>

#define STB_IMAGE_WRITE_IMPLEMENTATION
#define STB_IMAGE_WRITE_STATIC
#include <stb_image_write.h>

#include "stagecraft/base/error.h"
#include "stagecraft/base/output_file.h"

namespace stagecraft::viz::app {
namespace {

void AppendTo(void* context, void* data, int size) {
  static_cast<std::string*>(context)->append(static_cast<const char*>(data), static_cast<size_t>(size));
}

}  // namespace

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
  std::string png;
  if (!stbi_write_png_to_func(AppendTo, &png, width, height, 3, flipped.data(), static_cast<int>(row_bytes))) {
    return "--screenshot " + path + ": cannot encode the PNG";
  }
  try {
    WriteOutputFile(path, png, "--screenshot");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace stagecraft::viz::app
