# A run's logs against what ends or hinders it (run_logs.sh): a SIGKILL after a mid-epoch
# checkpoint keeps every step's line up to it; a file-size limit cutting metrics.jsonl is one
# warning, and a resumed run and brisk report step over the cut line. The 2-rank kill is
# dist.run_logs_killed_mpi (tests/dist/dist.cmake).
foreach(mode killed write_fail)
  add_test(NAME train.run_logs_${mode} COMMAND ${CMAKE_CURRENT_LIST_DIR}/run_logs.sh ${mode} $<TARGET_FILE:brisk_cli>
    ${CMAKE_BINARY_DIR}/run_logs_${mode} ${CMAKE_BINARY_DIR}/pydeps)
  set_tests_properties(train.run_logs_${mode} PROPERTIES TIMEOUT 180 ENVIRONMENT "OMP_NUM_THREADS=1")
endforeach()
