# The stable API against the CLI: the same losses from the same data, config and seed.
add_executable(api_train_tool ${CMAKE_CURRENT_LIST_DIR}/api_train_tool.c)
target_link_libraries(api_train_tool PRIVATE brisk)
add_test(NAME api.same_losses_as_cli COMMAND ${CMAKE_CURRENT_LIST_DIR}/same_losses.sh $<TARGET_FILE:brisk_cli>
  $<TARGET_FILE:api_train_tool> ${CMAKE_BINARY_DIR}/api_same_losses)
# Bad MPI communicator handles in a session's config: errors, never the host aborted.
if(BRISK_HAVE_MPI AND MPIEXEC_EXECUTABLE)
  add_executable(api_mpi_handles ${CMAKE_CURRENT_LIST_DIR}/mpi_handles.c)
  target_link_libraries(api_mpi_handles PRIVATE brisk MPI::MPI_C)
  add_test(NAME api.mpi_handles COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 1 --allow-run-as-root
    $<TARGET_FILE:api_mpi_handles>)
  set_tests_properties(api.mpi_handles PROPERTIES TIMEOUT 60 PASS_REGULAR_EXPRESSION "PASS: every bad handle refused"
    ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;OMPI_MCA_btl_vader_single_copy_mechanism=none")
endif()
# A C++ host (host.cpp): an OpenMP solver, a training worker thread, pushes from the main
# thread, and functions of its own named as brisk's internal ones; linked as a host links
# the installed library (only brisk_* exported).
include(CheckLanguage)
check_language(CXX)
if(CMAKE_CXX_COMPILER)
  enable_language(CXX)
  find_package(OpenMP COMPONENTS CXX)
  if(OpenMP_CXX_FOUND)
    add_executable(api_cxx_host ${CMAKE_CURRENT_LIST_DIR}/host.cpp)
    target_link_libraries(api_cxx_host PRIVATE brisk_exported OpenMP::OpenMP_CXX)
    set_target_properties(api_cxx_host PROPERTIES LINKER_LANGUAGE CXX)
    add_test(NAME api.cxx_host COMMAND api_cxx_host)
    set_tests_properties(api.cxx_host PROPERTIES TIMEOUT 120 PASS_REGULAR_EXPRESSION "PASS a C\\+\\+ host" LABELS threads)
  endif()
endif()
# `make tsan` runs the tests labelled threads under ThreadSanitizer
set_tests_properties(api.test_threads api.test_session_edges api.test_stop_clear PROPERTIES LABELS threads)
