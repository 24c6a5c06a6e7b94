# For folders with Fortran sources: the top level's C-only warning flags (-Wshadow,
# -Wstrict-prototypes, ...) apply to C sources only, so gfortran does not warn about them.
function(brisk_c_only_warnings)
  get_directory_property(opts COMPILE_OPTIONS)
  set(out "")
  foreach(o IN LISTS opts)
    if(o MATCHES "^-W(shadow|strict-prototypes|no-format-truncation)$")
      list(APPEND out "$<$<COMPILE_LANGUAGE:C>:${o}>")
    else()
      list(APPEND out "${o}")
    endif()
  endforeach()
  set_directory_properties(PROPERTIES COMPILE_OPTIONS "${out}")
endfunction()
