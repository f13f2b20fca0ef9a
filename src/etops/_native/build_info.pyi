"""Type stub of ``build_info.py``, which CMake generates at build time: the torch and
executorch versions this build compiled against."""

TORCH_VERSION: str
EXECUTORCH_VERSION: str
