// --screenshot: the back buffer of the frame just rendered, written as a PNG.
#pragma once

#include <string>

namespace stagecraft::viz::app {

// Reads the current framebuffer (width × height, RGB) and writes it to `path` as a PNG by the
// rules of output_file.h: a regular file atomically (a temporary beside it, then rename), a
// symbolic link's target (the link stays), a FIFO or device in place, "-" to standard output.
// Returns "" or a one-line error naming the path.
std::string WriteScreenshot(const std::string& path, int width, int height);

}  // namespace stagecraft::viz::app
