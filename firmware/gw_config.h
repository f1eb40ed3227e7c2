/*
 * gw_config.h - turns the program's configuration (config.h, SPEC 10) into
 * the struct pt_gw_config a gateway adapter needs: loads the PEM keys and
 * reads the secret files.  Lives in firmware/ because core/ must not know
 * the configuration file's shape.
 */
#ifndef PT_GW_CONFIG_H
#define PT_GW_CONFIG_H

#include <stddef.h>

#include "config.h"
#include "crypto.h"
#include "gateway.h"

/*
 * Fills *out for the named gateway from cfg (its keys by its table's load()).
 * rnd/rnd_ctx seed the RSA keys' blinding DRBG (NULL: mbedTLS entropy).
 * Secret files are read whole with trailing line breaks dropped; the WeChat
 * APIv3 key must be exactly 32 bytes.  On failure returns PT_ECONFIG,
 * PT_EIO or PT_EPARSE, leaves *out empty and writes into err a sentence that
 * names the config key and the file.  Free with pt_gw_config_free().
 */
int pt_gw_config_load(const struct pt_config *cfg, const char *gateway, pt_random_fn rnd,
                      void *rnd_ctx, struct pt_gw_config *out, char *err, size_t errlen);

#endif
