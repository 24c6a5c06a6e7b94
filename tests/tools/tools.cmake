# The GPU suite's pieces that run without a GPU (tools/gpu-session.sh, tools/gpu/*.py): the
# loss-comparison tool on real CPU runs and on crafted logs, the step-1 gradient comparison on
# real CPU checkpoints, and a dry run of the suite itself.
add_test(NAME tools.compare_losses COMMAND ${BRISK_CLEAN_ON_PASS} ${CMAKE_CURRENT_BINARY_DIR}/tools_compare_losses ${CMAKE_CURRENT_LIST_DIR}/compare_losses.sh $<TARGET_FILE:brisk_cli>
  ${CMAKE_CURRENT_BINARY_DIR}/tools_compare_losses ${CMAKE_SOURCE_DIR})
add_test(NAME tools.compare_grads COMMAND ${BRISK_CLEAN_ON_PASS} ${CMAKE_CURRENT_BINARY_DIR}/tools_compare_grads ${CMAKE_CURRENT_LIST_DIR}/compare_grads.sh $<TARGET_FILE:brisk_cli>
  ${CMAKE_CURRENT_BINARY_DIR}/tools_compare_grads ${CMAKE_SOURCE_DIR})
add_test(NAME tools.nudge_checkpoint COMMAND ${BRISK_CLEAN_ON_PASS} ${CMAKE_CURRENT_BINARY_DIR}/tools_nudge_checkpoint ${CMAKE_CURRENT_LIST_DIR}/nudge_checkpoint.sh $<TARGET_FILE:brisk_cli>
  ${CMAKE_CURRENT_BINARY_DIR}/tools_nudge_checkpoint ${CMAKE_SOURCE_DIR})
add_test(NAME tools.session_dry_run COMMAND ${BRISK_CLEAN_ON_PASS} ${CMAKE_CURRENT_BINARY_DIR}/tools_session_dry_run ${CMAKE_CURRENT_LIST_DIR}/session_dry_run.sh $<TARGET_FILE_DIR:brisk_cli>
  ${CMAKE_CURRENT_BINARY_DIR}/tools_session_dry_run ${CMAKE_SOURCE_DIR})
set_tests_properties(tools.compare_losses tools.compare_grads tools.nudge_checkpoint tools.session_dry_run PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300
  ENVIRONMENT "OMP_NUM_THREADS=2")
# The layering of src/ that docs/dev/architecture.md states, over every #include line.
add_test(NAME tools.layers COMMAND ${CMAKE_CURRENT_LIST_DIR}/layers.sh ${CMAKE_SOURCE_DIR})
