// stagecraft-view: the Dear ImGui window (GLFW + OpenGL3) over one or more trace files.
//   stagecraft-view TRACE.json [TRACE.json ...] [--screenshot OUT.png [--frames N]]
//                   [--width W] [--height H] [--range START_MS:END_MS] [--bubbles]
// Interactive, a bad trace opens as a message in the window (and one line on stderr), never a
// crash. With --screenshot, the output path is checked first and a trace that cannot be loaded
// is one error line and exit 1, with no window opened and no picture written.
#include <GLFW/glfw3.h>
#include <imgui.h>
#include <imgui_impl_glfw.h>
#include <imgui_impl_opengl3.h>

#include <cfloat>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "app_state.h"
#include "panels.h"
#include "screenshot.h"
#include "stagecraft/base/error.h"
#include "stagecraft/base/output_file.h"

namespace {

namespace app = stagecraft::viz::app;

constexpr char kUsage[] =
    "usage: stagecraft-view TRACE.json [TRACE.json ...] [--screenshot OUT.png [--frames N]] "
    "[--width W] [--height H] [--range START_MS:END_MS] [--bubbles]";
constexpr char kFont[] = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";

struct Options {
  std::vector<std::string> traces;
  std::string screenshot;  // empty: interactive
  int frames = 3;          // frames rendered before the screenshot (layout settles in two)
  int width = 1600, height = 900;
  bool has_range = false;
  double range_ms[2] = {0, 0};
  bool bubbles = false;  // start with the bubble view on (key B)
};

bool ParseInt(const std::string& text, int low, int high, int* out) {
  char* end = nullptr;
  const long v = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || v < low || v > high) return false;
  *out = static_cast<int>(v);
  return true;
}

bool ParseRange(const std::string& text, double* range_ms) {
  const size_t colon = text.find(':');
  if (colon == std::string::npos) return false;
  char* end = nullptr;
  const std::string a = text.substr(0, colon), b = text.substr(colon + 1);
  range_ms[0] = std::strtod(a.c_str(), &end);
  if (a.empty() || *end != '\0') return false;
  range_ms[1] = std::strtod(b.c_str(), &end);
  return !b.empty() && *end == '\0' && range_ms[1] > range_ms[0];
}

// Returns "" or the one-line error for a bad command line.
std::string ParseArgs(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&](std::string* out) {
      if (i + 1 >= argc) return false;
      *out = argv[++i];
      return true;
    };
    std::string v;
    if (arg == "--screenshot") {
      if (!value(&o->screenshot) || o->screenshot.empty()) return "--screenshot needs an output path";
    } else if (arg == "--frames") {
      if (!value(&v) || !ParseInt(v, 1, 10000, &o->frames)) return "--frames needs a number from 1 to 10000";
    } else if (arg == "--width") {
      if (!value(&v) || !ParseInt(v, 200, 16384, &o->width)) return "--width needs a number from 200 to 16384";
    } else if (arg == "--height") {
      if (!value(&v) || !ParseInt(v, 200, 16384, &o->height)) return "--height needs a number from 200 to 16384";
    } else if (arg == "--range") {
      if (!value(&v) || !ParseRange(v, o->range_ms)) return "--range needs START_MS:END_MS with START < END";
      o->has_range = true;
    } else if (arg == "--bubbles") {
      o->bubbles = true;
    } else if (arg.size() > 1 && arg[0] == '-') {
      return "unknown flag " + arg;
    } else {
      o->traces.push_back(arg);
    }
  }
  return "";
}

std::string g_glfw_error;  // the last GLFW error, printed once if the window cannot open
void OnGlfwError(int code, const char* text) { g_glfw_error = text ? text : "GLFW error " + std::to_string(code); }

GLFWwindow* OpenWindow(const Options& o) {
  glfwSetErrorCallback(OnGlfwError);
  if (!glfwInit()) return nullptr;
  glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
  glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 0);
  GLFWwindow* window = glfwCreateWindow(o.width, o.height, "stagecraft-view", nullptr, nullptr);
  if (window == nullptr) {
    glfwTerminate();
    return nullptr;
  }
  glfwMakeContextCurrent(window);
  glfwSwapInterval(o.screenshot.empty() ? 1 : 0);
  IMGUI_CHECKVERSION();
  ImGui::CreateContext();
  ImGuiIO& io = ImGui::GetIO();
  io.IniFilename = nullptr;  // the layout is the program's, and nothing is left in the working folder
  if (std::filesystem::exists(kFont)) io.Fonts->AddFontFromFileTTF(kFont, 15.0f);
  ImGui::StyleColorsDark();
  ImGui_ImplGlfw_InitForOpenGL(window, true);
  ImGui_ImplOpenGL3_Init("#version 130");
  return window;
}

void CloseWindow(GLFWwindow* window) {
  ImGui_ImplOpenGL3_Shutdown();
  ImGui_ImplGlfw_Shutdown();
  ImGui::DestroyContext();
  glfwDestroyWindow(window);
  glfwTerminate();
}

// Runs frames until the user quits or, with --screenshot, until the N-th is written.
int Run(GLFWwindow* window, app::AppState* state, const Options& o) {
  bool quit = false;
  for (int frame = 1; !quit && !glfwWindowShouldClose(window); ++frame) {
    glfwPollEvents();
    ImGui_ImplOpenGL3_NewFrame();
    ImGui_ImplGlfw_NewFrame();
    if (!o.screenshot.empty()) ImGui::GetIO().MousePos = ImVec2(-FLT_MAX, -FLT_MAX);  // no hover in pictures
    ImGui::NewFrame();
    app::DrawFrame(state, &quit);
    ImGui::Render();
    int fb_w = 0, fb_h = 0;
    glfwGetFramebufferSize(window, &fb_w, &fb_h);
    glViewport(0, 0, fb_w, fb_h);
    glClearColor(0.09f, 0.09f, 0.10f, 1.0f);
    glClear(GL_COLOR_BUFFER_BIT);
    ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());
    if (!o.screenshot.empty() && frame >= o.frames) {
      const std::string error = app::WriteScreenshot(o.screenshot, fb_w, fb_h);
      if (error.empty()) return 0;
      std::fprintf(stderr, "stagecraft-view: error: %s\n", error.c_str());
      return 1;
    }
    glfwSwapBuffers(window);
  }
  return 0;
}

// --screenshot: the output path is checked and every trace loads, or one error line and false.
bool LoadForScreenshot(const Options& o, app::AppState* state) {
  try {
    stagecraft::CheckOutputPath(o.screenshot, "--screenshot");
  } catch (const stagecraft::InputError& e) {
    std::fprintf(stderr, "stagecraft-view: error: %s\n", e.what());
    return false;
  }
  for (const std::string& path : o.traces) {
    stagecraft::viz::LoadResult result = stagecraft::viz::LoadTraceFile(path);
    if (!result.trace) {
      std::fprintf(stderr, "stagecraft-view: error: %s\n", result.error.c_str());
      return false;
    }
    app::AddTrace(state, std::move(result.trace));
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  if (argc == 2 && (std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h")) {
    std::printf("%s\n", kUsage);
    return 0;
  }
  if (const std::string error = ParseArgs(argc, argv, &options); !error.empty()) {
    std::fprintf(stderr, "stagecraft-view: error: %s (%s)\n", error.c_str(), kUsage);
    return 2;
  }
  app::AppState state;
  if (options.screenshot.empty()) {
    for (const std::string& path : options.traces) app::OpenTraceFile(&state, path);
  } else if (!LoadForScreenshot(options, &state)) {
    return 1;
  }
  state.toggles.bubbles = options.bubbles;
  if (options.has_range) {
    state.view.start_ns = static_cast<int64_t>(options.range_ms[0] * 1e6);
    state.view.end_ns = static_cast<int64_t>(options.range_ms[1] * 1e6);
    state.fit_pending = false;
  }
  GLFWwindow* window = OpenWindow(options);
  if (window == nullptr) {
    std::fprintf(stderr, "stagecraft-view: error: cannot open a window (%s); without a display, run under xvfb-run\n",
                 g_glfw_error.empty() ? "no display" : g_glfw_error.c_str());
    return 1;
  }
  const int rc = Run(window, &state, options);
  CloseWindow(window);
  return rc;
}
