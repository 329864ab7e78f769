#!/usr/bin/env bash
# Real third-party clients and a real browser, unmodified, against a live
# `kiln serve` on loopback (issue 21): fhir-kit-client, fhirclient,
# openid-client, plain HTTP checks, and Debian's Chromium loading an app
# from a second origin. Run by .ci/run and `make test-clients`.
#
# It builds bin/kiln, starts it on a fresh data folder with one allowed CORS
# origin, logs in as the first admin, registers machine clients with
# `kiln admin client add` beside the running server, and runs the node:test
# files here (NN-*.test.mjs). The server is stopped by its PID whatever happens.
#
# KILN_RC_TIMEOUT bounds the whole run (seconds, default 900, installs and
# build included); KILN_RC_KEEP=1 keeps the data folder and the server log;
# KILN_CHROMIUM names another Chromium binary.
set -euo pipefail

if [ -z "${KILN_RC_BOUNDED:-}" ]; then
  export KILN_RC_BOUNDED=1
  exec timeout --kill-after=15 "${KILN_RC_TIMEOUT:-900}" bash "$0" "$@"
fi

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
cd "$ROOT"
start=$SECONDS
phase() { echo "== realclients: $* (at $((SECONDS - start)) s)"; }

# Chromium comes from Debian; CI runs as root and installs it when missing.
CHROMIUM=${KILN_CHROMIUM:-/usr/bin/chromium}
if [ ! -x "$CHROMIUM" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    phase "installing Debian's chromium"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    echo "realclients: $CHROMIUM is missing: install Debian's chromium (apt-get install chromium) or set KILN_CHROMIUM" >&2
    exit 1
  fi
fi

phase "npm ci"
# --omit=optional: fhirclient's React Native extras (expo, …) are not used on Node.
npm ci --prefix "$HERE" --no-audit --no-fund --ignore-scripts --omit=optional --loglevel=error
phase "make build"
make build

# Three free loopback ports: Kiln, the allowed app origin, another origin.
read -r PORT ALLOWED_PORT OTHER_PORT < <(node -e '
  const net = require("node:net");
  const free = () => new Promise((ok) => { const s = net.createServer().listen(0, "127.0.0.1", () => { const p = s.address().port; s.close(() => ok(p)); }); });
  (async () => { const ps = new Set(); while (ps.size < 3) ps.add(await free()); console.log([...ps].join(" ")); })();')
BASE="https://127.0.0.1:$PORT"
ALLOWED="http://127.0.0.1:$ALLOWED_PORT"
OTHER="http://127.0.0.1:$OTHER_PORT"

DATA=$(mktemp -d "${TMPDIR:-/tmp}/kiln-realclients.XXXXXX")
LOG="$DATA/serve.log"
KILN_PID=
cleanup() {
  if [ -n "$KILN_PID" ] && kill -0 "$KILN_PID" 2>/dev/null; then
    kill "$KILN_PID" 2>/dev/null || true
    for _ in $(seq 1 30); do kill -0 "$KILN_PID" 2>/dev/null || break; sleep 0.5; done
    kill -KILL "$KILN_PID" 2>/dev/null || true
  fi
  if [ "${KILN_RC_KEEP:-0}" = 1 ]; then echo "realclients: kept $DATA"; else rm -rf "$DATA"; fi
}
trap cleanup EXIT
trap 'exit 143' TERM INT

cors_flag=(--cors-origins "$ALLOWED")
ADMIN_EMAIL=realclients@kiln.test
ADMIN_PASSWORD="rc-$(head -c 18 /dev/urandom | od -An -tx1 | tr -d ' \n')"

phase "starting kiln serve on $BASE (CORS origin $ALLOWED)"
KILN_ADMIN_EMAIL=$ADMIN_EMAIL KILN_ADMIN_PASSWORD=$ADMIN_PASSWORD KILN_CORS_ORIGINS=$ALLOWED \
  bin/kiln serve --data "$DATA" --addr "127.0.0.1:$PORT" "${cors_flag[@]}" >"$LOG" 2>&1 &
KILN_PID=$!

CA="$DATA/tls/cert.pem"
for i in $(seq 1 120); do
  if ! kill -0 "$KILN_PID" 2>/dev/null; then
    echo "realclients: kiln serve exited:"; cat "$LOG"; exit 1
  fi
  if [ -s "$CA" ] && curl -fsS --max-time 2 --cacert "$CA" "$BASE/livez" >/dev/null 2>&1; then break; fi
  if [ "$i" = 120 ]; then echo "realclients: kiln serve was not live after 60 s:"; cat "$LOG"; exit 1; fi
  sleep 0.5
done

phase "logging in and registering machine clients"
TOKEN=$(printf '{"email":"%s","password":"%s"}' "$ADMIN_EMAIL" "$ADMIN_PASSWORD" |
  curl -fsS --max-time 30 --cacert "$CA" -X POST "$BASE/auth/login" -H 'Content-Type: application/json' --data-binary @- |
  node -e 'let s = ""; process.stdin.on("data", (d) => (s += d)).on("end", () => process.stdout.write(JSON.parse(s).access_token));')

# add_client NAME SCOPES: its id and secret go to NAME.out in the data folder.
add_client() {
  bin/kiln admin client add --data "$DATA" --name "$1" --scopes "$2" >"$DATA/$1.out" 2>"$DATA/$1.err" || {
    echo "realclients: kiln admin client add $1 failed:"; cat "$DATA/$1.err"; exit 1; }
  if [ -s "$DATA/$1.err" ]; then echo "realclients: kiln admin client add $1 said:"; cat "$DATA/$1.err"; fi
}
field() { awk -v k="$1:" '$1 == k { print $2 }' "$DATA/$2.out"; }
add_client rc-secret 'system/Patient.rs'
add_client rc-other 'system/Patient.rs'

phase "node tests ($(node --version), $("$CHROMIUM" --version 2>/dev/null | head -1))"
status=0
(
  cd "$HERE"
  export KILN_BASE=$BASE KILN_TOKEN=$TOKEN KILN_BIN="$ROOT/bin/kiln" KILN_DATA=$DATA KILN_CHROMIUM=$CHROMIUM
  export KILN_ALLOWED_ORIGIN=$ALLOWED KILN_OTHER_ORIGIN=$OTHER KILN_LOG=$LOG
  KILN_CLIENT_ID=$(field client_id rc-secret) KILN_CLIENT_SECRET=$(field client_secret rc-secret)
  KILN_OTHER_CLIENT_ID=$(field client_id rc-other) KILN_OTHER_CLIENT_SECRET=$(field client_secret rc-other)
  export KILN_CLIENT_ID KILN_CLIENT_SECRET KILN_OTHER_CLIENT_ID KILN_OTHER_CLIENT_SECRET
  # Node trusts the server's generated certificate; nothing turns verification off.
  export NODE_EXTRA_CA_CERTS=$CA
  # One file at a time, in name order (node sorts them): 90-audit runs
  # last, after everything else has written audit records.
  node --test --test-reporter=spec --test-concurrency=1 --test-timeout=120000 \
    10-fhir.test.mjs 20-oauth.test.mjs 30-http.test.mjs 40-browser.test.mjs 90-audit.test.mjs
) || status=$?

if [ "$status" != 0 ]; then
  echo "== realclients: the server's log (last 40 lines)"
  tail -n 40 "$LOG"
fi
phase "done, exit $status"
exit "$status"
