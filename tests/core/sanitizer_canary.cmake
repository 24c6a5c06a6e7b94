# Sanitizer builds only: the canaries of sanitizer_canary.c must be caught, which proves
# that ASan, UBSan and LeakSanitizer are active for the whole suite that runs beside them.
if(BRISK_SANITIZE)
  add_executable(sanitizer_canary ${CMAKE_CURRENT_LIST_DIR}/sanitizer_canary.c)
  set(canary_leak "LeakSanitizer: detected memory leaks")
  set(canary_overflow "AddressSanitizer: heap-buffer-overflow")
  set(canary_undefined "runtime error: signed integer overflow")
  foreach(kind leak overflow undefined)
    add_test(NAME core.sanitizer_catches_${kind} COMMAND sanitizer_canary ${kind})
    set_tests_properties(core.sanitizer_catches_${kind} PROPERTIES PASS_REGULAR_EXPRESSION "${canary_${kind}}")
  endforeach()
endif()
