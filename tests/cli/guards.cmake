# Refusals that keep the user's files: outputs onto inputs, hexadecimal CSV cells, JSON leading
# zeros, unknown synth kinds (issue 37, item 20).
add_test(NAME cli.guards COMMAND ${CMAKE_CURRENT_LIST_DIR}/guards.sh $<TARGET_FILE:brisk_cli> ${CMAKE_BINARY_DIR}/cli_guards)
# data.normalize on plain tables: raw-unit features and targets standardised, predict in their units.
add_test(NAME cli.normalize COMMAND ${CMAKE_CURRENT_LIST_DIR}/normalize.sh $<TARGET_FILE:brisk_cli> ${CMAKE_BINARY_DIR}/cli_normalize)
set_tests_properties(cli.normalize PROPERTIES SKIP_RETURN_CODE 77)
