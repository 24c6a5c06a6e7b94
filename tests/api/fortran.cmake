# The API as a Fortran simulation meets it (issue 18): the binding's error matrix, and a
# simulation (sim.F90) run alone, under `mpirun -np 2` bound and unbound, and stopped by
# SIGTERM mid-training (sim_stop.sh), all on tiny sizes so each takes seconds on 2 cores.
# The handle test also runs under valgrind when there is one (not in sanitizer builds).
# Valgrind has no AVX-512 decoder: on a CPU where -march=native turns AVX-512 on, the library's
# own code stops it with SIGILL (seen on an AVX-512 EPYC), so the test is left to ASan there.
find_program(VALGRIND valgrind)
set(BRISK_VALGRIND_DECODES ON)
if(VALGRIND AND BRISK_NATIVE)
  include(CheckCSourceCompiles)
  set(CMAKE_REQUIRED_FLAGS -march=native)
  check_c_source_compiles("#ifdef __AVX512F__\n#error avx512\n#endif\nint main(void) { return 0; }"
                          BRISK_NATIVE_WITHOUT_AVX512)
  unset(CMAKE_REQUIRED_FLAGS)
  if(NOT BRISK_NATIVE_WITHOUT_AVX512)
    set(BRISK_VALGRIND_DECODES OFF)
    message(STATUS "api.test_handles_valgrind not registered: -march=native enables AVX-512, which valgrind cannot decode")
  endif()
endif()
if(VALGRIND AND BRISK_VALGRIND_DECODES AND NOT BRISK_SANITIZE)
  add_test(NAME api.test_handles_valgrind COMMAND ${VALGRIND} --error-exitcode=9 --leak-check=full
    --errors-for-leak-kinds=definite --suppressions=${CMAKE_CURRENT_LIST_DIR}/valgrind.supp
    $<TARGET_FILE:api_test_handles>)
  set_tests_properties(api.test_handles_valgrind PROPERTIES ENVIRONMENT "OMP_NUM_THREADS=1")
endif()

if(NOT CMAKE_Fortran_COMPILER)
  return()
endif()
# gfortran reports floating-point flags still raised at STOP; brisk must leave none.
set(fenv_note "floating-point exceptions are signalling")

add_executable(api_binding_errors ${CMAKE_CURRENT_LIST_DIR}/binding_errors.f90)
target_link_libraries(api_binding_errors PRIVATE brisk_fortran)
target_compile_options(api_binding_errors PRIVATE -std=f2008)
add_test(NAME api.fortran_binding_errors COMMAND api_binding_errors)
set_tests_properties(api.fortran_binding_errors PROPERTIES ENVIRONMENT "OMP_NUM_THREADS=1"
  FAIL_REGULAR_EXPRESSION "${fenv_note}")

# The README's Fortran snippet compiles as Fortran 2008 (no `stop` with a function result).
add_test(NAME api.fortran_doc_snippet COMMAND ${CMAKE_CURRENT_LIST_DIR}/doc_snippet.sh ${CMAKE_Fortran_COMPILER}
  ${CMAKE_SOURCE_DIR}/examples/README.md $<TARGET_PROPERTY:brisk_fortran,Fortran_MODULE_DIRECTORY>
  ${CMAKE_BINARY_DIR}/api_doc_snippet)

add_executable(api_sim ${CMAKE_CURRENT_LIST_DIR}/sim.F90)
target_link_libraries(api_sim PRIVATE brisk_fortran)
target_compile_options(api_sim PRIVATE -std=f2008)
set(sim_dir ${CMAKE_BINARY_DIR}/api_sim)
add_test(NAME api.fortran_sim COMMAND api_sim ${sim_dir}/alone)
add_test(NAME api.fortran_sim_stop COMMAND ${CMAKE_CURRENT_LIST_DIR}/sim_stop.sh ${sim_dir}/stop 1 $<TARGET_FILE:api_sim>)
set_tests_properties(api.fortran_sim api.fortran_sim_stop PROPERTIES ENVIRONMENT "OMP_NUM_THREADS=1"
  FAIL_REGULAR_EXPRESSION "${fenv_note}")

find_package(MPI QUIET COMPONENTS Fortran)
if(NOT MPI_Fortran_FOUND OR NOT MPIEXEC_EXECUTABLE)
  message(STATUS "brisk: no MPI (Fortran) found; the API's MPI simulation tests are not built")
  return()
endif()
add_executable(api_sim_mpi ${CMAKE_CURRENT_LIST_DIR}/sim.F90)
target_compile_definitions(api_sim_mpi PRIVATE BRISK_TEST_MPI)
target_link_libraries(api_sim_mpi PRIVATE brisk_fortran MPI::MPI_Fortran)
# As root in CI, on fewer cores than ranks; no single-copy shared memory (containers forbid
# the ptrace it needs). The thread count is left to brisk's default (speed.threads 0).
set(sim_mpi_env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
  OMPI_MCA_btl_vader_single_copy_mechanism=none "ASAN_OPTIONS=detect_leaks=0")
set(mpirun ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2)
add_test(NAME api.fortran_sim_mpi_bound COMMAND ${mpirun} --bind-to core $<TARGET_FILE:api_sim_mpi> ${sim_dir}/bound)
add_test(NAME api.fortran_sim_mpi_unbound COMMAND ${mpirun} --bind-to none $<TARGET_FILE:api_sim_mpi> ${sim_dir}/unbound)
add_test(NAME api.fortran_sim_mpi_stop COMMAND ${CMAKE_CURRENT_LIST_DIR}/sim_stop.sh ${sim_dir}/mpi_stop 2 ${mpirun}
  --bind-to core $<TARGET_FILE:api_sim_mpi>)
# Unbound ranks with the default thread count were 4-50x slower than bound ones (issue 18,
# part 6): the timeout turns a regression there into a failure rather than a long wait.
set_tests_properties(api.fortran_sim_mpi_bound api.fortran_sim_mpi_unbound api.fortran_sim_mpi_stop PROPERTIES
  ENVIRONMENT "${sim_mpi_env}" FAIL_REGULAR_EXPRESSION "${fenv_note}" TIMEOUT 300)
