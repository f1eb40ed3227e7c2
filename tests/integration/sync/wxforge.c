/*
 * wxforge.c - builds WeChat Pay APIv3 notifications for the sync integration
 * tests, signed and encrypted with the simulator's keys.
 *
 * The other gateways' notifications are built in the shell with `payterm
 * sign` (Alipay RSA2, Stripe HMAC, 2C2P JWT).  A WeChat notification also
 * carries its payload encrypted with AES-256-GCM under the APIv3 key, which
 * no CLI tool of the Debian base set does, hence this helper.  It lets a test
 * send a notification the daemon must verify and then judge on its content
 * (an amount that differs from the charge, a replay of a captured one).
 *
 *   wxforge body SIMDIR EVENT_ID [EVENT_TYPE] < resource.json
 *       prints the notification body: EVENT_TYPE (default TRANSACTION.SUCCESS)
 *       with `resource` encrypted under SIMDIR/wechat_apiv3_key (as the
 *       simulator does).  A REFUND.* event type (REFUND.SUCCESS,
 *       REFUND.ABNORMAL, REFUND.CLOSED) makes a refund notification: the
 *       resource's original_type and associated_data are "refund", as
 *       WeChat sends them, and the input is a refund resource (mchid,
 *       out_trade_no, out_refund_no, refund_id, refund_status, amount...).
 *   wxforge headers SIMDIR SERIAL [KEY.pem] < body
 *       prints the four Wechatpay-* header lines for body, signed with the
 *       platform key SIMDIR/wechat_platform_key.pem (or the private key
 *       KEY.pem: a key nobody trusts, for a forger) over ts\nnonce\nbody\n
 */
#include "crypto.h"
#include "err.h"
#include "gateways/wechat.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define INPUT_MAX (64 * 1024)

static char *read_stdin(size_t *len)
{
    char *buf = malloc(INPUT_MAX + 1);
    if (!buf)
        return NULL;
    *len = fread(buf, 1, INPUT_MAX, stdin);
    buf[*len] = '\0';
    return buf;
}

static int read_file(const char *dir, const char *name, char *out, size_t cap, size_t *len)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "wxforge: cannot read %s\n", path);
        return -1;
    }
    *len = fread(out, 1, cap, f);
    fclose(f);
    return 0;
}

/* A fresh alphanumeric string of n characters (nonces). */
static void alnum(char *out, size_t n)
{
    static const char set[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    unsigned char r[64] = {0};
    if (n > sizeof r)
        n = sizeof r;
    FILE *f = fopen("/dev/urandom", "rb");
    if (f) {
        if (fread(r, 1, n, f) != n)
            fprintf(stderr, "wxforge: short read from /dev/urandom\n");
        fclose(f);
    }
    for (size_t i = 0; i < n; i++)
        out[i] = set[r[i] % (sizeof set - 1)];
    out[n] = '\0';
}

static int cmd_body(const char *dir, const char *event_id, const char *event_type)
{
    /* WeChat labels a refund resource "refund" (original_type and the
     * associated data the GCM tag covers), a payment's "transaction". */
    int refund = strncmp(event_type, "REFUND.", 7) == 0;
    const char *kind = refund ? "refund" : "transaction";
    unsigned char key[64];
    size_t klen = 0, plen = 0;
    int rc = 1;
    char *plain = read_stdin(&plen), *ct = NULL, *text = NULL, nonce[13];
    if (!plain || read_file(dir, "wechat_apiv3_key", (char *)key, sizeof key, &klen))
        goto out;
    while (plen && (plain[plen - 1] == '\n' || plain[plen - 1] == '\r'))
        plain[--plen] = '\0';
    alnum(nonce, 12);
    if (pt_wechat_encrypt(key, klen, nonce, kind, plain, plen, &ct) != PT_OK) {
        fprintf(stderr, "wxforge: cannot encrypt (is the APIv3 key 32 bytes?)\n");
        goto out;
    }
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "id", event_id);
    cJSON_AddStringToObject(e, "create_time", "2026-11-30T13:00:00+08:00");
    cJSON_AddStringToObject(e, "resource_type", "encrypt-resource");
    cJSON_AddStringToObject(e, "event_type", event_type);
    cJSON_AddStringToObject(e, "summary", refund ? "退款通知" : "支付成功");
    cJSON *r = cJSON_AddObjectToObject(e, "resource");
    cJSON_AddStringToObject(r, "original_type", kind);
    cJSON_AddStringToObject(r, "algorithm", "AEAD_AES_256_GCM");
    cJSON_AddStringToObject(r, "ciphertext", ct);
    cJSON_AddStringToObject(r, "associated_data", kind);
    cJSON_AddStringToObject(r, "nonce", nonce);
    text = cJSON_PrintUnformatted(e);
    cJSON_Delete(e);
    if (text) {
        fputs(text, stdout);
        rc = 0;
    }
out:
    pt_zeroize(key, sizeof key);
    free(plain);
    free(ct);
    free(text);
    return rc;
}

static int cmd_headers(const char *dir, const char *serial, const char *keyfile)
{
    char path[1024], err[PT_PK_ERR_MAX], ts[24], nonce[33], sig[1024];
    size_t blen = 0, mlen = 0;
    struct pt_pk *key = NULL;
    int rc = 1;
    char *body = read_stdin(&blen), *msg = NULL;
    if (keyfile)
        snprintf(path, sizeof path, "%s", keyfile);
    else
        snprintf(path, sizeof path, "%s/wechat_platform_key.pem", dir);
    if (!body || pt_pk_load_file(path, NULL, NULL, &key, err, sizeof err) != PT_OK) {
        fprintf(stderr, "wxforge: %s\n", body ? err : "out of memory");
        goto out;
    }
    snprintf(ts, sizeof ts, "%lld", (long long)time(NULL));
    alnum(nonce, 32);
    msg = pt_wechat_response_message(ts, nonce, body, blen, &mlen);
    if (!msg || pt_pk_sign_base64(key, msg, mlen, sig, sizeof sig) != PT_OK) {
        fprintf(stderr, "wxforge: cannot sign\n");
        goto out;
    }
    printf("Wechatpay-Timestamp: %s\nWechatpay-Nonce: %s\nWechatpay-Signature: %s\n"
           "Wechatpay-Serial: %s\n",
           ts, nonce, sig, serial);
    rc = 0;
out:
    pt_pk_free(key);
    free(body);
    free(msg);
    return rc;
}

int main(int argc, char **argv)
{
    if ((argc == 4 || argc == 5) && strcmp(argv[1], "body") == 0)
        return cmd_body(argv[2], argv[3], argc == 5 ? argv[4] : "TRANSACTION.SUCCESS");
    if ((argc == 4 || argc == 5) && strcmp(argv[1], "headers") == 0)
        return cmd_headers(argv[2], argv[3], argc == 5 ? argv[4] : NULL);
    fprintf(stderr, "usage: wxforge body SIMDIR EVENT_ID [EVENT_TYPE] < resource.json\n"
                    "       wxforge headers SIMDIR SERIAL [KEY.pem] < body\n");
    return 2;
}
