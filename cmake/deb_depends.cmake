# cmake/deb_depends.cmake - the .deb's Depends, made when cpack runs (read
# through CPACK_PROJECT_CONFIG_FILE, see cmake/package.cmake).
#
# In: PT_DEB_BINARY (the payterm binary as built), PT_DEB_DEPENDS (what the
# maintainer scripts and the default configuration need), and
# PT_SQLITE_MIN_VERSION.  Out: CPACK_DEBIAN_PACKAGE_DEPENDS.
#
# dpkg-shlibdeps gives each library the oldest version that has every symbol
# payterm links; libsqlite3-0's is raised to PT_SQLITE_MIN_VERSION, below
# which payterm refuses to open a database (its migrations need it).

if(NOT CPACK_GENERATOR STREQUAL "DEB")
  return()
endif()
find_program(PT_DPKG_SHLIBDEPS dpkg-shlibdeps)
if(NOT PT_DPKG_SHLIBDEPS)
  message(FATAL_ERROR "the .deb's dependencies need dpkg-shlibdeps (apt-get install dpkg-dev)")
endif()
# dpkg-shlibdeps wants a debian/control in its working directory; one of
# its own, so that two cpack runs never share it.
string(RANDOM LENGTH 8 pt_tag)
get_filename_component(pt_bin_dir "${PT_DEB_BINARY}" DIRECTORY)
set(pt_work "${pt_bin_dir}/shlibdeps-${pt_tag}")
file(MAKE_DIRECTORY "${pt_work}/debian")
file(WRITE "${pt_work}/debian/control" "")
execute_process(COMMAND "${PT_DPKG_SHLIBDEPS}" -O "${PT_DEB_BINARY}"
                WORKING_DIRECTORY "${pt_work}"
                OUTPUT_VARIABLE pt_out ERROR_VARIABLE pt_err RESULT_VARIABLE pt_rc
                OUTPUT_STRIP_TRAILING_WHITESPACE)
file(REMOVE_RECURSE "${pt_work}")
if(NOT pt_rc EQUAL 0)
  message(FATAL_ERROR "dpkg-shlibdeps ${PT_DEB_BINARY}: ${pt_err}")
endif()
# "shlibs:Depends=libc6 (>= 2.34), ..., libsqlite3-0 (>= 3.20.0)"
string(REGEX REPLACE "^.*Depends=" "" pt_deps "${pt_out}")
set(pt_sqlite "libsqlite3-0 (>= ${PT_SQLITE_MIN_VERSION})")
if(pt_deps MATCHES "libsqlite3-0 \\(>= ([^)]*)\\)")
  if(CMAKE_MATCH_1 VERSION_LESS PT_SQLITE_MIN_VERSION)
    string(REPLACE "${CMAKE_MATCH_0}" "${pt_sqlite}" pt_deps "${pt_deps}")
  endif()
elseif(pt_deps MATCHES "(^|, )libsqlite3-0(,|$)")
  string(REGEX REPLACE "(^|, )libsqlite3-0(,|$)" "\\1${pt_sqlite}\\2" pt_deps "${pt_deps}")
else()
  message(FATAL_ERROR "dpkg-shlibdeps found no libsqlite3-0 for ${PT_DEB_BINARY}: ${pt_out}")
endif()
set(CPACK_DEBIAN_PACKAGE_DEPENDS "${PT_DEB_DEPENDS}, ${pt_deps}")
