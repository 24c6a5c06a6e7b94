# The stable API against the CLI: the same losses from the same data, config and seed.
add_executable(api_train_tool ${CMAKE_CURRENT_LIST_DIR}/api_train_tool.c)
target_link_libraries(api_train_tool PRIVATE brisk)
add_test(NAME api.same_losses_as_cli COMMAND ${CMAKE_CURRENT_LIST_DIR}/same_losses.sh $<TARGET_FILE:brisk_cli>
  $<TARGET_FILE:api_train_tool> ${CMAKE_BINARY_DIR}/api_same_losses)
