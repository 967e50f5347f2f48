# Package.AotConsumerC: a C99 consumer of an AOT library, compiled and linked
# with only the files `rope-gen build` wrote (copied into a directory of
# their own; no source tree, no Halide include path) and the link line the
# header documents, then run.
#   cmake -DROPEGEN=rope-gen -DCC=cc -DSOURCE_DIR=tests/consumer/c -DWORK=DIR -P run_consumer.cmake
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message("$ ${ARGN}\n${out}${err}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc})")
  endif()
endfunction()

file(REMOVE_RECURSE "${WORK}")
run("${ROPEGEN}" build "${SOURCE_DIR}/consumer_c.yaml" -o "${WORK}/built")
file(MAKE_DIRECTORY "${WORK}/lib")
file(GLOB built "${WORK}/built/*")
file(COPY ${built} DESTINATION "${WORK}/lib")
file(COPY "${SOURCE_DIR}/consumer.c" DESTINATION "${WORK}/app")
run("${CC}" -std=c99 -pedantic -Wall -Wextra -Werror -I "${WORK}/lib" "${WORK}/app/consumer.c"
    "${WORK}/lib/libconsumer_c.a" -lstdc++ -lpthread -ldl -lm -o "${WORK}/app/consumer")
run("${WORK}/app/consumer")
