# The TensorBoard event file of `brisk train`, read back by the real `tensorboard` package
# (tools/install-python-deps.sh <build>/pydeps): every scalar of metrics.jsonl exactly, the
# config and optimization texts, parameter histograms. SKIP without the package.
add_test(NAME train.tensorboard
  COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/tensorboard.sh $<TARGET_FILE:brisk_cli> ${CMAKE_BINARY_DIR}/pydeps
          ${CMAKE_CURRENT_BINARY_DIR}/tensorboard.work)
set_tests_properties(train.tensorboard PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300 ENVIRONMENT "OMP_NUM_THREADS=2")
