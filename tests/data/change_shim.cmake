# The LD_PRELOAD library test_file_change.c runs its children under (found at
# BRISK_BINARY_DIR/tests/libbrisk_changeshim.so): changeshim.c changes a data file while
# the child reads it. Preloaded into sanitized binaries too, so built without sanitizers.
add_library(brisk_changeshim MODULE ${CMAKE_CURRENT_LIST_DIR}/changeshim.c)
set_target_properties(brisk_changeshim PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests PREFIX lib)
target_compile_options(brisk_changeshim PRIVATE -fno-sanitize=all)
target_link_options(brisk_changeshim PRIVATE -fno-sanitize=all)
target_link_libraries(brisk_changeshim PRIVATE ${CMAKE_DL_LIBS})
add_dependencies(data_test_file_change brisk_changeshim)
