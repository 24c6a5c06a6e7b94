# make install (cmake --install BUILD --prefix P): the brisk command, the static library, its
# headers, a pkg-config file and a CMake package, both giving the link line of the build that
# was made (a CUDA build needs the CUDA runtime and cuBLASLt; a CPU build does not).
#   cc app.c $(pkg-config --cflags --libs brisk)
#   find_package(brisk REQUIRED) ... target_link_libraries(app PRIVATE brisk::brisk)
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS brisk_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS brisk EXPORT briskTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
# ... and then replaced by the archive whose only globals are brisk_* (CMakeLists.txt): the
# export above describes the file, this gives its content. A copy, always: install(FILES) skips
# a file whose time stamp equals the one just installed, which a fast build gives to both.
install(CODE "set(to \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/libbrisk.a\")
  message(STATUS \"Installing: \${to} (only brisk_* global)\")
  execute_process(COMMAND \"${CMAKE_COMMAND}\" -E copy \"${BRISK_EXPORT_ARCHIVE}\" \"\${to}\" COMMAND_ERROR_IS_FATAL ANY)")
install(DIRECTORY ${CMAKE_SOURCE_DIR}/include/brisk DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
# The shared library (soname libbrisk.so.MAJOR), for programs that load brisk at run time or
# prefer it; pkg-config and brisk::brisk link the static one by its path, so -lbrisk alone is
# the shared one.
if(BRISK_SHARED)
  install(TARGETS brisk_shared LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
endif()
# The Fortran binding as source (a .mod file is one compiler's): add it to a Fortran target,
# e.g. target_sources(app PRIVATE ${brisk_FORTRAN_MODULE_SOURCE}).
install(FILES ${CMAKE_SOURCE_DIR}/bindings/fortran/brisk.f90 DESTINATION ${CMAKE_INSTALL_DATADIR}/brisk/fortran)

# pkg-config: a static library lists every dependency in Libs.
set(BRISK_PC_BUILD "CPU only")
set(pc_libs "")
if(BRISK_HAVE_CUDA)
  set(BRISK_PC_BUILD "the CUDA backend, CUDA ${CUDAToolkit_VERSION}")
  # the kernels' objects need the C++ runtime, which CMake's own links add implicitly (g++ links them)
  string(APPEND pc_libs " -L${CUDAToolkit_LIBRARY_DIR} -Wl,-rpath,${CUDAToolkit_LIBRARY_DIR} -lcudart -lstdc++")
  target_link_libraries(brisk INTERFACE $<INSTALL_INTERFACE:stdc++>)
  get_filename_component(BRISK_CUDA_ROOT "${CUDAToolkit_BIN_DIR}" DIRECTORY)
endif()
if(BRISK_HAVE_BLAS)
  string(APPEND pc_libs " ${OPENBLAS_LIBRARY}")
endif()
if(BRISK_HAVE_MPI)
  foreach(lib ${MPI_C_LIBRARIES})
    string(APPEND pc_libs " ${lib}")
  endforeach()
endif()
if(ZLIB_FOUND)
  string(APPEND pc_libs " -lz")
endif()
if(PNG_FOUND)
  string(APPEND pc_libs " -lpng")
endif()
if(JPEG_FOUND)
  string(APPEND pc_libs " -ljpeg")
endif()
if(NETCDF_FOUND)
  string(APPEND pc_libs " -lnetcdf")
endif()
string(APPEND pc_libs " ${CJSON_LIBRARY} ${OpenMP_C_FLAGS} -pthread")
foreach(lib ${CMAKE_DL_LIBS} m)
  string(APPEND pc_libs " -l${lib}")
endforeach()
string(STRIP "${pc_libs}" BRISK_PC_LIBS)
file(RELATIVE_PATH BRISK_PC_UP "/p/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/p")
configure_file(${CMAKE_SOURCE_DIR}/cmake/brisk.pc.in ${CMAKE_BINARY_DIR}/brisk.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/brisk.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# The CMake package
set(pkg_dir ${CMAKE_INSTALL_LIBDIR}/cmake/brisk)
install(EXPORT briskTargets NAMESPACE brisk:: DESTINATION ${pkg_dir})
configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/briskConfig.cmake.in ${CMAKE_BINARY_DIR}/briskConfig.cmake
  INSTALL_DESTINATION ${pkg_dir} PATH_VARS CMAKE_INSTALL_DATADIR)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/briskConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/briskConfig.cmake ${CMAKE_BINARY_DIR}/briskConfigVersion.cmake DESTINATION ${pkg_dir})
