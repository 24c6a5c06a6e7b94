# The fault-injecting LD_PRELOAD library for the checkpoint crash and full-disk tests
# (test_fault_checkpoint.c finds it at BRISK_BINARY_DIR/tests/libbrisk_faultshim.so). It is
# loaded into sanitized binaries as well, so it is built without the sanitizers itself.
add_library(brisk_faultshim MODULE ${CMAKE_CURRENT_LIST_DIR}/faultshim.c)
set_target_properties(brisk_faultshim PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests PREFIX lib)
target_compile_options(brisk_faultshim PRIVATE -fno-sanitize=all)
target_link_options(brisk_faultshim PRIVATE -fno-sanitize=all)
target_link_libraries(brisk_faultshim PRIVATE ${CMAKE_DL_LIBS})
