# board.sh - what the tests of the board files share (test_busybox_init.sh,
# test_systemd_unit.sh): a gateway simulator, and a configuration laid out
# the way a board has it, for a daemon that runs as another user.
#
#   board_sim_start NOTIFY_URL    `payterm sim` in $PT_TMP/sim on a free port;
#                                 sets SIM, SIM_PORT, SIM_PID
#   board_sim PATH [DATA]         a request to the simulator's control plane
#   board_sim_stop                SIGTERM, and wait
#   board_config USER LISTEN      $PT_TMP/etc/payterm.json (root:<group> 0640,
#                                 Stripe on the simulator), keys in
#                                 $PT_TMP/etc/keys (0750 root:<group>, secrets
#                                 USER's 0600),
#                                 data_dir $PT_TMP/data (USER's, 0700);
#                                 sets CONFIG, DATA
#   board_binary USER             a copy of $PAYTERM that USER can run, in
#                                 $PT_TMP/bin; sets BIN
#
# Source it after lib.sh, call it after pt_init.

board_sim_start()
{
    SIM=$PT_TMP/sim
    "$PAYTERM" sim --dir "$SIM" --listen 127.0.0.1:0 --notify-base "$1" --quiet \
        >"$PT_TMP/sim.log" 2>&1 &
    SIM_PID=$!
    echo "$SIM_PID" >>"$PT_TMP/pids"
    # The first start makes the keys: seconds, more under ASan.
    local deadline=$(($(date +%s) + 60))
    until grep -q 'ready on port' "$PT_TMP/sim.log"; do
        if [ "$(date +%s)" -ge "$deadline" ] || ! kill -0 "$SIM_PID" 2>/dev/null; then
            pt_log "$PT_SCRIPT: the simulator did not start: $(cat "$PT_TMP/sim.log")"
            exit 1
        fi
        sleep 0.05
    done
    SIM_PORT=$(sed -n 's/.*ready on port \([0-9]*\).*/\1/p' "$PT_TMP/sim.log")
}

board_sim()
{
    curl -s --max-time 10 --cacert "$SIM/ca.pem" ${2:+-d "$2"} "https://localhost:$SIM_PORT$1"
}

board_sim_stop()
{
    kill -TERM "$SIM_PID" 2>/dev/null && wait "$SIM_PID"
}

board_config()
{
    local user=$1 listen=$2 group etc=$PT_TMP/etc keys=$PT_TMP/etc/keys
    group=$(id -gn "$user") || exit 2
    # The daemon's user must reach its files through the temp dir.
    chmod 0755 "$PT_TMP"
    DATA=$PT_TMP/data
    mkdir -p "$etc" "$keys" "$DATA"
    cp "$SIM/ca.pem" "$SIM/stripe_secret_key" "$SIM/stripe_webhook_secret" "$keys/"
    chmod 0600 "$keys/stripe_secret_key" "$keys/stripe_webhook_secret"
    chmod 0644 "$keys/ca.pem"
    chmod 0750 "$keys"
    chmod 0700 "$DATA"
    if [ "$(id -u)" = 0 ]; then
        # SPEC 14's layout: secrets root:<the service's group> 0640, read
        # through the group, not changeable by the service.
        chown "root:$group" "$keys/stripe_secret_key" "$keys/stripe_webhook_secret" "$keys"
        chmod 0640 "$keys/stripe_secret_key" "$keys/stripe_webhook_secret"
        chown "$user:$group" "$DATA"
    fi
    CONFIG=$etc/payterm.json
    jq -n --arg d "$DATA" --arg l "$listen" --arg k "$keys" \
        --slurpfile g "$SIM/gateways.json" '{
            data_dir: $d, listen: $l, log_level: "info",
            offline: {limits: {USD: {max_amount: 10000, max_total: 100000}}, max_count: 500},
            sync: {interval_s: 1},
            tls: {ca_file: ($k + "/ca.pem")},
            gateways: {stripe: ($g[0].gateways.stripe +
                {secret_key_file: ($k + "/stripe_secret_key"),
                 webhook_secret_file: ($k + "/stripe_webhook_secret")})}
        }' >"$CONFIG" || exit 2
    chmod 0640 "$CONFIG"
    [ "$(id -u)" != 0 ] || chown "root:$group" "$CONFIG"
}

# The build tree may sit where another user cannot go (a clone in a
# `mktemp -d` directory is 0700), so the daemon runs from a copy.  A chroot
# unpacked into a `mktemp -d` directory has a root directory of mode 0700,
# where no unprivileged user can run anything at all: on such a root (never
# on a real system) o+x is added, and said.
board_binary()
{
    local user=$1
    if [ "$(id -u)" = 0 ] && ! setpriv --reuid="$user" --regid="$(id -g "$user")" --clear-groups \
        /bin/true 2>/dev/null; then
        if [ "$(stat -c %a /)" = 700 ]; then
            pt_log "$PT_SCRIPT: / is mode 0700 (a chroot made with mktemp -d): adding o+x so that $user can run programs"
            chmod o+x /
        fi
    fi
    mkdir -p "$PT_TMP/bin"
    cp "$(readlink -f "$PAYTERM")" "$PT_TMP/bin/payterm"
    chmod 0755 "$PT_TMP" "$PT_TMP/bin" "$PT_TMP/bin/payterm"
    BIN=$PT_TMP/bin/payterm
    if [ "$(id -u)" = 0 ] && ! setpriv --reuid="$user" --regid="$(id -g "$user")" --clear-groups \
        "$BIN" version >/dev/null 2>&1; then
        pt_log "$PT_SCRIPT: $user cannot run $BIN"
        exit 1
    fi
}
