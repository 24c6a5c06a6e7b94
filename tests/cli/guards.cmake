# Refusals that keep the user's files: outputs onto inputs, hexadecimal CSV cells, JSON leading
# zeros, unknown synth kinds (issue 37, item 20).
add_test(NAME cli.guards COMMAND ${CMAKE_CURRENT_LIST_DIR}/guards.sh $<TARGET_FILE:brisk_cli> ${CMAKE_BINARY_DIR}/cli_guards)
