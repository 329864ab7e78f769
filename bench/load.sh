#!/usr/bin/env bash
# HTTP load scenarios against a real `kiln serve` (make bench runs this after
# the Go benchmarks; docs/benchmarks.md describes it).
#
#  1. builds kiln (or uses $KILN);
#  2. generates the synthetic data set once into a cache folder and reuses it
#     on later runs (regenerated when the generator, the SQLite schema or the
#     search extraction change; delete the folder to force it);
#  3. measures transaction Bundles of 100 resources in-process, on a fresh
#     small store;
#  4. starts `kiln serve` on 127.0.0.1 on a free port, waits for /readyz,
#     runs each scenario at 1 and 16 connections and prints the table;
#  5. stops the server it started (by its PID) on exit, whatever happens.
#
# Environment (defaults in brackets):
#   BENCH_PATIENTS [100000]  BENCH_OBS_PER_PATIENT [10]
#   BENCH_DATA [${XDG_CACHE_HOME:-$HOME/.cache}/kiln-bench/p<N>-o<M>]
#   BENCH_GENERATE_MODE [transaction] (put: one PUT per resource, much slower)
#   BENCH_GENERATE_TIMEOUT [3600] seconds
#   BENCH_DURATION [10s] per run   BENCH_WARMUP [2s]   BENCH_CONNECTIONS ["1 16"]
#   BENCH_SCENARIOS ["obs-by-subject-code patient-family-birthdate read"]
#   BENCH_PROTO [http1]   BENCH_TX_PATIENTS [2000] (0 skips step 3)
#   BENCH_RATE [3000] req/s for the scheduled-rate run (0 skips it)
#   KILN [built into a temporary folder]
#   MONGODB_URI [unset]: run against MongoDB instead of the embedded store
#     (database prefix BENCH_MONGODB_DATABASE [kilnbench_p<N>_o<M>]; the
#     transaction step writes to <prefix>tx). The data folder then holds
#     only the TLS certificate and the generation stamp. Timings on the
#     FerretDB stand-in say nothing about MongoDB (it scans for every query).
set -euo pipefail

cd "$(dirname "$0")/.."
GO=${GO:-go}
PATIENTS=${BENCH_PATIENTS:-100000}
OBS=${BENCH_OBS_PER_PATIENT:-10}
DATA=${BENCH_DATA:-${XDG_CACHE_HOME:-$HOME/.cache}/kiln-bench/p${PATIENTS}-o${OBS}}
MODE=${BENCH_GENERATE_MODE:-transaction}
GEN_TIMEOUT=${BENCH_GENERATE_TIMEOUT:-3600}
DURATION=${BENCH_DURATION:-10s}
WARMUP=${BENCH_WARMUP:-2s}
CONNS=${BENCH_CONNECTIONS:-1 16}
SCENARIOS=${BENCH_SCENARIOS:-obs-by-subject-code patient-family-birthdate read}
PROTO=${BENCH_PROTO:-http1}
TX_PATIENTS=${BENCH_TX_PATIENTS:-2000}
RATE=${BENCH_RATE:-3000}
STORE=sqlite
if [ -n "${MONGODB_URI:-}" ]; then
  STORE=mongodb
  MONGO_DB=${BENCH_MONGODB_DATABASE:-kilnbench_p${PATIENTS}_o${OBS}}
  DATA=${BENCH_DATA:-${XDG_CACHE_HOME:-$HOME/.cache}/kiln-bench/p${PATIENTS}-o${OBS}-mongodb}
  # kiln reads these (serve, admin generate).
  export KILN_MONGODB_URI=$MONGODB_URI KILN_MONGODB_DATABASE=$MONGO_DB
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/kiln-bench.XXXXXX")
server_pid=""
cleanup() {
  local rc=$?
  if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
    kill -TERM "$server_pid" 2>/dev/null || true
    for _ in $(seq 1 250); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$server_pid" 2>/dev/null && kill -KILL "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

say() { printf '\n== %s\n' "$*"; }

# 1. kiln
KILN=${KILN:-}
if [ -z "$KILN" ]; then
  KILN=$work/kiln
  say "building kiln"
  $GO build -trimpath -o "$KILN" ./cmd/kiln
fi

# 2. the data set, cached
# The data set is regenerated when what it depends on changes: the
# generator, the SQLite schema, the search index extraction.
deps=$(ls cmd/kiln/internal/synth/*.go fhirserver/store/sqlite/schema.go fhirserver/search/*.go 2>/dev/null | grep -v '_test\.go$' || true)
stamp="store=$STORE${MONGO_DB:+ database=$MONGO_DB} patients=$PATIENTS obs=$OBS seed=1 sources=$(cat $deps | sha256sum | cut -c1-16)"
if [ -f "$DATA/.kiln-bench" ] && [ "$(cat "$DATA/.kiln-bench")" = "$stamp" ]; then
  say "reusing the data set in $DATA ($stamp)"
else
  say "generating $PATIENTS patients × $OBS observations into $DATA (mode $MODE)"
  rm -rf "$DATA"
  mkdir -p "$DATA"
  timeout --foreground "$GEN_TIMEOUT" "$KILN" admin generate --data "$DATA" --patients "$PATIENTS" \
    --observations-per-patient "$OBS" --mode "$MODE" --batch 500 --workers 2
  echo "$stamp" > "$DATA/.kiln-bench"
fi
du -sh "$DATA" | sed 's/^/data set size: /'

# 3. transaction Bundles of 100 resources (10 patients × (1 + 9)), in-process
if [ "$TX_PATIENTS" -gt 0 ]; then
  say "transaction Bundles of 100 resources, in-process, fresh store ($TX_PATIENTS patients)"
  KILN_MONGODB_DATABASE=${MONGO_DB:+${MONGO_DB}tx} \
  timeout --foreground 900 "$KILN" admin generate --data "$work/tx" --patients "$TX_PATIENTS" \
    --observations-per-patient 9 --batch 100 --workers 2 --mode transaction \
    || echo "(transaction step failed; continuing)"
fi

# 4. the server, on a free loopback port
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
started=""
for _ in 1 2 3 4 5; do
  port=$((20000 + RANDOM % 40000))
  port_free "$port" || continue
  "$KILN" serve --addr "127.0.0.1:$port" --data "$DATA" --log-level warn >"$work/serve.log" 2>&1 &
  server_pid=$!
  base="https://127.0.0.1:$port"
  for _ in $(seq 1 300); do
    kill -0 "$server_pid" 2>/dev/null || break
    if command -v curl >/dev/null; then
      if curl -fsS --max-time 2 --cacert "$DATA/tls/cert.pem" "$base/readyz" >/dev/null 2>&1; then started=1; break; fi
    elif ! port_free "$port"; then
      started=1; break
    fi
    sleep 0.2
  done
  [ -n "$started" ] && break
  kill -0 "$server_pid" 2>/dev/null && kill -TERM "$server_pid" && wait "$server_pid" 2>/dev/null || true
  server_pid=""
done
if [ -z "$started" ]; then
  echo "kiln serve did not become ready:" >&2
  cat "$work/serve.log" >&2
  exit 1
fi
say "kiln serve (pid $server_pid) ready on $base"
# Requests carry a token minted from the data folder's keys.
KILN_TOKEN=$("$KILN" admin token --data "$DATA" --base-url "$base")
export KILN_TOKEN

rows=()
for scenario in $SCENARIOS; do
  for c in $CONNS; do
    say "$scenario, $c connection(s), $DURATION"
    "$KILN" admin load --url "$base/fhir" --ca "$DATA/tls/cert.pem" --scenario "$scenario" \
      --connections "$c" --duration "$DURATION" --warmup "$WARMUP" --proto "$PROTO" \
      --patients "$PATIENTS" --observations-per-patient "$OBS" | tee "$work/load.out"
    rows+=("$(grep -E '^\| [a-z]' "$work/load.out" | grep -v '^| scenario' | tail -1)")
  done
done

# The search target at a scheduled rate: latency counted from each request's
# scheduled time (a closed loop above measures saturation instead).
if [ "$RATE" != 0 ]; then
  say "obs-by-subject-code, 16 connections, $RATE req/s scheduled, $DURATION"
  "$KILN" admin load --url "$base/fhir" --ca "$DATA/tls/cert.pem" --scenario obs-by-subject-code \
    --connections 16 --rate "$RATE" --duration "$DURATION" --warmup "$WARMUP" --proto "$PROTO" \
    --patients "$PATIENTS" --observations-per-patient "$OBS" | tee "$work/load.out"
  rows+=("$(grep -E '^\| [a-z]' "$work/load.out" | grep -v '^| scenario' | tail -1) (at $RATE req/s)")
fi

say "summary ($STORE): $PATIENTS patients, $((PATIENTS * OBS)) observations, $(nproc) CPUs, $(date -u +%Y-%m-%dT%H:%MZ)"
grep -E '^\| scenario|^\|---' "$work/load.out" | head -2
printf '%s\n' "${rows[@]}"
