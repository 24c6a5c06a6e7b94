# The CUDA backend's fusion plan replayed with the CPU backend's kernels
# (tests/backend/replay/test_fusion_replay.c): needs the CUDA build (the planner lives in
# src/backend/cuda), not a GPU.
if(BRISK_HAVE_CUDA)
  add_executable(backend_fusion_replay ${CMAKE_CURRENT_LIST_DIR}/replay/test_fusion_replay.c)
  target_include_directories(backend_fusion_replay PRIVATE ${CMAKE_SOURCE_DIR}/src ${CMAKE_SOURCE_DIR}/tests)
  target_link_libraries(backend_fusion_replay PRIVATE brisk)
  add_test(NAME backend.fusion_replay COMMAND backend_fusion_replay)
  set_tests_properties(backend.fusion_replay PROPERTIES ENVIRONMENT "OMP_NUM_THREADS=2")
endif()
