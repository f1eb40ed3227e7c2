################################################################################
#
# payterm
#
################################################################################

PAYTERM_VERSION = 0.1.0
PAYTERM_SITE = $(TOPDIR)/../payterm
PAYTERM_SITE_METHOD = local
PAYTERM_LICENSE = Proprietary
PAYTERM_DEPENDENCIES = sqlite mbedtls libcurl cjson libmicrohttpd host-pkgconf
# Board build: no simulator, no tests, optimised for size.
PAYTERM_CONF_OPTS = -DPT_WITH_SIM=OFF -DPT_BUILD_TESTS=OFF -DPT_BUILD_BENCH=OFF \
	-DCMAKE_BUILD_TYPE=MinSizeRel

define PAYTERM_INSTALL_INIT_SYSV
	$(INSTALL) -D -m 0755 $(@D)/firmware/board/S80payterm \
		$(TARGET_DIR)/etc/init.d/S80payterm
endef

define PAYTERM_INSTALL_INIT_SYSTEMD
	$(INSTALL) -D -m 0644 $(@D)/firmware/board/payterm.service \
		$(TARGET_DIR)/usr/lib/systemd/system/payterm.service
endef

define PAYTERM_INSTALL_TARGET_CMDS
	$(INSTALL) -D -m 0755 $(@D)/firmware/payterm $(TARGET_DIR)/usr/bin/payterm
	$(INSTALL) -D -m 0600 $(@D)/firmware/board/payterm.json \
		$(TARGET_DIR)/etc/payterm/payterm.json
endef

define PAYTERM_USERS
	payterm -1 payterm -1 * /var/lib/payterm - - payterm service
endef

$(eval $(cmake-package))
