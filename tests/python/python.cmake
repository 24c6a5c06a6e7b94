# The Python package (python/): its pytest suite on this build's libbrisk.so, `pip install
# ./python` (scikit-build-core from build/pydeps; skipped without it), and brisk export --onnx
# in ONNX Runtime (skipped without onnxruntime). The package's tests are not in the
# sanitizer build: a sanitized libbrisk.so does not load into an unsanitized Python.
if(BRISK_SHARED AND NOT BRISK_SANITIZE)
  set(py_args ${CMAKE_BINARY_DIR} ${CMAKE_SOURCE_DIR})
  set(py_tests ${CMAKE_SOURCE_DIR}/python/tests)
  add_test(NAME python.package COMMAND ${CMAKE_CURRENT_LIST_DIR}/pytest.sh ${py_args} ${py_tests}/test_train.py
    ${py_tests}/test_session.py ${py_tests}/test_load_torch.py ${py_tests}/test_interrupt.py ${py_tests}/test_threads.py)
  add_test(NAME python.install COMMAND ${CMAKE_CURRENT_LIST_DIR}/pytest.sh ${py_args} ${py_tests}/test_install.py)
  # a PyTorch module through brisk and back: brisk train --model, brisk.load strict, from_torch,
  # export of the import run to ONNX Runtime (skipped without PyTorch)
  add_test(NAME python.onnx_torch COMMAND ${CMAKE_CURRENT_LIST_DIR}/pytest.sh ${py_args} ${py_tests}/test_onnx_torch.py)
  set_tests_properties(python.package python.install python.onnx_torch PROPERTIES SKIP_RETURN_CODE 77)
endif()
# brisk export --onnx against ONNX Runtime: a CLI feature, tested from Python (it runs the brisk
# command, so the sanitizer build runs it too)
add_test(NAME python.export_onnx COMMAND ${CMAKE_CURRENT_LIST_DIR}/pytest.sh ${CMAKE_BINARY_DIR} ${CMAKE_SOURCE_DIR}
  ${CMAKE_SOURCE_DIR}/python/tests/test_export_onnx.py)
set_tests_properties(python.export_onnx PROPERTIES SKIP_RETURN_CODE 77)
# The thread-pool tests on a sanitized libbrisk.so, its runtime preloaded into Python.
if(BRISK_SHARED AND (BRISK_SANITIZE OR BRISK_TSAN))
  if(BRISK_TSAN)
    set(san thread)
  else()
    set(san address)
  endif()
  add_test(NAME python.threads_sanitized COMMAND ${CMAKE_CURRENT_LIST_DIR}/sanitized.sh ${san} ${CMAKE_BINARY_DIR}
    ${CMAKE_SOURCE_DIR} ${CMAKE_C_COMPILER})
  set_tests_properties(python.threads_sanitized PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300 LABELS threads)
endif()
