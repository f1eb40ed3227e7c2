# cmake/package.cmake - the .deb (SPEC 14), made by CPack from the install
# rules of cmake/install.cmake.
#
#   make deb        configure preset "deb" (the release build, prefix /usr,
#                   PT_DEB_LAYOUT=ON) in build/deb, build, cpack, then
#                   build/payterm_VERSION_ARCH.deb, checked with lintian
#
# By hand: cmake --preset deb && cmake --build --preset deb &&
#          (cd build/deb && cpack -G DEB)
#
# The package: Depends from dpkg-shlibdeps on the stripped binary, plus what
# the maintainer scripts use; the configuration and the logrotate file are
# conffiles; packaging/deb/{postinst,prerm,postrm} create the payterm user
# and its directories and enable the unit without starting it.  It is a
# native package (version = VERSION, no Debian revision): the Debian
# changelog is /usr/share/doc/payterm/changelog.gz, made from CHANGELOG.md.

set(PT_DEB_MAINTAINER "The payterm authors <payterm@example.org>" CACHE STRING
    "Maintainer field of the .deb and its changelog trailer")

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME payterm)
set(CPACK_PACKAGE_VENDOR "The payterm authors")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "exactly-once payments for Linux POS and kiosk boards")
set(CPACK_PACKAGE_DESCRIPTION
    "payterm takes payments for a point-of-sale lane or a kiosk and charges each
order exactly once, also when the network, the gateway or the power fails:
idempotent charges and refunds over a local HTTP API, a durable offline queue
in SQLite, and a sync engine that talks to Alipay, WeChat Pay, Stripe and 2C2P
over TLS.
.
The service is installed enabled but is not started: it starts once a gateway
is configured in /etc/payterm/payterm.json (see payterm.json(5)).")
set(CPACK_RESOURCE_FILE_LICENSE ${PROJECT_SOURCE_DIR}/LICENSE)
set(CPACK_PACKAGING_INSTALL_PREFIX ${CMAKE_INSTALL_PREFIX})
set(CPACK_STRIP_FILES TRUE)

set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT) # payterm_0.2.0_amd64.deb
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${PT_DEB_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# postinst: adduser where systemd-sysusers is missing (lintian wants the
# plain dependency for any call); the default configuration's tls.ca_file is
# ca-certificates' bundle.
set(CPACK_DEBIAN_PACKAGE_DEPENDS "adduser, ca-certificates")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "logrotate")

# Control files: the maintainer scripts as they are, the conffiles list for
# where this configuration installs them.
set(pt_deb_control ${PROJECT_BINARY_DIR}/deb/control)
get_filename_component(pt_deb_etc ${PT_CONFDIR} DIRECTORY)
file(MAKE_DIRECTORY ${pt_deb_control})
file(WRITE ${pt_deb_control}/conffiles.new
     "${pt_deb_etc}/logrotate.d/payterm\n${PT_CONFDIR}/payterm.json\n")
file(COPY_FILE ${pt_deb_control}/conffiles.new ${pt_deb_control}/conffiles ONLY_IF_DIFFERENT)
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${pt_deb_control}/conffiles ${PROJECT_SOURCE_DIR}/packaging/deb/postinst
    ${PROJECT_SOURCE_DIR}/packaging/deb/prerm ${PROJECT_SOURCE_DIR}/packaging/deb/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION TRUE)

# /usr/share/doc/payterm/{copyright,changelog.gz} (PT_DEB_LAYOUT, see
# cmake/install.cmake): the licence in Debian's machine-readable format and
# the Debian changelog, rebuilt when LICENSE or CHANGELOG.md change.
if(PT_DEB_LAYOUT)
  if(NOT CMAKE_INSTALL_PREFIX STREQUAL "/usr")
    message(WARNING "PT_DEB_LAYOUT=ON with CMAKE_INSTALL_PREFIX=${CMAKE_INSTALL_PREFIX}: "
                    "a Debian package installs under /usr")
  endif()
  set(out ${PROJECT_BINARY_DIR}/deb)
  add_custom_command(
    OUTPUT ${out}/copyright ${out}/changelog.gz
    COMMAND ${CMAKE_COMMAND} -DAWK=${PT_AWK} -DGZIP=${PT_GZIP} -DSRC=${PROJECT_SOURCE_DIR}
            -DOUT=${out} -DMAINTAINER=${PT_DEB_MAINTAINER}
            -P ${PROJECT_SOURCE_DIR}/cmake/deb_docs.cmake
    DEPENDS ${PROJECT_SOURCE_DIR}/LICENSE ${PROJECT_SOURCE_DIR}/CHANGELOG.md
            ${PROJECT_SOURCE_DIR}/packaging/deb/changelog.awk
            ${PROJECT_SOURCE_DIR}/cmake/deb_docs.cmake
    COMMENT "Generating the Debian copyright and changelog"
    VERBATIM)
  add_custom_target(pt_deb_docs ALL DEPENDS ${out}/copyright ${out}/changelog.gz)
endif()

include(CPack)
