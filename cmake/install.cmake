# cmake/install.cmake - what `cmake --install` puts where (SPEC 14).
#
#   cmake --install BUILD [--prefix P] [--strip]     (DESTDIR=... for staging)
#
# Included from the top-level CMakeLists.txt after the targets exist.  The
# binary goes to GNUInstallDirs' bindir (firmware/CMakeLists.txt), the man
# pages (cmake/manpages.cmake) to mandir, compressed.  The board files:
#
#   PREFIX/share/payterm/S80payterm      BusyBox init script, as an example;
#                                        /etc/init.d/S80payterm as well with
#                                        -DPT_INSTALL_BUSYBOX_INIT=ON
#   PT_SYSTEMD_UNITDIR/payterm.service   the systemd unit
#   PREFIX/lib/sysusers.d/payterm.conf   the payterm user and group
#   PREFIX/lib/tmpfiles.d/payterm.conf   /var/lib/payterm 0700 payterm,
#                                        /etc/payterm/keys 0750 root:payterm
#   /etc/logrotate.d/payterm             /var/log/payterm.log (BusyBox setup)
#   /etc/payterm/payterm.json            the default configuration, 0640
#   /etc/payterm/keys/                   0750, empty (the .deb: its postinst)
#
# Choices, and why:
# * The configuration lives in /etc/payterm whatever the prefix: it is the
#   path the program reads without -c (firmware/cli.c) and the one the unit
#   and the init script name.  PT_CONFDIR moves it (then pass -c everywhere).
#   logrotate.d and init.d sit beside it (/etc), where those tools look.
# * The systemd unit: with prefix /usr (the .deb) /lib/systemd/system, where
#   Debian 12 packages put units; with any other prefix PREFIX/lib/systemd/
#   system - /usr/local/lib/systemd/system is on systemd's search path for
#   units the local administrator installs.  PT_SYSTEMD_UNITDIR overrides.
#   sysusers.d and tmpfiles.d follow the same rule under PREFIX/lib, which
#   systemd searches for /usr and /usr/local alike.
# * The unit and the init script name the binary as /usr/bin/payterm; the
#   installed copies name the binary where this prefix puts it.
# * cmake cannot set an owner by name: the configuration and keys/ are
#   installed root-owned (0640, 0750) and their group becomes payterm by the
#   package's postinst, or by `systemd-sysusers payterm.conf` +
#   `systemd-tmpfiles --create payterm.conf` after a plain install (README).
# * The BusyBox script is not put into /etc/init.d by default: on a systemd
#   machine (a Debian desktop) systemd would turn it into a second
#   "S80payterm" service beside payterm.service.  Buildroot installs it
#   from its own package file (firmware/board/buildroot/package/payterm/payterm.mk).

include(GNUInstallDirs)

set(PT_CONFDIR /etc/payterm CACHE PATH
    "where payterm.json and keys/ are installed (the program's default config is /etc/payterm/payterm.json)")
set(PT_SYSTEMD_UNITDIR "" CACHE PATH
    "systemd unit directory (empty: /lib/systemd/system for prefix /usr, else PREFIX/lib/systemd/system)")
option(PT_INSTALL_BUSYBOX_INIT "Also install the BusyBox init script as /etc/init.d/S80payterm" OFF)
option(PT_DEB_LAYOUT "Install as the .deb needs (copyright, changelog.gz, lintian overrides instead of LICENSE and CHANGELOG.md; keys/ left to the postinst)" OFF)

if(PT_SYSTEMD_UNITDIR)
  set(pt_unitdir ${PT_SYSTEMD_UNITDIR})
elseif(CMAKE_INSTALL_PREFIX STREQUAL "/usr")
  set(pt_unitdir /lib/systemd/system)
else()
  set(pt_unitdir ${CMAKE_INSTALL_PREFIX}/lib/systemd/system)
endif()
get_filename_component(pt_etc ${PT_CONFDIR} DIRECTORY)

# A board file with /usr/bin/payterm replaced by the installed binary's path;
# written (at configure time) only when its content changes, and configure
# runs again when the source changes.
set(PT_INSTALL_GEN ${PROJECT_BINARY_DIR}/install)
function(pt_board_file src out)
  file(READ ${PROJECT_SOURCE_DIR}/${src} text)
  # The unit says /usr/bin/payterm, the init script "/usr/bin/$DAEMON".
  string(REPLACE "/usr/bin/payterm" "${CMAKE_INSTALL_FULL_BINDIR}/payterm" text "${text}")
  string(REPLACE "\"/usr/bin/\$DAEMON\"" "\"${CMAKE_INSTALL_FULL_BINDIR}/\$DAEMON\"" text "${text}")
  set(old "")
  if(EXISTS ${PT_INSTALL_GEN}/${out})
    file(READ ${PT_INSTALL_GEN}/${out} old)
  endif()
  if(NOT old STREQUAL text)
    file(WRITE ${PT_INSTALL_GEN}/${out} "${text}")
  endif()
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/${src})
endfunction()
pt_board_file(firmware/board/payterm.service payterm.service)
pt_board_file(firmware/board/S80payterm S80payterm)

set(pt_rw_r OWNER_READ OWNER_WRITE GROUP_READ)
set(pt_rw_r_r OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
set(pt_rwx_rx_rx OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE WORLD_READ
                 WORLD_EXECUTE)

# The .deb strips its binary as dh_strip does (CPACK_STRIP_FILES alone would
# leave the compiler's .comment and .note sections in).  Runs after the
# binary's own install rule (policy CMP0082: subdirectories in order).
if(PT_DEB_LAYOUT AND CMAKE_STRIP)
  install(CODE "
    set(pt_bin \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_BINDIR}/payterm\")
    execute_process(COMMAND \"${CMAKE_STRIP}\" --remove-section=.comment --remove-section=.note
                            --strip-unneeded \"\${pt_bin}\" RESULT_VARIABLE pt_rc)
    if(NOT pt_rc EQUAL 0)
      message(FATAL_ERROR \"strip \${pt_bin} failed\")
    endif()")
endif()

# Man pages (generated by cmake/manpages.cmake).
install(FILES ${PT_MAN_DIR}/payterm.8.gz DESTINATION ${CMAKE_INSTALL_MANDIR}/man8)
install(FILES ${PT_MAN_DIR}/payterm.json.5.gz DESTINATION ${CMAKE_INSTALL_MANDIR}/man5)

# systemd: the unit, the user, the directories.
install(FILES ${PT_INSTALL_GEN}/payterm.service DESTINATION ${pt_unitdir}
        PERMISSIONS ${pt_rw_r_r})
install(FILES firmware/board/payterm.sysusers DESTINATION lib/sysusers.d RENAME payterm.conf
        PERMISSIONS ${pt_rw_r_r})
install(FILES firmware/board/payterm.tmpfiles DESTINATION lib/tmpfiles.d RENAME payterm.conf
        PERMISSIONS ${pt_rw_r_r})

# The BusyBox setup: its init script and the rotation of its log file.
install(PROGRAMS ${PT_INSTALL_GEN}/S80payterm DESTINATION ${CMAKE_INSTALL_DATADIR}/payterm
        PERMISSIONS ${pt_rwx_rx_rx})
if(PT_INSTALL_BUSYBOX_INIT)
  install(PROGRAMS ${PT_INSTALL_GEN}/S80payterm DESTINATION ${pt_etc}/init.d
          PERMISSIONS ${pt_rwx_rx_rx})
endif()
install(FILES firmware/board/payterm.logrotate DESTINATION ${pt_etc}/logrotate.d
        RENAME payterm PERMISSIONS ${pt_rw_r_r})

# The default configuration, readable by the service's group once it is
# payterm (postinst, or by hand), and the directory for keys and secrets.
# The .deb leaves keys/ to its postinst (tmpfiles.d): a directory dpkg owns
# would get root:root back from dpkg, and keys/ is the administrator's.
install(FILES firmware/board/payterm.json DESTINATION ${PT_CONFDIR} PERMISSIONS ${pt_rw_r})
if(NOT PT_DEB_LAYOUT)
  install(DIRECTORY DESTINATION ${PT_CONFDIR}/keys
          DIRECTORY_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE)
endif()

# Documentation.  A Debian package carries its licence as copyright and its
# changelog in Debian's format (packaging/deb/changelog.awk, from CHANGELOG.md).
if(PT_DEB_LAYOUT)
  install(FILES ${PROJECT_BINARY_DIR}/deb/copyright ${PROJECT_BINARY_DIR}/deb/changelog.gz
          DESTINATION ${CMAKE_INSTALL_DOCDIR} PERMISSIONS ${pt_rw_r_r})
  install(FILES packaging/deb/lintian-overrides DESTINATION ${CMAKE_INSTALL_DATADIR}/lintian/overrides
          RENAME payterm PERMISSIONS ${pt_rw_r_r})
else()
  install(FILES LICENSE CHANGELOG.md DESTINATION ${CMAKE_INSTALL_DOCDIR}
          PERMISSIONS ${pt_rw_r_r})
endif()
