// A delegate backend for etops' tests: "EtopsTestBackend".
//
// The processed blob is "SCALE <float>"; init reads a compile spec "offset" (a
// float as text) and the named data entry "bias" (float32 values), and places its
// handle in the runtime allocator. execute computes out = in * scale + offset +
// bias[i % n] over float32 tensors (inputs, then outputs, as a Method passes them).
// A blob starting with "REJECT" is refused at init, an input starting with NaN at
// execute; a blob starting with "ABORT" aborts init (ET_CHECK), an input starting
// with +inf aborts execute; set_available(0) makes the backend unavailable. Counters say how many handles were initialised and destroyed.
#include <executorch/runtime/backend/interface.h>
#include <executorch/runtime/core/exec_aten/exec_aten.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

namespace et = ::executorch::runtime;

namespace {

int g_available = 1;
int g_inits = 0;
int g_destroys = 0;
int g_executes = 0;
std::atomic<int> g_in_execute{0};
std::atomic<int> g_overlaps{0};  // executes that started while another was running

struct Handle {
  float scale;
  float offset;
  float bias[16];
  size_t nbias;
};

class TestBackend final : public et::BackendInterface {
 public:
  bool is_available() const override { return g_available != 0; }

  et::Result<et::DelegateHandle*> init(et::BackendInitContext& ctx, et::FreeableBuffer* processed,
                                       et::ArrayRef<et::CompileSpec> specs) const override {
    std::string blob(static_cast<const char*>(processed->data()), processed->size());
    if (blob.rfind("REJECT", 0) == 0) {
      ET_LOG(Error, "EtopsTestBackend: the blob asks to be rejected");
      return et::Error::DelegateInvalidCompatibility;
    }
    ET_CHECK_MSG(blob.rfind("ABORT", 0) != 0, "EtopsTestBackend: the blob asks for an abort at init");
    if (blob.rfind("SCALE ", 0) != 0) return et::Error::InvalidProgram;
    Handle* h = ctx.get_runtime_allocator()->allocateInstance<Handle>();
    if (h == nullptr) return et::Error::MemoryAllocationFailed;
    h->scale = std::strtof(blob.c_str() + 6, nullptr);
    h->offset = 0.0f;
    for (const et::CompileSpec& spec : specs) {
      if (std::strcmp(spec.key, "offset") == 0) {
        std::string text(static_cast<const char*>(spec.value.buffer), spec.value.nbytes);
        h->offset = std::strtof(text.c_str(), nullptr);
      }
    }
    h->nbias = 0;
    const et::NamedDataMap* named = ctx.get_named_data_map();
    if (named != nullptr) {
      auto bias = named->get_data("bias");
      if (bias.ok()) {
        h->nbias = bias->size() / sizeof(float);
        if (h->nbias > 16) h->nbias = 16;
        std::memcpy(h->bias, bias->data(), h->nbias * sizeof(float));
      }
    }
    processed->Free();
    g_inits++;
    return h;
  }

  et::Error execute(et::BackendExecutionContext& ctx, et::DelegateHandle* handle,
                    et::Span<et::EValue*> args) const override {
    (void)ctx;
    if (g_in_execute.fetch_add(1) != 0) g_overlaps++;
    struct Leave {
      ~Leave() { g_in_execute--; }
    } leave;
    auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(200);
    while (std::chrono::steady_clock::now() < until) {
    }  // long enough for calls from other threads to overlap, if they could
    g_executes++;
    if (args.size() != 2 || !args[0]->isTensor() || !args[1]->isTensor()) return et::Error::InvalidArgument;
    const auto& in = args[0]->toTensor();
    auto& out = args[1]->toTensor();
    if (in.numel() != out.numel()) return et::Error::InvalidArgument;
    const Handle* h = static_cast<const Handle*>(handle);
    const float* x = in.const_data_ptr<float>();
    float* y = out.mutable_data_ptr<float>();
    ET_CHECK_MSG(in.numel() == 0 || x[0] != INFINITY, "EtopsTestBackend: input 0 starts with +inf");
    if (in.numel() > 0 && x[0] != x[0]) {
      ET_LOG(Error, "EtopsTestBackend: input 0 starts with NaN");
      return et::Error::InvalidArgument;
    }
    for (ssize_t i = 0; i < in.numel(); i++) {
      y[i] = x[i] * h->scale + h->offset + (h->nbias ? h->bias[i % h->nbias] : 0.0f);
    }
    return et::Error::Ok;
  }

  void destroy(et::DelegateHandle* handle) const override {
    (void)handle;
    g_destroys++;
  }
};

TestBackend g_backend;
const auto g_registered = et::register_backend({"EtopsTestBackend", &g_backend});

}  // namespace

#define EXPORT extern "C" __attribute__((visibility("default")))
EXPORT void etops_test_backend_set_available(int available) { g_available = available; }
EXPORT int etops_test_backend_inits() { return g_inits; }
EXPORT int etops_test_backend_destroys() { return g_destroys; }
EXPORT int etops_test_backend_executes() { return g_executes; }
EXPORT int etops_test_backend_overlaps() { return g_overlaps; }
EXPORT int etops_test_backend_registered() { return g_registered == et::Error::Ok; }
