# safetensors interop with the Python `safetensors` package (both directions). The
# package comes from tools/install-python-deps.sh <build>/pydeps; without it (or
# without /usr/bin/python3) the test reports SKIP, never a silent pass.
add_executable(formats_safetensors_python_tool ${CMAKE_CURRENT_LIST_DIR}/safetensors_python_tool.c)
target_link_libraries(formats_safetensors_python_tool PRIVATE brisk)
add_test(NAME formats.safetensors_python
  COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/safetensors_python.sh $<TARGET_FILE:formats_safetensors_python_tool>
          ${CMAKE_BINARY_DIR}/pydeps ${CMAKE_CURRENT_BINARY_DIR}/safetensors_python.work)
set_tests_properties(formats.safetensors_python PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120)
