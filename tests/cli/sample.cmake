# brisk sample: ensembles from a checkpoint, scored against a truth; bad inputs fail cleanly.
add_test(NAME cli.sample COMMAND ${CMAKE_CURRENT_LIST_DIR}/sample.sh $<TARGET_FILE:brisk_cli> ${CMAKE_BINARY_DIR}/cli_sample)
