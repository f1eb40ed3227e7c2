# cmake/deb_docs.cmake - the Debian package's copyright and changelog.gz.
# Run by the build (cmake/package.cmake, PT_DEB_LAYOUT) with -P and
#   -DAWK= -DGZIP= -DSRC=<source dir> -DOUT=<dir> -DMAINTAINER='Name <mail>'
#
# copyright: LICENSE in Debian's machine-readable format (copyright-format
# 1.0; Debian calls the MIT licence "Expat").  changelog.gz: CHANGELOG.md as
# a Debian changelog (packaging/deb/changelog.awk), gzip -9n.
foreach(v AWK GZIP SRC OUT MAINTAINER)
  if(NOT DEFINED ${v} OR "${${v}}" STREQUAL "")
    message(FATAL_ERROR "deb_docs.cmake: -D${v}= is missing")
  endif()
endforeach()
file(MAKE_DIRECTORY ${OUT})

file(READ ${SRC}/LICENSE license)
string(REGEX MATCH "Copyright \\(c\\) ([^\n]*)" line "${license}")
if(NOT line)
  message(FATAL_ERROR "deb_docs.cmake: no 'Copyright (c) ...' line in LICENSE")
endif()
set(holder "${CMAKE_MATCH_1}")
string(FIND "${license}" "Permission is hereby granted" start)
if(start LESS 0)
  message(FATAL_ERROR "deb_docs.cmake: LICENSE is not the MIT licence text this expects")
endif()
string(SUBSTRING "${license}" ${start} -1 body)
string(STRIP "${body}" body)
# Continuation lines start with a space; an empty line is " .".
string(REPLACE "\n\n" "\n.\n" body "${body}")
string(REPLACE "\n" "\n " body "${body}")
file(WRITE ${OUT}/copyright
"Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: payterm
Upstream-Contact: ${MAINTAINER}

Files: *
Copyright: ${holder}
License: Expat

License: Expat
 ${body}
")

execute_process(COMMAND ${AWK} -v maintainer=${MAINTAINER} -f ${SRC}/packaging/deb/changelog.awk
                        ${SRC}/CHANGELOG.md
                OUTPUT_FILE ${OUT}/changelog RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  file(REMOVE ${OUT}/changelog ${OUT}/changelog.gz)
  message(FATAL_ERROR "changelog.awk failed (${rc})")
endif()
execute_process(COMMAND ${GZIP} -9 -n -c ${OUT}/changelog OUTPUT_FILE ${OUT}/changelog.gz.tmp
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  file(REMOVE ${OUT}/changelog.gz.tmp)
  message(FATAL_ERROR "gzip failed (${rc})")
endif()
file(RENAME ${OUT}/changelog.gz.tmp ${OUT}/changelog.gz)
