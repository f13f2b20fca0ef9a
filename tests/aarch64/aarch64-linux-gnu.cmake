# CMake toolchain file of the aarch64 lane's cross build (tests/aarch64/cross_build.sh):
# Debian's x86_64-hosted aarch64 compilers (gcc-aarch64-linux-gnu, g++-aarch64-linux-gnu,
# GCC 12.2 as in the root) with the lane's arm64 root as the sysroot, so that the
# extension compiles against the root's own headers (python3.11, glibc) and links
# against its libraries. The root's path comes from ETOPS_AARCH64_ROOT.
if(NOT DEFINED ENV{ETOPS_AARCH64_ROOT} OR NOT IS_DIRECTORY "$ENV{ETOPS_AARCH64_ROOT}")
  message(FATAL_ERROR "aarch64-linux-gnu.cmake: ETOPS_AARCH64_ROOT must name the arm64 root (got '$ENV{ETOPS_AARCH64_ROOT}')")
endif()
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_SYSROOT "$ENV{ETOPS_AARCH64_ROOT}")
# programs (the host's python, ninja) from the host; libraries, headers and CMake
# packages (executorch's config in the root's venv) from the root
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
