# The brisk command end to end: bad inputs give one clear error and a non-zero exit, never a crash.
add_test(NAME cli.bad_inputs COMMAND ${CMAKE_CURRENT_LIST_DIR}/bad_inputs.sh $<TARGET_FILE:brisk_cli> ${CMAKE_BINARY_DIR}/cli_bad_inputs)
add_test(NAME cli.example_roundtrip COMMAND ${CMAKE_CURRENT_LIST_DIR}/roundtrip.sh $<TARGET_FILE:brisk_cli> ${CMAKE_BINARY_DIR}/cli_roundtrip ${CMAKE_SOURCE_DIR})
set(BRISK_WORKLOADS_DIR "${CMAKE_SOURCE_DIR}/../shared/workloads" CACHE PATH "where torch_ref.py lives")
add_test(NAME cli.checkpoint_in_pytorch COMMAND ${CMAKE_CURRENT_LIST_DIR}/checkpoint_in_pytorch.sh $<TARGET_FILE:brisk_cli>
  ${CMAKE_BINARY_DIR}/cli_ckpt_torch ${CMAKE_BINARY_DIR}/pydeps ${BRISK_WORKLOADS_DIR})
set_tests_properties(cli.checkpoint_in_pytorch PROPERTIES SKIP_RETURN_CODE 77)
add_test(NAME cli.sequence COMMAND ${CMAKE_CURRENT_LIST_DIR}/sequence.sh $<TARGET_FILE:brisk_cli> ${CMAKE_BINARY_DIR}/cli_sequence
  ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR}/pydeps ${BRISK_WORKLOADS_DIR})
add_test(NAME cli.sequence_variants COMMAND ${CMAKE_CURRENT_LIST_DIR}/sequence_variants.sh $<TARGET_FILE:brisk_cli>
  ${CMAKE_BINARY_DIR}/cli_sequence_variants ${CMAKE_BINARY_DIR}/pydeps)
set_tests_properties(cli.sequence_variants PROPERTIES SKIP_RETURN_CODE 77)
if(PNG_FOUND) # brisk synth images writes PNG through libpng
  add_test(NAME cli.images COMMAND ${CMAKE_CURRENT_LIST_DIR}/images.sh $<TARGET_FILE:brisk_cli> ${CMAKE_BINARY_DIR}/cli_images)
endif()
