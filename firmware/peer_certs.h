/*
 * peer_certs.h - the gateways' downloaded peer certificates in data_dir
 * (SPEC 8 and 11: WeChat Pay platform certificates survive a restart).
 *
 * The sync engine downloads them (core/sync.c, pt_sync_refresh_keys) and
 * hands each new one to the daemon, which keeps it here as
 * <data_dir>/<gateway>-platform-<SERIAL>.pem, mode 0600, written atomically.
 * At start the daemon loads them back into the gateway's trust store.
 */
#ifndef PT_PEER_CERTS_H
#define PT_PEER_CERTS_H

#include <stddef.h>

#include "crypto.h"
#include "gateway.h"

/*
 * Writes pem (len bytes) as <data_dir>/<gateway>-platform-<serial>.pem:
 * a temporary file created 0600 (whatever the umask), fsync, rename, fsync
 * of the directory.  pem NULL removes the file instead.  serial must be hex
 * digits (it names a file).  PT_OK, PT_EINVAL, PT_EIO (logged with errno).
 */
int pt_peer_certs_keep(const char *data_dir, const char *gateway, const char *serial,
                       const char *pem, size_t len);

/*
 * Loads every <gateway>-platform-<serial>.pem of data_dir into kr (not
 * pinned, expiry unknown until the next download lists it).  A damaged
 * file - not a certificate, another serial than its name, unreadable - is
 * skipped with a warning, never fatal.  Returns the number loaded.
 */
int pt_peer_certs_load(const char *data_dir, const char *gateway, struct pt_gw_keyring *kr,
                       pt_random_fn rnd, void *rnd_ctx);

#endif
