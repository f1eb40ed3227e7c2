/*
 * charge.c - state names and the table of legal transitions (SPEC section 4).
 *
 * The store turns pt_state_allowed_from() into the `state = ... OR ...` of its
 * conditional UPDATE, so this table is the single place the state machine is
 * written down.
 */
#include "charge.h"
#include "err.h"

#include <string.h>

static const char *const state_names[PT_STATE__COUNT] = {
    "INIT", "PROCESSING", "PENDING", "UNKNOWN", "SUCCESS", "FAILED", "CANCELED",
};

#define B(s) (1u << PT_STATE_##s)

/* legal[from] = mask of the states reachable from `from`. */
static const unsigned legal[PT_STATE__COUNT] = {
    [PT_STATE_INIT] = B(PROCESSING) | B(CANCELED) | B(FAILED),
    [PT_STATE_PROCESSING] = B(SUCCESS) | B(FAILED) | B(PENDING) | B(UNKNOWN) | B(INIT),
    [PT_STATE_PENDING] = B(SUCCESS) | B(FAILED) | B(CANCELED) | B(UNKNOWN),
    [PT_STATE_UNKNOWN] = B(SUCCESS) | B(FAILED) | B(CANCELED) | B(PENDING) | B(PROCESSING),
    [PT_STATE_SUCCESS] = 0,
    [PT_STATE_FAILED] = 0,
    [PT_STATE_CANCELED] = 0,
};

const char *pt_state_name(enum pt_state s)
{
    return (unsigned)s < PT_STATE__COUNT ? state_names[s] : NULL;
}

int pt_state_parse(const char *name, enum pt_state *out)
{
    for (int i = 0; i < PT_STATE__COUNT; i++) {
        if (strcmp(name, state_names[i]) == 0) {
            *out = (enum pt_state)i;
            return PT_OK;
        }
    }
    return PT_EINVAL;
}

int pt_state_is_final(enum pt_state s)
{
    return s == PT_STATE_SUCCESS || s == PT_STATE_FAILED || s == PT_STATE_CANCELED;
}

int pt_state_transition_legal(enum pt_state from, enum pt_state to)
{
    if ((unsigned)from >= PT_STATE__COUNT || (unsigned)to >= PT_STATE__COUNT)
        return 0;
    return (legal[from] >> to) & 1u;
}

unsigned pt_state_allowed_from(enum pt_state to)
{
    unsigned mask = 0;
    for (int from = 0; from < PT_STATE__COUNT; from++)
        if (pt_state_transition_legal((enum pt_state)from, to))
            mask |= 1u << from;
    return mask;
}

static const char *const offline_names[] = {"prefer_online", "require_online", "force_offline"};

const char *pt_offline_mode_name(enum pt_offline_mode m)
{
    return (unsigned)m < 3 ? offline_names[m] : NULL;
}

int pt_offline_mode_parse(const char *name, enum pt_offline_mode *out)
{
    for (int i = 0; i < 3; i++) {
        if (strcmp(name, offline_names[i]) == 0) {
            *out = (enum pt_offline_mode)i;
            return PT_OK;
        }
    }
    return PT_EINVAL;
}
