#!/usr/bin/env bash
# icount.sh BINARY BENCH N1 N2 [DIV]: the user-space CPU instructions of one
# more iteration of a Go benchmark (divided by DIV, e.g. the resources per
# iteration), without its setup: the difference between runs of N1 and N2
# iterations. On a VM whose speed swings, instructions compare builds where
# times cannot. Needs perf (linux-perf). Example:
#   go test -c -o /tmp/fhirserver.test ./fhirserver
#   bash bench/icount.sh /tmp/fhirserver.test 'Transaction100/structural' 20 80 100
set -euo pipefail
if [ $# -lt 4 ]; then
	echo "usage: $0 BINARY BENCH N1 N2 [DIV]" >&2
	exit 2
fi
bin=$1 bench=$2 n1=$3 n2=$4 div=${5:-1}
count() {
	perf stat -x, -e instructions:u,task-clock "$bin" -test.run '^$' -test.bench "$bench" -test.benchtime "${1}x" 2>&1 >/dev/null |
		awk -F, '/instructions/ { i = $1 } /task-clock/ { t = $1 } END { print i, t }'
}
read -r i1 t1 < <(count "$n1")
read -r i2 t2 < <(count "$n2")
awk -v i1="$i1" -v i2="$i2" -v t1="$t1" -v t2="$t2" -v n="$((n2 - n1))" -v d="$div" \
	'BEGIN { printf "instructions/op %.3fM  cpu-ms/op %.3f\n", (i2 - i1) / n / d / 1e6, (t2 - t1) / n / d }'
