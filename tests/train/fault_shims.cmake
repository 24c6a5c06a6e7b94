# The fault-injecting LD_PRELOAD libraries (found by the tests at
# BRISK_BINARY_DIR/tests/lib<name>.so): faultshim.c fails or kills at checkpoint file
# operations, allocshim.c fails one allocation site. They are preloaded into sanitized
# binaries too (faultshim), so they are built without the sanitizers themselves.
foreach(shim faultshim allocshim)
  add_library(brisk_${shim} MODULE ${CMAKE_CURRENT_LIST_DIR}/${shim}.c)
  set_target_properties(brisk_${shim} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests PREFIX lib)
  target_compile_options(brisk_${shim} PRIVATE -fno-sanitize=all)
  target_link_options(brisk_${shim} PRIVATE -fno-sanitize=all)
  target_link_libraries(brisk_${shim} PRIVATE ${CMAKE_DL_LIBS})
endforeach()
