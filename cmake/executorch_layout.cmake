# Refuses, at configure time and naming what is missing, an executorch package etops
# cannot build against, instead of a link error now or an import failure later.
# etops needs the split layout of the 1.5 wheels, which a source build has when built
# as ExecuTorch builds its wheel (EXECUTORCH_BUILD_SHARED, as its pybind preset sets):
#   lib/libexecutorch.so (.dylib on macOS)   the shared runtime and its kernel registry
#   lib/cmake/executorch/executorch-config.cmake   find_package(executorch)
#   include/executorch/runtime/...            the runtime's headers
# The kernel libraries (lib/libexecutorch_kernels_optimized, _quantized) are loaded
# when present; without them the registry holds only what else registers kernels.
# 1.4 and earlier ship one fused extension (extension/pybindings/_portable_lib*) and
# no lib/: refused with its own message.

# etops_check_executorch_layout(DIR): DIR is the executorch package directory.
function(etops_check_executorch_layout dir)
  set(runtime "lib/libexecutorch${CMAKE_SHARED_LIBRARY_SUFFIX}")
  set(required
    "${runtime}"
    "lib/cmake/executorch/executorch-config.cmake"
    "include/executorch/runtime/kernel/operator_registry.h")
  set(missing "")
  foreach(path IN LISTS required)
    if(NOT EXISTS "${dir}/${path}")
      list(APPEND missing "${path}")
    endif()
  endforeach()
  if(NOT missing)
    return()
  endif()
  list(JOIN missing ", " missing_text)
  file(GLOB fused "${dir}/extension/pybindings/_portable_lib*")
  if(fused AND NOT EXISTS "${dir}/lib")
    message(FATAL_ERROR
      "etops cannot build against the executorch at ${dir}: it has the fused layout of "
      "executorch 1.4 and earlier (one extension, extension/pybindings/_portable_lib, and "
      "no lib/), so it lacks ${missing_text}. etops needs executorch >=1.5,<1.6 "
      "(pip install 'executorch>=1.5,<1.6'; docs/installation.md).")
  endif()
  message(FATAL_ERROR
    "etops cannot build against the executorch at ${dir}: missing ${missing_text}. "
    "etops links the shared runtime (${runtime}) and loads the kernel libraries next to "
    "it: install an executorch 1.5 wheel, or build ExecuTorch from source as its wheel "
    "is built (pip install . or ./install_executorch.sh in the checkout; "
    "EXECUTORCH_BUILD_SHARED must stay ON) - docs/installation.md, 'A source build of ExecuTorch'.")
endfunction()
