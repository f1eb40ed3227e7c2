#!/usr/bin/env bash
# test_startup.sh - what payterm checks before it touches anything (SPEC 3,
# 11): one daemon per database (the data_dir lock), a tls.ca_file that holds
# no certificate, `payterm init` listing every problem at once, a database
# whose tables are missing, and the read/maintenance commands (status,
# charges, backup, sweep) that must never create or migrate a database.
source "$(dirname "$0")/lib.sh"

SQL_DIR=$(cd "$(dirname "$0")/../../sql" && pwd)

# run_cmd CMD ARGS... - runs payterm with a 20 s ceiling; sets RC and OUT
# (stdout and stderr together).
run_cmd()
{
    OUT=$(timeout 20 "$PAYTERM" "$@" 2>&1)
    RC=$?
    [ "$RC" -ne 124 ] || fail "payterm $* did not end within 20 s (it started serving?)"
}

# serve_refused JQ_FILTER PART... - serve must exit 1 at once, printing every
# PART; nothing listens afterwards.
serve_refused()
{
    local filter=$1
    shift
    pt_config "$filter"
    jq --arg l "127.0.0.1:$(pt_pick_port)" '.listen = $l' "$PT_CFG_BASE" >"$PT_CFG"
    run_cmd serve -c "$PT_CFG"
    expect_eq 1 "$RC" "exit status of payterm serve ($filter); it printed: $OUT"
    for part in "$@"; do
        expect_contains "$part" "$OUT" "what payterm serve printed for: $filter"
    done
}

# init_refused JQ_FILTER PART... - the same for payterm init.
init_refused()
{
    local filter=$1
    shift
    pt_config "$filter"
    run_cmd init -c "$PT_CFG_BASE"
    expect_eq 1 "$RC" "exit status of payterm init ($filter); it printed: $OUT"
    for part in "$@"; do
        expect_contains "$part" "$OUT" "what payterm init printed for: $filter"
    done
}

case_second_serve_refused()
{
    local second=$PT_TMP/second.json lock=$PT_TMP/data/payterm.lock
    pt_config .
    pt_start
    expect_eq 600 "$(stat -c %a "$lock")" "mode of $lock"
    expect_eq "$PT_PID" "$(tr -d '\n' <"$lock")" "the PID written in $lock"
    # Another port, so that only the lock can stop it.
    jq --arg l "127.0.0.1:$(pt_pick_port)" '.listen = $l' "$PT_CFG_BASE" >"$second"
    run_cmd serve -c "$second"
    expect_eq 1 "$RC" "exit status of a second payterm serve on the same data_dir: $OUT"
    expect_contains "PID $PT_PID" "$OUT" "what the second serve printed"
    expect_contains "$lock" "$OUT" "what the second serve printed"
    # The first one is untouched.
    pt_get /healthz
    expect_status 200
    pt_post /v1/charges lock-key "$(charge_body lock-1)"
    expect_status 202
    pt_stop
    # The lock goes with its holder, even one killed without any cleanup.
    pt_start
    pt_kill9
    pt_start
    pt_get /v1/charges/lock-1
    expect_status 200
    pt_stop
}

case_ca_file_without_certificate()
{
    local empty=$PT_TMP/empty-ca.pem garbage=$PT_TMP/garbage-ca.pem bad_pem=$PT_TMP/bad-pem-ca.pem
    : >"$empty"
    printf 'this is not a certificate\n' >"$garbage"
    printf -- '-----BEGIN CERTIFICATE-----\nMIIBnotbase64atall!!\n-----END CERTIFICATE-----\n' \
        >"$bad_pem"
    for f in "$empty" "$garbage" "$bad_pem"; do
        serve_refused ".tls.ca_file = \"$f\"" tls.ca_file "$f"
        init_refused ".tls.ca_file = \"$f\"" tls.ca_file "$f"
    done
    # A file that holds one certificate is enough, also after a block that
    # does not parse (a bundle may hold some mbedTLS cannot read).
    cat "$bad_pem" "$PT_KEYS/wechat_platform_cert.pem" >"$PT_TMP/mixed-ca.pem"
    for f in "$PT_KEYS/wechat_platform_cert.pem" "$PT_TMP/mixed-ca.pem"; do
        pt_config ".tls.ca_file = \"$f\" | .data_dir = \"$PT_TMP/ca-ok\""
        run_cmd init -c "$PT_CFG_BASE"
        expect_eq 0 "$RC" "payterm init with the ca_file $f: $OUT"
    done
    rm -rf "$PT_TMP/ca-ok"
}

case_init_lists_every_problem()
{
    local garbage=$PT_TMP/garbage-ca.pem
    printf 'nothing here\n' >"$garbage"
    printf '0123456789abcdef0123456789abcde' >"$PT_TMP/short.v3"
    chmod 600 "$PT_TMP/short.v3"
    # Copies with modes others can read (the originals serve the other cases).
    cp "$PT_TMP/stripe.sk" "$PT_TMP/open.sk" && cp "$PT_TMP/alipay.key" "$PT_TMP/open.key" &&
        chmod 644 "$PT_TMP/open.sk" "$PT_TMP/open.key" || fail "cannot copy the keys"
    local filter=".data_dir = \"$PT_TMP/fresh\" | .tls.ca_file = \"$garbage\"
        | .gateways.stripe.secret_key_file = \"$PT_TMP/open.sk\"
        | .gateways.alipay.private_key_file = \"$PT_TMP/open.key\"
        | .gateways.wechat.apiv3_key_file = \"$PT_TMP/short.v3\"
        | .gateways.\"2c2p\".secret_key_file = \"$PT_TMP/no-such-file\""
    local parts=("$garbage" "$PT_TMP/open.sk" "$PT_TMP/open.key" "$PT_TMP/short.v3"
        "$PT_TMP/no-such-file" gateways.stripe.secret_key_file gateways.alipay.private_key_file
        gateways.wechat.apiv3_key_file gateways.2c2p.secret_key_file tls.ca_file)
    init_refused "$filter" "${parts[@]}"
    # serve refuses the same things, all of them named too.
    serve_refused "$filter" "${parts[@]}"
    # init created nothing while refusing.
    [ ! -e "$PT_TMP/fresh" ] || fail "payterm init created $PT_TMP/fresh while refusing the configuration"
}

# A lock that expires while its request still waits for the gateway hands
# the retry a stale 202 PROCESSING (issue 32, item 7): refused at start, by
# init as by serve, naming both keys and their values, before anything is
# created.
case_lock_timeout_below_request_timeout()
{
    local filter=".data_dir = \"$PT_TMP/lockt\" | .idempotency.lock_timeout_s = 20"
    init_refused "$filter" "'idempotency.lock_timeout_s': 20 s must be above" \
        "sync.request_timeout_ms (15000 ms) + 5 s"
    serve_refused "$filter" "'idempotency.lock_timeout_s': 20 s must be above" \
        "sync.request_timeout_ms (15000 ms) + 5 s"
    filter=".data_dir = \"$PT_TMP/lockt\" | .sync.request_timeout_ms = 60000"
    init_refused "$filter" "'idempotency.lock_timeout_s': 60 s must be above" \
        "sync.request_timeout_ms (60000 ms) + 5 s"
    [ ! -e "$PT_TMP/lockt" ] || fail "a refused configuration created $PT_TMP/lockt"
    pt_config ".data_dir = \"$PT_TMP/lockt\" | .idempotency.lock_timeout_s = 21"
    run_cmd init -c "$PT_CFG_BASE"
    expect_eq 0 "$RC" "payterm init with lock_timeout_s 21 (above 15 s + 5 s): $OUT"
    rm -rf "$PT_TMP/lockt"
}

# A key file that does not hold what its key's name says (issue 32, item
# 10a): a public key as Alipay's private_key_file passed init, and the first
# charge then said "gateway could not be reached".  init and serve load
# every key, sign and verify a probe message, and name the key and the file;
# every such problem at once, nothing created.
case_keys_hold_what_their_names_say()
{
    local filter=".data_dir = \"$PT_TMP/keyt\" |
        .gateways.alipay.private_key_file = \"$PT_TMP/alipay.pub\""
    init_refused "$filter" gateways.alipay.private_key_file "$PT_TMP/alipay.pub" "holds a public key"
    serve_refused "$filter" gateways.alipay.private_key_file "$PT_TMP/alipay.pub" "holds a public key"
    filter="$filter | .gateways.wechat.platform_public_key_file = \"$PT_TMP/wechat.key\"
        | .gateways.alipay.alipay_public_key_file = \"$PT_KEYS/merchant_alipay_public.pem\""
    init_refused "$filter" "2 problems" gateways.alipay.private_key_file \
        gateways.wechat.platform_public_key_file "$PT_TMP/wechat.key" "holds a private key"
    filter=".data_dir = \"$PT_TMP/keyt\" |
        .gateways.alipay.alipay_public_key_file = \"$PT_KEYS/merchant_alipay_public.pem\""
    init_refused "$filter" gateways.alipay.alipay_public_key_file \
        "$PT_KEYS/merchant_alipay_public.pem" "public half of gateways.alipay.private_key_file"
    [ ! -e "$PT_TMP/keyt" ] || fail "a refused configuration created $PT_TMP/keyt"
}

# 2C2P's Payment Maintenance keys (refunds, issue 33): checked like every
# other key - the three together or none, a key that cannot sign PS256 and
# decrypt RSA-OAEP named, 2C2P's certificate (DER .cer) taken.
case_2c2p_pm_keys_checked()
{
    local pm="\"pm_endpoint\": \"https://127.0.0.1:1/PaymentAction/2.0/action\""
    local ok=".data_dir = \"$PT_TMP/pmt\" | .gateways[\"2c2p\"] += {$pm,
        pm_private_key_file: \"$PT_TMP/c2p_pm.key\", pm_public_key_file: \"$PT_TMP/c2p_pm.cer\"}"
    pt_config "$ok"
    run_cmd init -c "$PT_CFG_BASE"
    expect_eq 0 "$RC" "payterm init with the three pm_ keys: $OUT"
    rm -rf "$PT_TMP/pmt"
    init_refused ".data_dir = \"$PT_TMP/pmt\" | .gateways[\"2c2p\"] += {$pm}" \
        gateways.2c2p.pm_private_key_file gateways.2c2p.pm_public_key_file "go together"
    init_refused "$ok | .gateways[\"2c2p\"].pm_private_key_file = \"$PT_TMP/c2p_pm_merchant.pub\"" \
        gateways.2c2p.pm_private_key_file "$PT_TMP/c2p_pm_merchant.pub" "holds a public key"
    serve_refused "$ok | .gateways[\"2c2p\"].pm_public_key_file = \"$PT_TMP/c2p_pm.key\"" \
        gateways.2c2p.pm_public_key_file "$PT_TMP/c2p_pm.key" "holds a private key"
    init_refused "$ok | .gateways[\"2c2p\"].pm_public_key_file = \"$PT_TMP/c2p_pm_merchant.pub\"" \
        gateways.2c2p.pm_public_key_file "public half of gateways.2c2p.pm_private_key_file"
    # A private key that cannot sign PS256 or decrypt RSA-OAEP (EC).
    cp "$PT_KEYS/ec_private.pem" "$PT_TMP/c2p_pm_ec.key"
    chmod 600 "$PT_TMP/c2p_pm_ec.key"
    init_refused "$ok | .gateways[\"2c2p\"].pm_private_key_file = \"$PT_TMP/c2p_pm_ec.key\"" \
        gateways.2c2p.pm_private_key_file "$PT_TMP/c2p_pm_ec.key" "not an RSA key"
    chmod 644 "$PT_TMP/c2p_pm.key"
    init_refused "$ok" gateways.2c2p.pm_private_key_file "$PT_TMP/c2p_pm.key"
    chmod 600 "$PT_TMP/c2p_pm.key"
    init_refused "$ok | .gateways[\"2c2p\"].pm_endpoint = \"http://127.0.0.1:1/x\"" \
        gateways.2c2p.pm_endpoint
    [ ! -e "$PT_TMP/pmt" ] || fail "a refused configuration created $PT_TMP/pmt"
}

# serve_unbindable NAME JQ_FILTER PART... - serve with data_dir $PT_TMP/NAME
# must exit 1 at once, printing every PART, and leave no database behind:
# an address that cannot be bound is found before the database is created
# (issue 32, item 10b).
serve_unbindable()
{
    local dir=$PT_TMP/$1 filter=$2 part
    shift 2
    jq --arg d "$dir" ".data_dir = \$d | $filter" "$PT_CFG_BASE" >"$PT_TMP/unbindable.json" ||
        fail "bad filter: $filter"
    OUT=$(timeout 20 ${PT_AS:-} "$PAYTERM" serve -c "$PT_TMP/unbindable.json" 2>&1)
    RC=$?
    expect_eq 1 "$RC" "exit status of payterm serve ($filter); it printed: $OUT"
    for part in "$@"; do
        expect_contains "$part" "$OUT" "what payterm serve printed for: $filter"
    done
    for f in payterm.db payterm.db-wal payterm.db-shm; do
        [ ! -e "$dir/$f" ] || fail "a start that could not listen left $dir/$f behind"
    done
    rm -rf "$dir"
}

case_listen_not_bindable()
{
    local free
    pt_config .
    pt_start # holds 127.0.0.1:$PT_PORT
    free=$(pt_pick_port)
    serve_unbindable busy ".listen = \"127.0.0.1:$PT_PORT\"" \
        "listen 127.0.0.1:$PT_PORT: cannot bind: address in use"
    serve_unbindable nbusy ".listen = \"127.0.0.1:$free\" | .notify_listen = \"127.0.0.1:$PT_PORT\"" \
        "notify_listen 127.0.0.1:$PT_PORT: cannot bind: address in use"
    # Not an address of this host (TEST-NET-1, RFC 5737).
    serve_unbindable absent ".listen = \"192.0.2.1:$free\"" \
        "listen 192.0.2.1:$free: cannot bind: address not available"
    pt_stop
    # A privileged port without the capability to bind it: as root, the
    # capability is taken away (bounding and inheritable sets).
    local low=1023 start
    start=$(cat /proc/sys/net/ipv4/ip_unprivileged_port_start 2>/dev/null || echo 1024)
    [ "$start" -gt "$low" ] || pt_skip "ports from $start up are unprivileged here"
    if [ "$(id -u)" = 0 ]; then
        setpriv --inh-caps=-net_bind_service --bounding-set=-net_bind_service true 2>/dev/null ||
            pt_skip "setpriv cannot drop CAP_NET_BIND_SERVICE here"
        PT_AS="setpriv --inh-caps=-net_bind_service --bounding-set=-net_bind_service"
    fi
    PT_AS=${PT_AS:-} serve_unbindable low ".listen = \"127.0.0.1:$low\"" \
        "listen 127.0.0.1:$low: cannot bind: permission denied" "CAP_NET_BIND_SERVICE"
}

case_missing_tables_refused()
{
    local db=$PT_TMP/data/payterm.db
    pt_config .
    pt_start
    pt_stop
    sqlite3 "$db" 'DROP TABLE notifications; DROP TRIGGER offline_queue_insert;' ||
        fail "sqlite3 could not damage $db"
    serve_refused . "$db" notifications offline_queue_insert
    init_refused . "$db" notifications offline_queue_insert
    run_cmd status -c "$PT_CFG_BASE"
    expect_eq 1 "$RC" "payterm status on a damaged database: $OUT"
    expect_contains "$db" "$OUT" "what payterm status printed"
    expect_contains notifications "$OUT" "what payterm status printed"
    # Nothing was recreated behind the operator's back.
    expect_eq "" "$(sqlite3 "$db" "SELECT name FROM sqlite_master WHERE name = 'notifications'")" \
        "the notifications table after the refusals"
    rm -rf "$PT_TMP/data"
}

# Every table, index and trigger a fresh database has is checked: each one
# dropped in turn is named by the refusal (a new migration's object that the
# check does not know about fails here).
case_every_object_checked()
{
    local fresh=$PT_TMP/fresh-db dir=$PT_TMP/dropped type name n=0
    pt_config ".data_dir = \"$fresh\""
    run_cmd init -c "$PT_CFG_BASE"
    expect_eq 0 "$RC" "payterm init: $OUT"
    pt_config ".data_dir = \"$dir\""
    while read -r type name; do
        rm -rf "$dir" && mkdir -p "$dir"
        sqlite3 "$fresh/payterm.db" ".backup '$dir/payterm.db'" &&
            sqlite3 "$dir/payterm.db" "DROP $type $name" || fail "cannot drop $type $name"
        run_cmd status -c "$PT_CFG_BASE"
        expect_eq 1 "$RC" "payterm status on a database without $type $name: $OUT"
        expect_contains "$type $name" "$OUT" "what payterm status printed without $type $name"
        n=$((n + 1))
    done < <(sqlite3 -separator ' ' "$fresh/payterm.db" \
        "SELECT type, name FROM sqlite_master WHERE name NOT LIKE 'sqlite%' ORDER BY 1, 2")
    [ "$n" -ge 10 ] || fail "only $n schema objects in a fresh database?"
    rm -rf "$fresh" "$dir"
}

# The read and maintenance commands on a data_dir without a database: exit
# 1, the path named, and no database (nor data_dir) created.
case_read_commands_never_create()
{
    local dir cmd db
    for dir in "$PT_TMP/nodir/data" "$PT_TMP/emptydir"; do
        db=$dir/payterm.db
        rm -rf "$PT_TMP/nodir"
        [ "$dir" != "$PT_TMP/emptydir" ] || mkdir -p "$dir"
        pt_config ".data_dir = \"$dir\""
        for cmd in status charges sweep "backup $PT_TMP/copy.db"; do
            # shellcheck disable=SC2086
            run_cmd $cmd -c "$PT_CFG_BASE"
            expect_eq 1 "$RC" "exit status of payterm $cmd without a database: $OUT"
            expect_contains "$db" "$OUT" "what payterm $cmd printed"
            [ ! -e "$db" ] || fail "payterm $cmd created $db"
            if [ "$dir" = "$PT_TMP/emptydir" ]; then
                expect_eq "" "$(ls -A "$dir")" "what payterm $cmd left in the empty data_dir"
            else
                [ ! -e "$dir" ] || fail "payterm $cmd created the data_dir $dir"
            fi
            [ ! -e "$PT_TMP/copy.db" ] || fail "payterm $cmd wrote the backup $PT_TMP/copy.db"
        done
    done
    rm -rf "$PT_TMP/emptydir"
}

# An older database: status, charges and sweep say to run init and change
# nothing; backup copies it as it is; init migrates it.
case_old_schema_not_migrated()
{
    local dir=$PT_TMP/old db=$PT_TMP/old/payterm.db cmd v latest
    mkdir -p "$dir"
    latest=$(ls "$SQL_DIR"/[0-9][0-9][0-9]_*.sql | wc -l)
    v=$((latest - 1))
    { ls "$SQL_DIR"/[0-9][0-9][0-9]_*.sql | head -n "$v" | xargs cat
      echo "PRAGMA user_version = $v;"; } | sqlite3 "$db" || fail "cannot build a version $v database"
    pt_config ".data_dir = \"$dir\""
    for cmd in status charges sweep; do
        run_cmd $cmd -c "$PT_CFG_BASE"
        expect_eq 1 "$RC" "exit status of payterm $cmd on a schema $v database: $OUT"
        expect_contains "$db" "$OUT" "what payterm $cmd printed"
        expect_contains "payterm init" "$OUT" "what payterm $cmd printed"
        expect_eq "$v" "$(sqlite3 "$db" 'PRAGMA user_version')" "user_version after payterm $cmd"
    done
    run_cmd backup -c "$PT_CFG_BASE" "$PT_TMP/old-copy.db"
    expect_eq 0 "$RC" "payterm backup of a schema $v database: $OUT"
    expect_eq "$v" "$(sqlite3 "$db" 'PRAGMA user_version')" "user_version after payterm backup"
    expect_eq "$v" "$(sqlite3 "$PT_TMP/old-copy.db" 'PRAGMA user_version')" "the copy's user_version"
    run_cmd init -c "$PT_CFG_BASE"
    expect_eq 0 "$RC" "payterm init on a schema $v database: $OUT"
    expect_eq "$latest" "$(sqlite3 "$db" 'PRAGMA user_version')" "user_version after payterm init"
    run_cmd status -c "$PT_CFG_BASE"
    expect_eq 0 "$RC" "payterm status after init: $OUT"
    rm -rf "$dir" "$PT_TMP/old-copy.db"
}

# A file under data_dir that is not a payterm database is refused by name.
case_not_a_database()
{
    local dir=$PT_TMP/junk db=$PT_TMP/junk/payterm.db cmd
    mkdir -p "$dir"
    head -c 4096 /dev/urandom >"$db"
    pt_config ".data_dir = \"$dir\""
    for cmd in status charges sweep "backup $PT_TMP/junk-copy.db" init; do
        # shellcheck disable=SC2086
        run_cmd $cmd -c "$PT_CFG_BASE"
        expect_eq 1 "$RC" "exit status of payterm $cmd on a file that is not a database: $OUT"
        expect_contains "$db" "$OUT" "what payterm $cmd printed"
    done
    rm -rf "$dir"
}

# The test and board knob for thread stacks is checked like a config key.
case_thread_stack_knob()
{
    local v
    pt_config .
    jq --arg l "127.0.0.1:$(pt_pick_port)" '.listen = $l' "$PT_CFG_BASE" >"$PT_CFG"
    for v in abc 16 36 63 100000 12k +128 " 128" 0128 ""; do
        OUT=$(PAYTERM_THREAD_STACK_KIB=$v timeout 20 "$PAYTERM" serve -c "$PT_CFG" 2>&1)
        RC=$?
        expect_eq 1 "$RC" "exit status of serve with PAYTERM_THREAD_STACK_KIB=$v: $OUT"
        expect_contains PAYTERM_THREAD_STACK_KIB "$OUT" "what serve printed for '$v'"
        expect_contains "'$v'" "$OUT" "what serve printed for '$v'"
    done
}

pt_init

pt_case "a second serve on the same data_dir is refused, naming the PID that holds the lock" \
    case_second_serve_refused
pt_case "an empty or garbage tls.ca_file is refused by serve and init, naming the file" \
    case_ca_file_without_certificate
pt_case "init (and serve) list every problem at once" case_init_lists_every_problem
pt_case "a key file that does not hold what its key says: refused by init and serve, named" \
    case_keys_hold_what_their_names_say
pt_case "2C2P's Payment Maintenance keys: all three or none, each checked and named" \
    case_2c2p_pm_keys_checked
pt_case "listen addresses that cannot be bound: which and why, before any database is created" \
    case_listen_not_bindable
pt_case "idempotency.lock_timeout_s not above sync.request_timeout_ms + 5 s: refused, both named" \
    case_lock_timeout_below_request_timeout
pt_case "a database with missing tables is refused, naming the file and what is missing" \
    case_missing_tables_refused
pt_case "every table, index and trigger of a fresh database, dropped, is named" \
    case_every_object_checked
pt_case "status, charges, sweep, backup without a database: exit 1, path named, nothing created" \
    case_read_commands_never_create
pt_case "an older schema: status, charges, sweep refuse it untouched; backup copies; init migrates" \
    case_old_schema_not_migrated
pt_case "a file that is not a database is refused by name" case_not_a_database
pt_case "a bad PAYTERM_THREAD_STACK_KIB is refused, named" case_thread_stack_knob

pt_done
