# The CUDA attention and residual-layernorm kernels replayed on the host
# (tests/backend/replay): k_attention.cu and k_layernorm_residual.cu compiled as C++ against a small CUDA runtime of fibers and barriers, checked
# against the CPU backend. Needs a C++17 compiler, no CUDA.
include(CheckLanguage)
check_language(CXX)
if(CMAKE_CXX_COMPILER)
  enable_language(CXX)
  add_executable(backend_kernel_replay ${CMAKE_CURRENT_LIST_DIR}/replay/test_kernel_replay.cpp)
  set_target_properties(backend_kernel_replay PROPERTIES CXX_STANDARD 17 CXX_STANDARD_REQUIRED ON)
  # the replay runtime's cuda_runtime.h must win over the toolkit's
  target_include_directories(backend_kernel_replay BEFORE PRIVATE ${CMAKE_CURRENT_LIST_DIR}/replay)
  target_include_directories(backend_kernel_replay PRIVATE ${CMAKE_SOURCE_DIR}/src)
  target_link_libraries(backend_kernel_replay PRIVATE brisk)
  add_test(NAME backend.kernel_replay COMMAND backend_kernel_replay)
  set_tests_properties(backend.kernel_replay PROPERTIES TIMEOUT 600 ENVIRONMENT "OMP_NUM_THREADS=2")
else()
  message(STATUS "brisk: no C++ compiler, the host replay of the CUDA kernels is not built")
endif()
