# The brisk command end to end: bad inputs give one clear error and a non-zero exit, never a crash.
add_test(NAME cli.bad_inputs COMMAND ${CMAKE_CURRENT_LIST_DIR}/bad_inputs.sh $<TARGET_FILE:brisk_cli> ${CMAKE_BINARY_DIR}/cli_bad_inputs)
add_test(NAME cli.example_roundtrip COMMAND ${CMAKE_CURRENT_LIST_DIR}/roundtrip.sh $<TARGET_FILE:brisk_cli> ${CMAKE_BINARY_DIR}/cli_roundtrip ${CMAKE_SOURCE_DIR})
