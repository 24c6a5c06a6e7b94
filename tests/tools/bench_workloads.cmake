# Every workload brisk_bench names builds and takes a step (the side-by-side numbers come from
# bench/run.sh; this only keeps each workload runnable: a merge once left resnet unreachable).
# The benchmark exits without freeing its model (a program, not the library): no leak check,
# as for the MPI tests.
foreach(w diffusion tabular lstm transformer resnet meshgnn)
  add_test(NAME tools.bench_workload_${w}
    COMMAND brisk_bench --workload ${w} --small --steps 1 --warmup 0 --threads 1 --batch 4)
  set_tests_properties(tools.bench_workload_${w} PROPERTIES ENVIRONMENT "OMP_NUM_THREADS=1;ASAN_OPTIONS=detect_leaks=0")
endforeach()
