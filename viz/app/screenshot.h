// --screenshot: the back buffer of the frame just rendered, written as a PNG.
#pragma once

#include <string>

namespace stagecraft::viz::app {

// Reads the current framebuffer (width × height, RGB) and writes it to `path` atomically (a
// temporary file in the same folder, then rename). Returns "" or a one-line error.
std::string WriteScreenshot(const std::string& path, int width, int height);

}  // namespace stagecraft::viz::app
