# The brisk command end to end: bad inputs give one clear error and a non-zero exit, never a crash.
add_test(NAME cli.bad_inputs COMMAND ${CMAKE_CURRENT_LIST_DIR}/bad_inputs.sh $<TARGET_FILE:brisk_cli> ${CMAKE_BINARY_DIR}/cli_bad_inputs)
add_test(NAME cli.example_roundtrip COMMAND ${CMAKE_CURRENT_LIST_DIR}/roundtrip.sh $<TARGET_FILE:brisk_cli> ${CMAKE_BINARY_DIR}/cli_roundtrip ${CMAKE_SOURCE_DIR})
add_test(NAME cli.checkpoint_in_pytorch COMMAND ${CMAKE_CURRENT_LIST_DIR}/checkpoint_in_pytorch.sh $<TARGET_FILE:brisk_cli>
  ${CMAKE_BINARY_DIR}/cli_ckpt_torch ${CMAKE_BINARY_DIR}/pydeps ${CMAKE_SOURCE_DIR})
set_tests_properties(cli.checkpoint_in_pytorch PROPERTIES SKIP_RETURN_CODE 77)
add_test(NAME cli.sequence COMMAND ${BRISK_CLEAN_ON_PASS} ${CMAKE_BINARY_DIR}/cli_sequence ${CMAKE_CURRENT_LIST_DIR}/sequence.sh $<TARGET_FILE:brisk_cli> ${CMAKE_BINARY_DIR}/cli_sequence
  ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR}/pydeps)
add_test(NAME cli.sequence_variants COMMAND ${CMAKE_CURRENT_LIST_DIR}/sequence_variants.sh $<TARGET_FILE:brisk_cli>
  ${CMAKE_BINARY_DIR}/cli_sequence_variants ${CMAKE_BINARY_DIR}/pydeps)
set_tests_properties(cli.sequence_variants PROPERTIES SKIP_RETURN_CODE 77)
# A run refused (a previous run in its directory, the directory in use) rewrites neither
# report.html nor metrics.jsonl.
add_test(NAME cli.refused_run COMMAND ${CMAKE_CURRENT_LIST_DIR}/refused_run.sh $<TARGET_FILE:brisk_cli> ${CMAKE_BINARY_DIR}/cli_refused_run)
# Output paths: symlinks followed, devices and FIFOs written in place, "-" for stdout, folders made.
add_test(NAME cli.outputs COMMAND ${CMAKE_CURRENT_LIST_DIR}/outputs.sh $<TARGET_FILE:brisk_cli> ${CMAKE_BINARY_DIR}/cli_outputs)
# The repository stands alone: no file names a folder beside the checkout, a machine's own paths, or
# a parent path above the root (tests/cli/standalone.sh).
add_test(NAME cli.standalone COMMAND ${CMAKE_CURRENT_LIST_DIR}/standalone.sh ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR}/cli_standalone)
# The Makefile: make run builds the brisk command alone, make test and make build everything (make -n).
add_test(NAME cli.make_targets COMMAND ${CMAKE_CURRENT_LIST_DIR}/make_targets.sh ${CMAKE_SOURCE_DIR})
set_tests_properties(cli.make_targets PROPERTIES SKIP_RETURN_CODE 77)
# docs/config.md is generated from the config reader: fails when it drifts.
add_test(NAME cli.config_reference COMMAND ${CMAKE_CURRENT_LIST_DIR}/config_reference.sh $<TARGET_FILE:brisk_cli> ${CMAKE_SOURCE_DIR})
# make install: a temporary prefix, and a C program built against it with pkg-config and find_package.
# Not in sanitizer builds: the installed library then needs the sanitizer runtime's flags too.
if(NOT BRISK_SANITIZE)
  include(CheckLanguage)
  check_language(CXX)
  add_test(NAME cli.install COMMAND ${CMAKE_CURRENT_LIST_DIR}/install.sh ${CMAKE_BINARY_DIR} ${CMAKE_BINARY_DIR}/cli_install
    ${CMAKE_COMMAND} ${CMAKE_C_COMPILER} "${CMAKE_CXX_COMPILER}" "${CMAKE_Fortran_COMPILER}")
endif()
if(PNG_FOUND) # brisk synth images writes PNG through libpng
  add_test(NAME cli.images COMMAND ${BRISK_CLEAN_ON_PASS} ${CMAKE_BINARY_DIR}/cli_images ${CMAKE_CURRENT_LIST_DIR}/images.sh $<TARGET_FILE:brisk_cli> ${CMAKE_BINARY_DIR}/cli_images)
  # examples/resnet.json: train, resume exactly, predict on a folder, the checkpoint in PyTorch
  add_test(NAME cli.resnet COMMAND ${BRISK_CLEAN_ON_PASS} ${CMAKE_BINARY_DIR}/cli_resnet ${CMAKE_CURRENT_LIST_DIR}/resnet.sh $<TARGET_FILE:brisk_cli> ${CMAKE_BINARY_DIR}/cli_resnet
    ${CMAKE_SOURCE_DIR})
  set_tests_properties(cli.resnet PROPERTIES ENVIRONMENT "OMP_NUM_THREADS=2")
  # images written by Pillow: EXIF orientation, label checks, pixels failing mid-run, predict on a folder, validation files, keypoint metrics and letterboxing (tests/cli/photos.sh; skipped without Pillow)
  foreach(case exif labels decode predict validation)
    add_test(NAME cli.photos.${case} COMMAND ${BRISK_CLEAN_ON_PASS} ${CMAKE_BINARY_DIR}/cli_photos_${case} ${CMAKE_CURRENT_LIST_DIR}/photos.sh $<TARGET_FILE:brisk_cli>
      ${CMAKE_BINARY_DIR}/cli_photos_${case} ${case})
    set_tests_properties(cli.photos.${case} PROPERTIES SKIP_RETURN_CODE 77 ENVIRONMENT "OMP_NUM_THREADS=2")
  endforeach()
endif()
if(NETCDF_FOUND) # brisk synth weather writes NetCDF-4 through libnetcdf
  add_test(NAME cli.weather COMMAND ${CMAKE_CURRENT_LIST_DIR}/weather.sh $<TARGET_FILE:brisk_cli> ${CMAKE_BINARY_DIR}/cli_weather)
  # archive layouts written by ncgen: CDS names, epochs, invariants, wrapped longitudes, scoring
  add_test(NAME cli.weather_archive COMMAND ${CMAKE_CURRENT_LIST_DIR}/weather_archive.sh $<TARGET_FILE:brisk_cli>
    ${CMAKE_BINARY_DIR}/cli_weather_archive)
  set_tests_properties(cli.weather_archive PROPERTIES SKIP_RETURN_CODE 77)
endif()
# Progress: a live line on a terminal (under script(1)), plain lines otherwise, --quiet, --log-format json.
add_test(NAME cli.progress COMMAND ${CMAKE_CURRENT_LIST_DIR}/progress.sh $<TARGET_FILE:brisk_cli> ${CMAKE_BINARY_DIR}/cli_progress)
set_tests_properties(cli.progress PROPERTIES ENVIRONMENT "OMP_NUM_THREADS=2")
add_test(NAME cli.dist_plan COMMAND ${CMAKE_CURRENT_LIST_DIR}/dist_plan.sh $<TARGET_FILE:brisk_cli> ${CMAKE_BINARY_DIR}/cli_dist_plan ${CMAKE_SOURCE_DIR})
# brisk profile on the CPU: the per-op table sums to the eager step; --json parses.
add_test(NAME cli.profile COMMAND ${CMAKE_CURRENT_LIST_DIR}/profile.sh $<TARGET_FILE:brisk_cli> ${CMAKE_BINARY_DIR}/cli_profile)
# The cache of measured choices: where it goes, and that a missing $HOME is never created.
add_test(NAME cli.cache_dir COMMAND ${CMAKE_CURRENT_LIST_DIR}/cache_dir.sh $<TARGET_FILE:brisk_cli> ${CMAKE_BINARY_DIR}/cli_cache_dir)
