# The CPU runtime as a user sees it: where the thread count came from, the too-many-threads
# warning, the summary's numbers for this run, progress with an ETA, brisk bench's rounds.
add_test(NAME cli.runtime COMMAND ${CMAKE_CURRENT_LIST_DIR}/runtime.sh $<TARGET_FILE:brisk_cli> ${CMAKE_BINARY_DIR}/cli_runtime)
