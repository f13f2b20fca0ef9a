// bridge_call_state.hpp - what bridge.cpp (the call) and bridge_pal.cpp (the platform
// layer) share: the per-thread state of the running call, the kernel running on any
// thread, and the log and abort functions etops installs as ExecuTorch's platform
// layer. Never included from C.
#ifndef ETOPS_BRIDGE_CALL_STATE_HPP
#define ETOPS_BRIDGE_CALL_STATE_HPP

#include "etops_bridge.h"

#include <executorch/runtime/platform/platform.h>

#include <atomic>
#include <cstddef>

namespace etops_bridge {

namespace et = ::executorch::runtime;

// Per thread: whether a kernel call is running here, its name, what it logged,
// whether ExecuTorch aborted inside it or refused a resize, and the last failed call
// (record_failure). Plain data, reached once per call through one reference.
constexpr size_t kCallLogSize = 4096;
constexpr size_t kSiteSize = 256;
struct CallState {
  const char* current_op;
  bool in_call;
  bool aborted;         // ExecuTorch's abort ran during this call (and was unwound)
  bool resize_refused;  // TensorImpl's resize refused a tensor during this call
  size_t log_len;
  char log[kCallLogSize];
  // Where the last error or fatal message of the call was logged (ExecuTorch passes
  // its source file as a string of the library that logged), or null.
  const char* site_file;
  size_t site_line;
  // Where the first error or fatal message of the call was logged: the check that
  // failed first, which an outer check (the last message) reports again. Set with the
  // first site_file; read only when site_file is set.
  const char* origin_file;
  size_t origin_line;
  // The last failed call (etb_last_failure), its strings in the buffers after it.
  etb_failure failure;
  char failure_file[kSiteSize];
  char failure_origin[kSiteSize];
  char failure_kernel[kSiteSize];
};
extern thread_local CallState t_call;  // defined in bridge.cpp, where every call reaches it

// The kernel of the outermost etops call running on any thread (for the notice of an
// abort on a thread that runs no etops call: a worker of ExecuTorch's threadpool).
extern std::atomic<const char*> g_running_op;

// The sink of messages logged outside a call (etb_install_pal), or null.
extern etb_log_sink g_sink;

// ExecuTorch's active PAL table (a static object: registering a layer copies into it),
// asked for once, when etops installs its layer.
extern const et::PalImpl* g_pal;

// A source file as messages name it: what follows its last "executorch/".
const char* short_file(const char* file);

// etops' log function: into the running call's log, else to the sink.
void emit_log(et_timestamp_t, et_pal_log_level_t level, const char* file, const char* func, size_t line,
              const char* msg, size_t len);

// Makes etops' log and abort functions the active platform layer (bridge_pal.cpp).
void claim_pal();

// Takes the platform layer back when another library installed its own since.
inline void ensure_pal() {
  const et::PalImpl* pal = g_pal;  // set (with g_sink) by etb_install_pal
  if (g_sink != nullptr && pal != nullptr && pal->emit_log_message != emit_log) claim_pal();
}

}  // namespace etops_bridge

#endif  // ETOPS_BRIDGE_CALL_STATE_HPP
