# brisk's CONV2D, POOL2D and BATCHNORM vs torch.nn.functional.conv2d, max_pool2d,
# avg_pool2d and torch.nn.BatchNorm2d on identical data (Debian's python3-torch, /usr/bin/python3); skipped without PyTorch.
add_executable(vision_dump ${CMAKE_CURRENT_LIST_DIR}/vision_dump.c)
target_link_libraries(vision_dump PRIVATE brisk)
add_test(NAME reference.torch_vision
  COMMAND sh -c "$<TARGET_FILE:vision_dump> ${CMAKE_CURRENT_BINARY_DIR}/ref_vision.npz && /usr/bin/python3 ${CMAKE_CURRENT_LIST_DIR}/vision_torch.py ${CMAKE_CURRENT_BINARY_DIR}/ref_vision.npz")
set_tests_properties(reference.torch_vision PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
