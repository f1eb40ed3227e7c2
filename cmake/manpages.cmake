# cmake/manpages.cmake - payterm(8) and payterm.json(5), generated at build time
# (SPEC 14) from the text in docs/man/*.md by cmake/md2man.awk.
#
# The troff files land in the build tree (docs/man/payterm.8, ...) beside a
# gzip -9n copy, which is what gets installed: Debian wants man pages
# compressed with the highest level and without a name or time stamp in the
# header (reproducible).  The version in the pages is the project's (the
# file VERSION), the date that of its release in CHANGELOG.md.
#
# Needs only awk and gzip (both in every Debian and Buildroot host); `man`
# is not needed to build, only to look at the result:
#   man -l build/<dir>/docs/man/payterm.8

find_program(PT_AWK NAMES awk mawk gawk REQUIRED)
find_program(PT_GZIP gzip REQUIRED)

# The release date of this version: "## [0.2.0] - 2026-12-01" in CHANGELOG.md.
file(STRINGS ${PROJECT_SOURCE_DIR}/CHANGELOG.md _pt_release
     REGEX "^## \\[${PROJECT_VERSION}\\] - [0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]")
if(_pt_release)
  string(REGEX REPLACE ".* - " "" PT_RELEASE_DATE "${_pt_release}")
else()
  message(WARNING "CHANGELOG.md has no '## [${PROJECT_VERSION}] - YYYY-MM-DD' section: "
                  "the man pages say 'unreleased'")
  set(PT_RELEASE_DATE unreleased)
endif()
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/CHANGELOG.md)

set(PT_MAN_DIR ${PROJECT_BINARY_DIR}/docs/man)
set(PT_MAN_PAGES payterm.8 payterm.json.5)
set(PT_MAN_OUTPUTS)
foreach(page ${PT_MAN_PAGES})
  set(src ${PROJECT_SOURCE_DIR}/docs/man/${page}.md)
  set(out ${PT_MAN_DIR}/${page})
  add_custom_command(
    OUTPUT ${out} ${out}.gz
    COMMAND ${CMAKE_COMMAND} -DAWK=${PT_AWK} -DGZIP=${PT_GZIP}
            -DSCRIPT=${PROJECT_SOURCE_DIR}/cmake/md2man.awk -DSRC=${src} -DOUT=${out}
            -DVERSION=${PROJECT_VERSION} -DDATE=${PT_RELEASE_DATE}
            -P ${PROJECT_SOURCE_DIR}/cmake/manpage_build.cmake
    DEPENDS ${src} ${PROJECT_SOURCE_DIR}/cmake/md2man.awk
            ${PROJECT_SOURCE_DIR}/cmake/manpage_build.cmake ${PROJECT_SOURCE_DIR}/VERSION
    COMMENT "Generating man page ${page}"
    VERBATIM)
  list(APPEND PT_MAN_OUTPUTS ${out} ${out}.gz)
endforeach()
add_custom_target(pt_manpages ALL DEPENDS ${PT_MAN_OUTPUTS})
