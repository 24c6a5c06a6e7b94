# The Python package (python/): its pytest suite on this build's libbrisk.so, and
# `pip install ./python` (scikit-build-core from build/pydeps; skipped without it). Not in the
# sanitizer build: a sanitized libbrisk.so does not load into an unsanitized Python.
if(BRISK_SHARED AND NOT BRISK_SANITIZE)
  set(py_args ${CMAKE_BINARY_DIR} ${CMAKE_SOURCE_DIR} ${BRISK_WORKLOADS_DIR})
  add_test(NAME python.package COMMAND ${CMAKE_CURRENT_LIST_DIR}/pytest.sh ${py_args} --deselect
    ${CMAKE_SOURCE_DIR}/python/tests/test_install.py::test_pip_install)
  add_test(NAME python.install COMMAND ${CMAKE_CURRENT_LIST_DIR}/pytest.sh ${py_args} -rs -k test_pip_install)
  set_tests_properties(python.package python.install PROPERTIES SKIP_RETURN_CODE 77)
endif()
