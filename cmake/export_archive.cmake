# The installed libbrisk.a: the build's archive linked into one relocatable object whose only
# global definitions are brisk_* (objcopy makes the rest local), so a host program that
# defines cpu_matmul or nn_linear of its own still links. The build's own archive keeps its
# internal names: the tests call them.
#   cmake -DAR= -DLD= -DOBJCOPY= -DIN=libbrisk.a -DOUT=export/libbrisk.a -P export_archive.cmake
get_filename_component(dir "${OUT}" DIRECTORY)
file(MAKE_DIRECTORY "${dir}")
set(obj "${dir}/brisk.o")
execute_process(COMMAND "${LD}" -r -o "${obj}" --whole-archive "${IN}" RESULT_VARIABLE rc ERROR_VARIABLE msg)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "ld -r ${IN}: ${msg}")
endif()
execute_process(COMMAND "${OBJCOPY}" --wildcard --keep-global-symbol=brisk_* "${obj}" RESULT_VARIABLE rc
  ERROR_VARIABLE msg)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "objcopy ${obj}: ${msg}")
endif()
file(REMOVE "${OUT}")
set(keep_obj "${obj}")
execute_process(COMMAND "${AR}" rcs "${OUT}" "${obj}" RESULT_VARIABLE rc ERROR_VARIABLE msg)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "ar ${OUT}: ${msg}")
endif()
file(REMOVE "${keep_obj}")
