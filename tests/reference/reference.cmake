# brisk vs PyTorch on identical weights and batches (Debian's python3-torch, /usr/bin/python3),
# using the modules of bench/reference/models.py.
add_executable(ref_dump ${CMAKE_CURRENT_LIST_DIR}/ref_dump.c)
target_link_libraries(ref_dump PRIVATE brisk)
foreach(kind tabular diffusion lstm transformer meshgnn resnet)
  add_test(NAME reference.torch_${kind}
    COMMAND ${BRISK_CLEAN_ON_PASS} ${CMAKE_CURRENT_BINARY_DIR}/ref_${kind}.npz sh -c "$<TARGET_FILE:ref_dump> ${kind} ${CMAKE_CURRENT_BINARY_DIR}/ref_${kind}.npz && /usr/bin/python3 ${CMAKE_CURRENT_LIST_DIR}/check_torch.py ${kind} ${CMAKE_CURRENT_BINARY_DIR}/ref_${kind}.npz")
  set_tests_properties(reference.torch_${kind} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
endforeach()
# Graph models (examples/*.json of "type": "graph") against the module bench/reference/graph.py
# builds from the same config.
foreach(ex tabular_graph cnn1d gru_regressor two_heads cnn_classifier unet_downscaler)
  add_test(NAME reference.graph_${ex}
    COMMAND ${BRISK_CLEAN_ON_PASS} ${CMAKE_CURRENT_BINARY_DIR}/ref_graph_${ex}.npz sh -c "$<TARGET_FILE:ref_dump> graph ${CMAKE_SOURCE_DIR}/examples/${ex}.json ${CMAKE_CURRENT_BINARY_DIR}/ref_graph_${ex}.npz && /usr/bin/python3 ${CMAKE_CURRENT_LIST_DIR}/check_graph.py ${CMAKE_SOURCE_DIR}/examples/${ex}.json ${CMAKE_CURRENT_BINARY_DIR}/ref_graph_${ex}.npz")
  set_tests_properties(reference.graph_${ex} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
endforeach()
# The 1-D CNN's convolutions run by Winograd in normal runs (backend/cpu/conv_winograd.c) and
# by im2col above (as PyTorch sums them, so its 20 AdamW steps agree to 1e-5); by Winograd,
# the final parameters are held to 1e-4 (check_graph.py --winograd says why).
set_tests_properties(reference.graph_cnn1d PROPERTIES ENVIRONMENT "BRISK_CPU_WINOGRAD=0")
add_test(NAME reference.graph_cnn1d_winograd
  COMMAND ${BRISK_CLEAN_ON_PASS} ${CMAKE_CURRENT_BINARY_DIR}/ref_graph_cnn1d_winograd.npz sh -c "$<TARGET_FILE:ref_dump> graph ${CMAKE_SOURCE_DIR}/examples/cnn1d.json ${CMAKE_CURRENT_BINARY_DIR}/ref_graph_cnn1d_winograd.npz && /usr/bin/python3 ${CMAKE_CURRENT_LIST_DIR}/check_graph.py ${CMAKE_SOURCE_DIR}/examples/cnn1d.json ${CMAKE_CURRENT_BINARY_DIR}/ref_graph_cnn1d_winograd.npz --winograd")
set_tests_properties(reference.graph_cnn1d_winograd PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
# Every layer op of the second round in small models of tests/reference/graphs/.
foreach(cfg unet_ops conv1d_ops gru_ops)
  add_test(NAME reference.graph_${cfg}
    COMMAND ${BRISK_CLEAN_ON_PASS} ${CMAKE_CURRENT_BINARY_DIR}/ref_graph_${cfg}.npz sh -c "$<TARGET_FILE:ref_dump> graph ${CMAKE_CURRENT_LIST_DIR}/graphs/${cfg}.json ${CMAKE_CURRENT_BINARY_DIR}/ref_graph_${cfg}.npz && /usr/bin/python3 ${CMAKE_CURRENT_LIST_DIR}/check_graph.py ${CMAKE_CURRENT_LIST_DIR}/graphs/${cfg}.json ${CMAKE_CURRENT_BINARY_DIR}/ref_graph_${cfg}.npz")
  set_tests_properties(reference.graph_${cfg} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
endforeach()
# The same examples trained by `brisk train` (the whole trainer: data, checkpoints, metrics)
# and by PyTorch from brisk's step-0 checkpoint: 50 full-batch steps, each step's loss
# (train_graph.py). A learning rate per example that keeps its training stable, and fewer
# samples for the ResNet (its PyTorch fp64 reference is slow).
foreach(case tabular_graph:0.01:32 cnn1d:0.01:32 cnn_classifier:0.01:32 unet_downscaler:0.01:32 two_heads:1e-4:32
             gru_regressor:0.01:32 resnet_graph:1e-5:8)
  string(REPLACE ":" ";" parts ${case})
  list(GET parts 0 ex)
  list(GET parts 1 lr)
  list(GET parts 2 n)
  add_test(NAME reference.train50_${ex}
    COMMAND ${BRISK_CLEAN_ON_PASS} ${CMAKE_CURRENT_BINARY_DIR}/train50_${ex} /usr/bin/python3 ${CMAKE_CURRENT_LIST_DIR}/train_graph.py $<TARGET_FILE:brisk_cli>
      ${CMAKE_SOURCE_DIR}/examples/${ex}.json ${CMAKE_CURRENT_BINARY_DIR}/train50_${ex} ${lr} ${n})
  set_tests_properties(reference.train50_${ex} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600 ENVIRONMENT "OMP_NUM_THREADS=2")
endforeach()
