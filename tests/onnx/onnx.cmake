# Imported ONNX models (exported by the machine's PyTorch, /usr/bin/python3) trained by brisk
# train and by PyTorch from the same weights; two bad models and their errors.
add_test(NAME onnx.train_import
  COMMAND ${BRISK_CLEAN_ON_PASS} ${CMAKE_CURRENT_BINARY_DIR}/train_onnx /usr/bin/python3 ${CMAKE_CURRENT_LIST_DIR}/train_onnx.py $<TARGET_FILE:brisk_cli> ${CMAKE_CURRENT_BINARY_DIR}/train_onnx)
set_tests_properties(onnx.train_import PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600 ENVIRONMENT "OMP_NUM_THREADS=2")
foreach(group recurrent vision resnet transformer)
  add_test(NAME onnx.train_${group}
    COMMAND ${BRISK_CLEAN_ON_PASS} ${CMAKE_CURRENT_BINARY_DIR}/train_onnx_${group} /usr/bin/python3 ${CMAKE_CURRENT_LIST_DIR}/train_onnx.py $<TARGET_FILE:brisk_cli> ${CMAKE_CURRENT_BINARY_DIR}/train_onnx_${group} ${group})
  set_tests_properties(onnx.train_${group} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600 ENVIRONMENT "OMP_NUM_THREADS=2")
endforeach()
