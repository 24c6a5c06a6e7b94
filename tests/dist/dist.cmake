# Data parallel over MPI: the collectives and the trainer under `mpirun -np 2` (Open MPI; CI
# runs as root on 2 cores, hence --allow-run-as-root and --oversubscribe). Without MPI in the
# build only the single-process dist.test_dist_group runs (it checks the refusal of a world
# size above 1).
if(BRISK_HAVE_MPI AND MPIEXEC_EXECUTABLE)
  set(BRISK_MPIRUN ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2 --allow-run-as-root --oversubscribe)
  add_test(NAME dist.group_mpi COMMAND ${BRISK_MPIRUN} $<TARGET_FILE:dist_test_dist_group> mpi)
  set_tests_properties(dist.group_mpi PROPERTIES TIMEOUT 60 ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0")
endif()
add_executable(dist_weights_diff ${CMAKE_CURRENT_LIST_DIR}/weights_diff.c)
target_link_libraries(dist_weights_diff PRIVATE brisk m)
if(BRISK_HAVE_MPI AND MPIEXEC_EXECUTABLE)
  foreach(mode equal resume fault signal)
    add_test(NAME dist.train_mpi_${mode} COMMAND ${CMAKE_CURRENT_LIST_DIR}/train_mpi.sh ${mode} $<TARGET_FILE:brisk_cli>
      $<TARGET_FILE:dist_weights_diff> ${CMAKE_BINARY_DIR}/dist_${mode} ${CMAKE_SOURCE_DIR} ${BRISK_MPIRUN})
    set_tests_properties(dist.train_mpi_${mode} PROPERTIES TIMEOUT 120 SKIP_RETURN_CODE 77
      ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0")
  endforeach()
endif()
