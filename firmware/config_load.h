/*
 * config_load.h - reading and validating payterm's JSON configuration files.
 *
 * Every key is optional; defaults come from pt_config_defaults().  Unknown
 * keys and bad values are errors that name the key ("offline.limits.CNY.
 * max_total: must be between 1 and ...").  Several files may be given (-c
 * a.json -c b.json): objects are merged, later files win, so the simulator's
 * gateways.json fragment can be layered over a base file.  Relative file
 * paths inside a file are resolved against that file's directory.
 */
#ifndef PT_CONFIG_LOAD_H
#define PT_CONFIG_LOAD_H

#include <stddef.h>

#include "config.h"

/*
 * Loads and validates the files (merged in order) into cfg, starting from the
 * defaults.  npaths may be 0 (defaults only).  On error returns PT_ECONFIG
 * (or PT_EIO for an unreadable file) and writes a sentence naming the file and
 * the key into err.
 */
int pt_config_load(const char *const *paths, int npaths, struct pt_config *cfg, char *err,
                   size_t errlen);

/*
 * Checks that every configured secret file (private keys, secrets, API token)
 * exists and is not readable or writable by group or others.  On error returns
 * the first failure (PT_EPERM/PT_EIO) and writes, one line per bad file, which
 * file, its mode and the chmod to run.
 */
int pt_config_check_secrets(const struct pt_config *cfg, char *err, size_t errlen);

/* The same for the secret files whose configuration key starts with prefix
 * ("api_token_file", "gateways.stripe."; "" = all). */
int pt_config_check_secrets_of(const struct pt_config *cfg, const char *prefix, char *err,
                               size_t errlen);

#endif
