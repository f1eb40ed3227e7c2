# cmake/manpage_build.cmake - one man page: docs/man/NAME.md -> troff -> .gz.
# Run by the build (cmake/manpages.cmake) with -P and
#   -DAWK= -DGZIP= -DSCRIPT=md2man.awk -DSRC=page.md -DOUT=page -DVERSION= -DDATE=
# Writes OUT and OUT.gz (gzip -9n: no name or time stamp, so the same source
# gives the same bytes).  A failing step leaves no output behind.
foreach(v AWK GZIP SCRIPT SRC OUT VERSION DATE)
  if(NOT DEFINED ${v} OR "${${v}}" STREQUAL "")
    message(FATAL_ERROR "manpage_build.cmake: -D${v}= is missing")
  endif()
endforeach()
get_filename_component(dir ${OUT} DIRECTORY)
file(MAKE_DIRECTORY ${dir})
execute_process(COMMAND ${AWK} -v version=${VERSION} -v date=${DATE} -f ${SCRIPT} ${SRC}
                OUTPUT_FILE ${OUT}.tmp RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  file(REMOVE ${OUT}.tmp ${OUT} ${OUT}.gz)
  message(FATAL_ERROR "md2man.awk failed on ${SRC} (${rc})")
endif()
file(RENAME ${OUT}.tmp ${OUT})
execute_process(COMMAND ${GZIP} -9 -n -c ${OUT} OUTPUT_FILE ${OUT}.gz.tmp RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  file(REMOVE ${OUT}.gz.tmp ${OUT} ${OUT}.gz)
  message(FATAL_ERROR "gzip failed on ${OUT} (${rc})")
endif()
file(RENAME ${OUT}.gz.tmp ${OUT}.gz)
