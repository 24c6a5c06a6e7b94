# brisk sample: ensembles from a checkpoint, scored against a truth; bad inputs fail cleanly.
add_test(NAME cli.sample COMMAND ${CMAKE_CURRENT_LIST_DIR}/sample.sh $<TARGET_FILE:brisk_cli> ${CMAKE_BINARY_DIR}/cli_sample)
# The diffusion flow (README's make run, docs/models.md) on the shipped example (2 of its epochs) beats the coarse blocks.
add_test(NAME cli.diffusion_example COMMAND ${CMAKE_CURRENT_LIST_DIR}/diffusion_example.sh $<TARGET_FILE:brisk_cli>
         ${CMAKE_BINARY_DIR}/cli_diffusion_example)
