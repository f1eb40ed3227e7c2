################################################################################
#
# payterm
#
################################################################################

PAYTERM_VERSION = 0.2.0
# The tarball make dist made of tag v$(PAYTERM_VERSION), uploaded to the
# release: its bytes never change, so payterm.hash can check it (GitHub's
# own archive of a tag is generated on request, with no such promise).
PAYTERM_SITE = https://github.com/payterm/payterm/releases/download/v$(PAYTERM_VERSION)
PAYTERM_LICENSE = MIT
PAYTERM_LICENSE_FILES = LICENSE
PAYTERM_DEPENDENCIES = cjson host-pkgconf libcurl libmicrohttpd mbedtls sqlite zlib

# One TLS library on the board: libcurl must use mbed TLS, which payterm
# uses itself.  libcurl's SSL/TLS library is a Kconfig choice that
# Config.in can neither select nor depend on, and with OpenSSL, GnuTLS or
# wolfSSL also enabled libcurl picks one of those: stop the build instead
# (BR_BUILDING: menuconfig and savedefconfig still work, to fix it).
ifeq ($(BR2_PACKAGE_PAYTERM)$(BR_BUILDING),yy)
ifneq ($(BR2_PACKAGE_LIBCURL_MBEDTLS),y)
$(error payterm needs mbed TLS as libcurl's SSL/TLS library: set \
	BR2_PACKAGE_LIBCURL_MBEDTLS=y (menuconfig: Target packages, Libraries, \
	Networking, libcurl, SSL/TLS library to use))
endif
endif

# Out of the source tree, so that a PAYTERM_OVERRIDE_SRCDIR checkout with
# its own build directories is never mixed up with the board's build.
PAYTERM_SUPPORTS_IN_SOURCE_BUILD = NO

# A board build: no gateway simulator, no tests, no benchmarks.
PAYTERM_CONF_OPTS = \
	-DPT_WITH_SIM=OFF \
	-DPT_BUILD_TESTS=OFF \
	-DPT_BUILD_BENCH=OFF

# Only what a board needs, owners and modes from PAYTERM_PERMISSIONS
# (cmake's install rules would add man pages, sysusers.d and tmpfiles.d,
# which PAYTERM_USERS and PAYTERM_PERMISSIONS do here).  The default
# configuration has no gateway: the service stays stopped until one is
# configured.
define PAYTERM_INSTALL_TARGET_CMDS
	$(INSTALL) -D -m 0755 $(PAYTERM_BUILDDIR)/firmware/payterm \
		$(TARGET_DIR)/usr/bin/payterm
	$(INSTALL) -D -m 0640 $(@D)/firmware/board/payterm.json \
		$(TARGET_DIR)/etc/payterm/payterm.json
	$(INSTALL) -d -m 0750 $(TARGET_DIR)/etc/payterm/keys
endef

# Under BusyBox init the daemon logs to a file it keeps under log.max_bytes
# itself, or to syslog (LOG=syslog in /etc/default/payterm).
ifeq ($(BR2_PACKAGE_LOGROTATE),y)
define PAYTERM_INSTALL_LOGROTATE
	$(INSTALL) -D -m 0644 $(@D)/firmware/board/payterm.logrotate \
		$(TARGET_DIR)/etc/logrotate.d/payterm
endef
endif

define PAYTERM_INSTALL_INIT_SYSV
	$(INSTALL) -D -m 0755 $(@D)/firmware/board/S80payterm \
		$(TARGET_DIR)/etc/init.d/S80payterm
	$(PAYTERM_INSTALL_LOGROTATE)
endef

# BusyBox init restarts a daemon that died: the init script names its own
# respawn line ("# inittab: ::respawn:/etc/init.d/S80payterm run"), added
# to /etc/inittab once every package has installed its files (the inittab
# comes from busybox or skeleton-init-sysv).  A script without the line
# (releases before supervision) leaves inittab as it is.
ifeq ($(BR2_INIT_BUSYBOX),y)
define PAYTERM_INITTAB_RESPAWN
	line=$$(sed -n 's/^# inittab: //p' $(TARGET_DIR)/etc/init.d/S80payterm); \
	if [ -n "$$line" ] && ! grep -qF "$$line" $(TARGET_DIR)/etc/inittab; then \
		printf '\n# payterm: restarted when it dies (S80payterm run)\n%s\n' \
			"$$line" >>$(TARGET_DIR)/etc/inittab; \
	fi
endef
PAYTERM_TARGET_FINALIZE_HOOKS += PAYTERM_INITTAB_RESPAWN
endif

define PAYTERM_INSTALL_INIT_SYSTEMD
	$(INSTALL) -D -m 0644 $(@D)/firmware/board/payterm.service \
		$(TARGET_DIR)/usr/lib/systemd/system/payterm.service
endef

define PAYTERM_USERS
	payterm -1 payterm -1 * /var/lib/payterm - - payterm payment service
endef

define PAYTERM_PERMISSIONS
	/etc/payterm/payterm.json f 0640 root payterm - - - - -
	/etc/payterm/keys d 0750 root payterm - - - - -
	/var/lib/payterm d 0700 payterm payterm - - - - -
endef

$(eval $(cmake-package))
