// bridge_pal.cpp - the platform layer etops installs into ExecuTorch: its log
// function (messages of a running call go to the call's log, the rest to the sink
// etb_install_pal set) and its abort (unwound out of a running kernel; anywhere
// else, a notice naming the kernel, then the process ends), and terminate's notice.

#include "etops_bridge.h"
#include "bridge_internal.hpp"
#include "bridge_call_state.hpp"
#include "fault_trap.h"

#include <executorch/runtime/platform/platform.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>

namespace etops_bridge {

etb_log_sink g_sink = nullptr;
const et::PalImpl* g_pal = nullptr;

namespace {
// The function of ExecuTorch's TensorImpl that logs (at Error level) when it refuses
// to resize a tensor: a STATIC one to another shape, a DYNAMIC_BOUND one past its
// memory. Where a message comes from, not what it says, makes the failure's kind.
constexpr const char* kResizeFunction = "internal_resize_contiguous";

// The last fatal message logged on this thread outside a call (a threadpool worker's
// ET_CHECK logs here before it aborts), for the notice of an abort that ends the process.
thread_local char t_last_fatal[512] = {0};

}  // namespace

// A source file as messages name it: what follows its last "executorch/" (ExecuTorch's
// build paths are the build machine's).
const char* short_file(const char* file) {
  if (file == nullptr) return "?";
  const char* tail = file;
  for (const char* p = std::strstr(file, "executorch/"); p != nullptr; p = std::strstr(p + 1, "executorch/")) {
    tail = p + std::strlen("executorch/");
  }
  return tail;
}

void emit_log(et_timestamp_t, et_pal_log_level_t level, const char* file,
              const char* func, size_t line, const char* msg, size_t len) {
  CallState& c = t_call;
  if (c.in_call) {
    // Keep what fits (a kernel logs a few lines before it fails); always NUL-terminated.
    if (c.log_len > 0 && c.log_len + 1 < kCallLogSize) c.log[c.log_len++] = '\n';
    size_t room = kCallLogSize - 1 - c.log_len;
    size_t n = len < room ? len : room;
    std::memcpy(c.log + c.log_len, msg, n);
    c.log_len += n;
    c.log[c.log_len] = '\0';
    if (level == kError || level == kFatal) {
      if (c.site_file == nullptr) {
        c.origin_file = file;
        c.origin_line = line;
      }
      c.site_file = file;
      c.site_line = line;
      if (func != nullptr && std::strcmp(func, kResizeFunction) == 0) c.resize_refused = true;
    }
    return;
  }
  if (level == kFatal) {
    std::snprintf(t_last_fatal, sizeof t_last_fatal, "%.*s (%s:%zu)", static_cast<int>(len), msg, short_file(file),
                  line);
  }
  if (g_sink != nullptr) {
    g_sink(static_cast<char>(level), file, func, line, msg, len);
  }
}

namespace {

// Prints why the process ends: which kernel ran and what ExecuTorch logged.
void print_abort_notice() {
  if (t_call.current_op != nullptr) {
    std::fprintf(stderr,
                 "etops: ExecuTorch aborted the process while running kernel %s",
                 t_call.current_op);
    if (t_call.log_len > 0) {
      std::fprintf(stderr, ": %s", t_call.log);
    }
    std::fprintf(stderr, "\n");
  } else if (const char* op = g_running_op.load(std::memory_order_acquire)) {
    std::fprintf(stderr,
                 "etops: ExecuTorch aborted the process on another thread than the caller's "
                 "(a threadpool worker) while kernel %s was running%s%s\n",
                 op, t_last_fatal[0] != '\0' ? ": " : "", t_last_fatal);
  } else {
    std::fprintf(stderr, "etops: ExecuTorch aborted the process (no etops kernel call was running)%s%s\n",
                 t_last_fatal[0] != '\0' ? ": " : "", t_last_fatal);
  }
  std::fflush(stderr);
}

// Any abort inside ExecuTorch lands here. While an etops call runs a kernel on this
// thread, it unwinds out of the kernel (etops_bridge::KernelAbort, caught by the
// call: the caller raises KernelAborted); anywhere else, it says which kernel and
// why, then ends the process.
[[noreturn]] void abort_with_context() {
  CallState& c = t_call;
  if (c.in_call) {
    c.aborted = true;
    throw etops_bridge::KernelAbort();
  }
  print_abort_notice();
  etf_abort_explained();
  std::abort();
}

// An exception that cannot unwind (a noexcept frame between the abort and the call,
// or one thrown on a thread without a catch) ends the process with the same notice.
std::terminate_handler g_previous_terminate = nullptr;
[[noreturn]] void terminate_with_context() {
  if (t_call.aborted || t_call.current_op != nullptr || g_running_op.load() != nullptr) {
    std::fprintf(stderr, "etops: an abort or C++ exception could not be unwound to the caller\n");
    print_abort_notice();
    etf_abort_explained();
  }
  if (g_previous_terminate != nullptr) g_previous_terminate();
  std::abort();
}

}  // namespace

// Makes etops' log and abort functions the active platform layer. Other libraries
// that link libexecutorch.so (executorch's pybindings, extensions imported by
// executorch.exir) install their own when they load; etops takes it back before
// each call. It writes the two fields of the active table in place rather than
// calling register_pal(), which would log a warning through the layer being
// replaced (raw onto stderr for pybindings').

void claim_pal() {
  auto* pal = const_cast<et::PalImpl*>(et::get_pal_impl());
  if (pal == nullptr) return;
  g_pal = pal;
  pal->emit_log_message = emit_log;
  pal->abort = abort_with_context;
  static std::once_flag terminate_once;
  std::call_once(terminate_once, [] { g_previous_terminate = std::set_terminate(terminate_with_context); });
}

}  // namespace etops_bridge
