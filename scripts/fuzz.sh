#!/bin/sh
# fuzz.sh - builds the libFuzzer targets (tests/fuzz) with clang in build/fuzz
# and runs each one for a bounded time, seeded from the SDK-generated vectors
# in tests/vectors.  Fails on the first crash, leak or sanitizer report.
#
#   scripts/fuzz.sh                  every target, PT_FUZZ_SECONDS (20) each
#   scripts/fuzz.sh fuzz_jwt ...     only these targets
#   PT_FUZZ_SECONDS=300 scripts/fuzz.sh
set -eu

cd "$(dirname "$0")/.."
seconds=${PT_FUZZ_SECONDS:-20}
build=build/fuzz
targets=${*:-"fuzz_form fuzz_json fuzz_jscan fuzz_jwt fuzz_pem fuzz_stripe_sig fuzz_notify_alipay
fuzz_notify_wechat fuzz_notify_stripe fuzz_notify_2c2p fuzz_responses fuzz_wechat_v2_xml
fuzz_wechat_certs fuzz_jose fuzz_pm_xml fuzz_wxbill fuzz_stripe_bill fuzz_alipaybill"}

command -v clang >/dev/null || { echo "fuzz.sh: clang is missing (scripts/deps.sh fuzz)" >&2; exit 1; }
CC=clang cmake -S . -B "$build" -DPT_FUZZ=ON -DPT_BUILD_BENCH=OFF -DPT_WERROR=ON \
    -DCMAKE_BUILD_TYPE=Debug >/dev/null
# shellcheck disable=SC2086
cmake --build "$build" -j "$(nproc 2>/dev/null || echo 2)" --target $targets

# Seeds: the real messages from the vectors, so the fuzzer starts deep.
seed() { # seed TARGET NAME [PREFIX]  (content on stdin)
    mkdir -p "$build/corpus/$1"
    { [ -n "${3:-}" ] && printf "$3"; cat; } > "$build/corpus/$1/$2"
}
v=tests/vectors
i=0
jq -r '.notify[].body' $v/alipay.json | while IFS= read -r line; do
    i=$((i + 1))
    printf %s "$line" | seed fuzz_form "a$i"
    printf %s "$line" | seed fuzz_notify_alipay "a$i" '\001'
done
jq -r '.notify[0].plaintext' $v/wechat.json | seed fuzz_notify_wechat plain '\001'
jq -r '.notify[0].body' $v/wechat.json | seed fuzz_notify_wechat env '\000'
jq -r '.notify[0].plaintext' $v/wechat.json | seed fuzz_jscan txn
jq -r '.webhooks[0].payload' $v/stripe.json | seed fuzz_notify_stripe ev
jq -r '.webhooks[0].payload' $v/stripe.json | seed fuzz_jscan ev
jq -r '.webhooks[0].header' $v/stripe.json | seed fuzz_stripe_sig hdr
jq -r '.verify[].token' $v/2c2p.json | while IFS= read -r t; do
    i=$((i + 1))
    printf %s "$t" | seed fuzz_jwt "t$i"
done
jq -r '.verify[0].payload_text' $v/2c2p.json | seed fuzz_notify_2c2p payload '\001'
jq -r '.notify[0].body' $v/2c2p.json | seed fuzz_notify_2c2p body '\000'
jq -r '.responses[0].body' $v/alipay.json | seed fuzz_jscan ali
printf '%s' '{"order_id":"O-1","amount":8888,"currency":"CNY","gateway":"alipay","method":"barcode","payment_code":"287634438256643941","subject":"Caf\u00e9 \ud83d\ude00","metadata":{"lane":"3"}}' | seed fuzz_json charge
printf '%s' '{"a":[1,-0.5e+3,true,false,null,{"b":"\u0041\n"}]}' | seed fuzz_json mixed
jq -r '.notify[0].plaintext' $v/wechat.json | seed fuzz_json wechat
# WeChat APIv2 answers: a leading op byte (0 micropay, 1 orderquery, 2 reverse).
jq -r '.responses[] | select(.status == 200) | "\(.op)\t\(.body | @base64)"' $v/wechat_v2.json |
    while IFS="$(printf '\t')" read -r op b64; do
        i=$((i + 1))
        case $op in pay) p='\000' ;; query) p='\001' ;; *) p='\002' ;; esac
        printf %s "$b64" | base64 -d | seed fuzz_wechat_v2_xml "w$i" "$p"
    done
# WeChat platform certificates: the answers as they come, and a certificate
# to encrypt into one.
jq -r '.answers[] | select(.status == 200) | .body | @base64' $v/wechat_certs.json |
    while IFS= read -r b64; do
        i=$((i + 1))
        printf %s "$b64" | base64 -d | seed fuzz_wechat_certs "c$i" '\000'
    done
cat $v/keys/wechat_platform_cert.pem | seed fuzz_wechat_certs cert '\001'
cat $v/keys/alipay_gateway_public.pem | seed fuzz_pem spki
cat $v/keys/wechat_platform_cert.pem | seed fuzz_pem cert
cat $v/keys/merchant_alipay_pkcs1.pem | seed fuzz_pem pkcs1
# 2C2P Payment Maintenance: the tokens jose made (a leading mode byte: 0 the
# whole token, 1 a JWE, 2 a JWS - fuzz_jose.c), the JWE inside one for mode
# 3, the XML of the answers for the classifiers (0 R, 1 RS, 2 I, 3 reader).
jq -r '.jose_made[] | "\(.kind)\t\(.token)"' $v/2c2p_pm.json | while IFS="$(printf '\t')" read -r kind tok; do
    i=$((i + 1))
    case $kind in nested) p='\000' ;; jwe) p='\001' ;; *) p='\002' ;; esac
    printf %s "$tok" | seed fuzz_jose "j$i" "$p"
done
jq -r '.jose_made[] | select(.kind == "jwe") | .token' $v/2c2p_pm.json | seed fuzz_jose jwe '\003'
jq -r '.requests[0].xml' $v/2c2p_pm.json | seed fuzz_jose text '\004'
jq -r '.answers[] | select(.xml != "") | "\(.op)\t\(.xml | @base64)"' $v/2c2p_pm.json |
    while IFS="$(printf '\t')" read -r op b64; do
        i=$((i + 1))
        case $op in R) p='\000' ;; RS) p='\001' ;; *) p='\002' ;; esac
        printf %s "$b64" | base64 -d | seed fuzz_pm_xml "x$i" "$p"
        printf %s "$b64" | base64 -d | seed fuzz_pm_xml "w$i" '\003'
    done
jq -r '.responses[3].body' $v/wechat.json | seed fuzz_responses query '\011\000'
printf '%s' '{"id":"pi_1","amount":1200,"currency":"usd","status":"succeeded"}' | seed fuzz_responses pi '\000\000'
printf '%s' '{"code":"10000","msg":"Success","qr_code":"x","trade_status":"TRADE_SUCCESS","total_amount":"88.88"}' | seed fuzz_responses ali '\001\000'
# A WeChat trade bill of the documented layout (docs/reconcile.md).
{
    printf '%s\n' '交易时间,公众账号ID,商户号,特约商户号,设备号,微信订单号,商户订单号,用户标识,交易类型,交易状态,付款银行,货币种类,应结订单金额,代金券金额,微信退款单号,商户退款单号,退款金额,充值券退款金额,退款类型,退款状态,商品名称,商户数据包,手续费,费率,订单金额,申请退款金额,费率备注'
    printf '%s\n' '`2026-12-05 09:30:01,`wx1,`19,`0,`,`4201,`O-1,`u,`MICROPAY,`SUCCESS,`OTHERS,`CNY,`12.00,`0.34,`0,`0,`0.00,`0.00,`,`,`x,`,`0.07000,`0.60%,`12.34,`0.00,`'
    printf '%s\n' '`2026-12-05 18:02:44,`wx1,`19,`0,`,`4201,`O-1,`u,`MICROPAY,`REFUND,`OTHERS,`CNY,`0.00,`0.00,`5031,`O-1-R,`5.00,`0.00,`ORIGINAL,`SUCCESS,`x,`,`-0.03000,`0.60%,`0.00,`5.00,`'
    printf '%s\n' '总交易单数,应结订单总金额,退款总金额,充值券退款总金额,手续费总金额,订单总金额,申请退款总金额'
    printf '%s\n' '`2,`12.00,`5.00,`0.00,`0.04000,`12.34,`5.00'
} | seed fuzz_wxbill day
# APIv2 downloadbill's error answer (docs/reconcile.md).
printf '%s' '<xml><return_code><![CDATA[FAIL]]></return_code><return_msg><![CDATA[No Bill Exist]]></return_msg><error_code><![CDATA[20002]]></error_code></xml>' |
    seed fuzz_wxbill v2fail
printf '%s' '{"object":"list","has_more":true,"data":[{"id":"ch_1","object":"charge","amount":1250,"captured":true,"created":1796436000,"currency":"usd","payment_intent":"pi_1","status":"succeeded","metadata":{"order_id":"O-1"}}]}' |
    seed fuzz_stripe_bill charges '\000'
printf '%s' '{"object":"list","has_more":false,"data":[{"id":"re_1","object":"refund","amount":300,"created":1796486000,"currency":"usd","payment_intent":"pi_1","status":"succeeded","metadata":{"refund_id":"O-1-R","order_id":"O-1"}}]}' |
    seed fuzz_stripe_bill refunds '\001'
# Alipay's trade bill (GBK), as its detail file and as the zip it comes in.
seed fuzz_alipaybill detail '\000' <$v/alipay_bill/detail.csv
seed fuzz_alipaybill zip '\001' <$v/alipay_bill/bill.zip

for t in $targets; do
    mkdir -p "$build/corpus/$t" "$build/artifacts/$t"
    echo "fuzz.sh: $t for ${seconds}s"
    "$build/tests/fuzz/$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
        -artifact_prefix="$build/artifacts/$t/" -print_final_stats=0 \
        "$build/corpus/$t" 2>"$build/$t.log" || {
        echo "fuzz.sh: $t FAILED; see $build/$t.log and $build/artifacts/$t/" >&2
        tail -40 "$build/$t.log" >&2
        exit 1
    }
    grep -E "^(#[0-9]+\s+DONE|Done)" "$build/$t.log" | tail -1 || true
done
echo "fuzz.sh: all targets ran ${seconds}s without a crash"
