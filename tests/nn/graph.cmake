# Graph models against the built-in mlp and resnet: the same losses and checkpoints, bit for bit.
if(PNG_FOUND) # brisk synth images writes PNG
  add_test(NAME nn.graph_equivalence COMMAND ${BRISK_CLEAN_ON_PASS} ${CMAKE_BINARY_DIR}/nn_graph_equivalence ${CMAKE_CURRENT_LIST_DIR}/graph_equivalence.sh $<TARGET_FILE:brisk_cli>
    $<TARGET_FILE:dist_weights_diff> ${CMAKE_BINARY_DIR}/nn_graph_equivalence)
  set_tests_properties(nn.graph_equivalence PROPERTIES TIMEOUT 600)
endif()
# The graph examples (CNN classifier, two heads, 1-D CNN) from synthetic data; per-loss logging.
if(PNG_FOUND)
  add_test(NAME nn.graph_examples COMMAND ${BRISK_CLEAN_ON_PASS} ${CMAKE_BINARY_DIR}/nn_graph_examples ${CMAKE_CURRENT_LIST_DIR}/graph_examples.sh $<TARGET_FILE:brisk_cli>
    ${CMAKE_BINARY_DIR}/nn_graph_examples)
  set_tests_properties(nn.graph_examples PROPERTIES TIMEOUT 300)
endif()
# What a graph model gets as the built-ins do: resume, accumulation, data parallel (mpirun -np 2
# when the build has MPI), bench, profile, predict, ONNX export, TensorBoard, the report.
set(graph_mpirun "")
if(BRISK_HAVE_MPI AND MPIEXEC_EXECUTABLE)
  set(graph_mpirun ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2 --allow-run-as-root --oversubscribe)
endif()
add_test(NAME nn.graph_general COMMAND ${BRISK_CLEAN_ON_PASS} ${CMAKE_BINARY_DIR}/nn_graph_general ${CMAKE_CURRENT_LIST_DIR}/graph_general.sh $<TARGET_FILE:brisk_cli>
  $<TARGET_FILE:dist_weights_diff> ${CMAKE_BINARY_DIR}/nn_graph_general ${CMAKE_SOURCE_DIR} ${graph_mpirun})
set_tests_properties(nn.graph_general PROPERTIES TIMEOUT 300
  ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;OMPI_MCA_btl_vader_single_copy_mechanism=none")
