# cmake/install_board.cmake - run by `cmake --install` and CPack, not by
# configure (cmake/install.cmake includes it with install(SCRIPT)): the board
# files that name paths, written with the paths of this install.
#
# The prefix is known only now: `cmake --install BUILD --prefix /usr` (or
# CPack's) replaces the one the build was configured with, and a unit
# written at configure time started /usr/local/bin/payterm from
# /usr/local/lib/systemd/system after an install into /usr.
#
# In (set by install.cmake before the include; CMAKE_INSTALL_PREFIX is this
# install's):
#   PT_SRC        the source tree
#   PT_GEN        a build directory to write the files into
#   PT_BINDIR     CMAKE_INSTALL_BINDIR (relative to the prefix, or absolute)
#   PT_DATADIR    CMAKE_INSTALL_DATADIR, likewise
#   PT_CONFDIR    where payterm.json is installed (absolute)
#   PT_UNITDIR    PT_SYSTEMD_UNITDIR; "" picks by prefix (install.cmake)
#   PT_INIT_D     also install S80payterm there (absolute); "" not
#
# The sources name the binary as /usr/bin/payterm (the unit) and
# "/usr/bin/$DAEMON" (the init script), and the configuration as
# /etc/payterm: what Buildroot installs them as, unchanged.

foreach(v PT_BINDIR PT_DATADIR)
  if(IS_ABSOLUTE "${${v}}")
    set(pt_${v} "${${v}}")
  else()
    set(pt_${v} "${CMAKE_INSTALL_PREFIX}/${${v}}")
  endif()
endforeach()
if(PT_UNITDIR)
  set(pt_unitdir "${PT_UNITDIR}")
elseif(CMAKE_INSTALL_PREFIX STREQUAL "/usr")
  set(pt_unitdir /lib/systemd/system) # where Debian 12 packages put units
else()
  set(pt_unitdir "${CMAKE_INSTALL_PREFIX}/lib/systemd/system")
endif()

# pt_board_file SRC OUT - SRC (from the source tree) with this install's
# paths, as PT_GEN/OUT.
function(pt_board_file src out)
  file(READ "${PT_SRC}/${src}" text)
  string(REPLACE "/usr/bin/payterm" "${pt_PT_BINDIR}/payterm" text "${text}")
  string(REPLACE "\"/usr/bin/\$DAEMON\"" "\"${pt_PT_BINDIR}/\$DAEMON\"" text "${text}")
  string(REPLACE "/etc/payterm" "${PT_CONFDIR}" text "${text}")
  file(WRITE "${PT_GEN}/${out}" "${text}")
endfunction()
pt_board_file(firmware/board/payterm.service payterm.service)
pt_board_file(firmware/board/S80payterm S80payterm)
pt_board_file(firmware/board/payterm.tmpfiles payterm.tmpfiles)

# file(INSTALL) is what install(FILES) runs: it honours DESTDIR and lists
# the files in install_manifest.txt.
set(pt_rw_r_r OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
set(pt_rwx_rx_rx OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE WORLD_READ
                 WORLD_EXECUTE)
file(INSTALL DESTINATION "${pt_unitdir}" TYPE FILE PERMISSIONS ${pt_rw_r_r}
     FILES "${PT_GEN}/payterm.service")
file(INSTALL DESTINATION "${CMAKE_INSTALL_PREFIX}/lib/tmpfiles.d" TYPE FILE
     PERMISSIONS ${pt_rw_r_r} FILES "${PT_GEN}/payterm.tmpfiles" RENAME payterm.conf)
file(INSTALL DESTINATION "${pt_PT_DATADIR}/payterm" TYPE FILE PERMISSIONS ${pt_rwx_rx_rx}
     FILES "${PT_GEN}/S80payterm")
if(PT_INIT_D)
  file(INSTALL DESTINATION "${PT_INIT_D}" TYPE FILE PERMISSIONS ${pt_rwx_rx_rx}
       FILES "${PT_GEN}/S80payterm")
endif()
