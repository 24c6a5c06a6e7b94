# Data parallel over MPI: the collectives, `brisk train` and the embedded API under
# `mpirun -np 2` (Open MPI; CI runs as root on 2 cores, hence --allow-run-as-root and
# --oversubscribe, and no single-copy shared memory: containers forbid the ptrace it needs).
# Without MPI in the build only the single-process dist.test_dist_group runs (it checks the
# refusal of a world size above 1).
add_executable(dist_weights_diff ${CMAKE_CURRENT_LIST_DIR}/weights_diff.c)
target_link_libraries(dist_weights_diff PRIVATE brisk m)
if(NOT BRISK_HAVE_MPI OR NOT MPIEXEC_EXECUTABLE)
  return()
endif()
set(BRISK_MPIRUN ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2 --allow-run-as-root --oversubscribe)
set(dist_env "ASAN_OPTIONS=detect_leaks=0" "OMPI_MCA_btl_vader_single_copy_mechanism=none")
add_test(NAME dist.group_mpi COMMAND ${BRISK_MPIRUN} $<TARGET_FILE:dist_test_dist_group> mpi)
foreach(mode equal resume fault signal launcher overlap shard)
  add_test(NAME dist.train_mpi_${mode} COMMAND ${BRISK_CLEAN_ON_PASS} ${CMAKE_BINARY_DIR}/dist_${mode} ${CMAKE_CURRENT_LIST_DIR}/train_mpi.sh ${mode} $<TARGET_FILE:brisk_cli>
    $<TARGET_FILE:dist_weights_diff> ${CMAKE_BINARY_DIR}/dist_${mode} ${CMAKE_SOURCE_DIR} ${BRISK_MPIRUN})
  set_tests_properties(dist.train_mpi_${mode} PROPERTIES SKIP_RETURN_CODE 77)
endforeach()
# Ranks that disagree (config, data, batch, resume position, model shape): one error on every rank
foreach(mode seed lr data batch out model)
  add_test(NAME dist.disagree_${mode} COMMAND ${CMAKE_CURRENT_LIST_DIR}/disagree_mpi.sh ${mode} $<TARGET_FILE:brisk_cli>
    ${CMAKE_BINARY_DIR}/disagree_${mode} ${CMAKE_SOURCE_DIR} ${BRISK_MPIRUN})
  set_tests_properties(dist.disagree_${mode} PROPERTIES TIMEOUT 300 ENVIRONMENT "${dist_env}")
endforeach()
# examples/slurm/cpu-mpirun.sbatch with SLURM's variables and a stand-in scontrol: SIGUSR1 to the
# batch shell reaches the ranks through mpirun, exit 75, requeue; the requeued job resumes
add_test(NAME dist.sbatch_mpirun COMMAND ${BRISK_CLEAN_ON_PASS} ${CMAKE_BINARY_DIR}/sbatch_mpirun ${CMAKE_CURRENT_LIST_DIR}/sbatch_mpirun.sh $<TARGET_FILE:brisk_cli>
  ${CMAKE_BINARY_DIR}/sbatch_mpirun ${CMAKE_SOURCE_DIR})
set_tests_properties(dist.sbatch_mpirun PROPERTIES TIMEOUT 180 ENVIRONMENT "${dist_env}")
# 2 ranks killed (SIGKILL) after a mid-epoch checkpoint: rank 0's metrics.jsonl holds every step up to it
add_test(NAME dist.run_logs_killed_mpi COMMAND ${BRISK_CLEAN_ON_PASS} ${CMAKE_BINARY_DIR}/run_logs_killed_mpi ${CMAKE_SOURCE_DIR}/tests/train/run_logs.sh killed $<TARGET_FILE:brisk_cli>
  ${CMAKE_BINARY_DIR}/run_logs_killed_mpi ${CMAKE_BINARY_DIR}/pydeps ${BRISK_MPIRUN})
set_tests_properties(dist.run_logs_killed_mpi PROPERTIES TIMEOUT 180 ENVIRONMENT "${dist_env}")
add_executable(dist_session_mpi ${CMAKE_CURRENT_LIST_DIR}/session_mpi.c)
target_link_libraries(dist_session_mpi PRIVATE brisk MPI::MPI_C)
string(REPLACE ";" " " mpirun_line "${BRISK_MPIRUN}")
add_test(NAME dist.session_mpi COMMAND sh -c "rm -rf ${CMAKE_BINARY_DIR}/dist_session && mkdir -p \
${CMAKE_BINARY_DIR}/dist_session && ${mpirun_line} $<TARGET_FILE:dist_session_mpi> ${CMAKE_BINARY_DIR}/dist_session")
set_tests_properties(dist.group_mpi dist.train_mpi_equal dist.train_mpi_resume dist.train_mpi_fault
  dist.train_mpi_signal dist.train_mpi_launcher dist.train_mpi_overlap dist.train_mpi_shard dist.session_mpi PROPERTIES TIMEOUT 120 ENVIRONMENT "${dist_env}")
# The Fortran binding passes MPI_COMM_WORLD as its Fortran handle
find_package(MPI QUIET COMPONENTS Fortran)
if(CMAKE_Fortran_COMPILER AND MPI_Fortran_FOUND)
  add_executable(dist_session_mpi_f ${CMAKE_CURRENT_LIST_DIR}/session_mpi.F90)
  target_link_libraries(dist_session_mpi_f PRIVATE brisk_fortran MPI::MPI_Fortran)
  add_test(NAME dist.session_mpi_fortran COMMAND ${BRISK_MPIRUN} $<TARGET_FILE:dist_session_mpi_f>)
  set_tests_properties(dist.session_mpi_fortran PROPERTIES TIMEOUT 60 ENVIRONMENT "${dist_env}"
    PASS_REGULAR_EXPRESSION "PASS: the ranks hold one model")
endif()
