# Fails when one of FILES records the CUDA driver library (libcuda.so.1) as
# needed: such a binary cannot start on a machine without a GPU driver.
foreach(f IN LISTS FILES)
  execute_process(COMMAND ${READELF} -d ${f} OUTPUT_VARIABLE out RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "readelf -d ${f} failed")
  endif()
  string(REGEX MATCHALL "\\(NEEDED\\)[^\n]*libcuda\\.so[^\n]*" driver "${out}")
  if(driver)
    message(FATAL_ERROR "${f} needs the CUDA driver library: ${driver}")
  endif()
  message(STATUS "${f}: no driver library needed")
endforeach()
