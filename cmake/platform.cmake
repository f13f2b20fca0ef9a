# Refuses, at configure time and naming it, a platform etops cannot build on, instead
# of a compile error in the fault handler or a crash at import. etops needs a 64-bit
# target (its fault and tensor records are 64-bit; ExecuTorch's wheels are 64-bit
# only) and, on Linux, glibc (the fault state reads glibc's malloc arenas; the
# executorch and torch wheels are manylinux, glibc-only): 32-bit ARM (armv7l,
# armhf), i686 and musl (Alpine) stop here. macOS is not Linux: no C library check.

# etops_check_platform(PROCESSOR POINTER_SIZE C_LIBRARY): PROCESSOR as
# CMAKE_SYSTEM_PROCESSOR names it, POINTER_SIZE as CMAKE_SIZEOF_VOID_P, C_LIBRARY
# "glibc", "musl", "other" or "" (not Linux). FATAL_ERROR naming what is wrong.
function(etops_check_platform processor pointer_size c_library)
  if(NOT pointer_size EQUAL 8)
    message(FATAL_ERROR
      "etops cannot build on ${processor}: a ${pointer_size}-byte pointer target (32-bit). "
      "etops runs on 64-bit Linux (x86_64, aarch64) and macOS (arm64); 32-bit ARM "
      "(armv7l, armhf) and i686 are not supported, and ExecuTorch's wheels are 64-bit only.")
  endif()
  if(c_library STREQUAL "musl" OR c_library STREQUAL "other")
    message(FATAL_ERROR
      "etops cannot build on ${processor} Linux with the ${c_library} C library: etops needs "
      "glibc on Linux (its fault handling reads glibc's malloc state, and the torch and "
      "executorch wheels are manylinux, glibc-only). musl (Alpine) is not supported.")
  endif()
endfunction()

# etops_detect_c_library(OUT): "glibc", "musl" or "other" on Linux, "" elsewhere,
# from what the C compiler defines (__GLIBC__; musl defines no macro of its own).
function(etops_detect_c_library out)
  if(NOT CMAKE_SYSTEM_NAME STREQUAL "Linux")
    set(${out} "" PARENT_SCOPE)
    return()
  endif()
  include(CheckCSourceCompiles)
  check_c_source_compiles("#include <features.h>\n#ifndef __GLIBC__\n#error not glibc\n#endif\nint main(void) { return 0; }" ETOPS_HAS_GLIBC)
  if(ETOPS_HAS_GLIBC)
    set(${out} "glibc" PARENT_SCOPE)
    return()
  endif()
  # musl has no macro of its own; its headers have no __GLIBC__ and no __UCLIBC__/__BIONIC__
  check_c_source_compiles("#include <features.h>\n#if defined(__UCLIBC__) || defined(__BIONIC__)\n#error other\n#endif\nint main(void) { return 0; }" ETOPS_MAYBE_MUSL)
  if(ETOPS_MAYBE_MUSL)
    set(${out} "musl" PARENT_SCOPE)
  else()
    set(${out} "other" PARENT_SCOPE)
  endif()
endfunction()

# Run as a script (cmake -DPROCESSOR=... -DPOINTER_SIZE=... -DC_LIBRARY=... -P platform.cmake):
# the check alone, for the tests (tests/packaging/test_platform_refusal.py).
if(CMAKE_SCRIPT_MODE_FILE STREQUAL CMAKE_CURRENT_LIST_FILE)
  etops_check_platform("${PROCESSOR}" "${POINTER_SIZE}" "${C_LIBRARY}")
  message(STATUS "etops can build on ${PROCESSOR} (${POINTER_SIZE}-byte pointers, C library '${C_LIBRARY}')")
endif()
