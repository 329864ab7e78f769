#!/usr/bin/env bash
# Provides a MongoDB-wire server on loopback for tests: FerretDB v1.24.0
# (built from the Go module proxy) on top of a private PostgreSQL cluster.
#
#   bash .ci/mongo-wire.sh [start]   # start (idempotent); writes $STATE/env
#   bash .ci/mongo-wire.sh stop      # stop only the processes this script started
#   bash .ci/mongo-wire.sh status
#
# Afterwards: `source "$STATE/env"` exports MONGODB_URI=mongodb://127.0.0.1:PORT/
# STATE is ${KILN_CI_STATE:-/tmp/kiln-ci}. Everything binds to 127.0.0.1 only.
set -euo pipefail

STATE="${KILN_CI_STATE:-/tmp/kiln-ci}"
FERRETDB_MODULE="github.com/FerretDB/FerretDB"
FERRETDB_VERSION="v1.24.0"
FERRETDB_BIN="$STATE/ferretdb"
FERRETDB_LOG="$STATE/ferretdb.log"
FERRETDB_PIDFILE="$STATE/ferretdb.pid"
FERRETDB_STATE_DIR="$STATE/ferretdb-state"
PGDATA_DIR="$STATE/pg/data"
PG_SOCK_DIR="$STATE/pg/sock"
PG_LOG="$STATE/pg/postgresql.log"
PG_PORTFILE="$STATE/pg/port"
PG_USER="ferretdb"
PG_DB="ferretdb"
ENV_FILE="$STATE/env"
PIDS_FILE="$STATE/pids"
WAIT_SECS="${KILN_CI_WAIT_SECS:-60}"

log() { echo "== $*"; }
die() { echo "mongo-wire: error: $*" >&2; exit 1; }

# ---------------------------------------------------------------- helpers

# true if something accepts TCP connections on 127.0.0.1:$1
port_in_use() {
	timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null
}

# prints the first free port among $1, $2..$3
pick_port() {
	local preferred=$1 lo=$2 hi=$3 p
	if ! port_in_use "$preferred"; then echo "$preferred"; return 0; fi
	for ((p = lo; p <= hi; p++)); do
		if ! port_in_use "$p"; then echo "$p"; return 0; fi
	done
	return 1
}

# true if PID $1 is alive and its executable name contains $2
pid_is() {
	local pid=$1 name=$2 comm
	[[ "$pid" =~ ^[0-9]+$ ]] || return 1
	kill -0 "$pid" 2>/dev/null || return 1
	comm=$(cat "/proc/$pid/comm" 2>/dev/null || true)
	[[ "$comm" == *"$name"* ]]
}

# runs a PostgreSQL tool as the postgres OS user (initdb/postgres refuse root)
as_pg() {
	if [[ $EUID -eq 0 ]]; then
		(cd / && runuser -u postgres -- "$@")
	else
		"$@"
	fi
}

pg_bindir() {
	local d
	d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
	[[ -n "$d" && -x "$d/initdb" ]] || return 1
	echo "$d"
}

postmaster_pid() {
	[[ -f "$PGDATA_DIR/postmaster.pid" ]] || return 1
	head -n 1 "$PGDATA_DIR/postmaster.pid"
}

ferretdb_pid() {
	[[ -f "$FERRETDB_PIDFILE" ]] || return 1
	cat "$FERRETDB_PIDFILE"
}

ferretdb_port() {
	[[ -f "$STATE/ferretdb.port" ]] || return 1
	cat "$STATE/ferretdb.port"
}

write_pids() {
	local pgpid fpid
	: >"$PIDS_FILE.tmp"
	if fpid=$(ferretdb_pid) && pid_is "$fpid" ferretdb; then echo "$fpid" >>"$PIDS_FILE.tmp"; fi
	if pgpid=$(postmaster_pid) && pid_is "$pgpid" postgres; then echo "$pgpid" >>"$PIDS_FILE.tmp"; fi
	mv "$PIDS_FILE.tmp" "$PIDS_FILE"
}

# ---------------------------------------------------------------- postgresql

install_postgresql() {
	if dpkg-query -W -f='${Status}' postgresql 2>/dev/null | grep -q 'install ok installed' && pg_bindir >/dev/null; then
		log "postgresql already installed ($(pg_bindir))"
		return 0
	fi
	log "installing postgresql (apt-get)"
	local sudo=()
	[[ $EUID -eq 0 ]] || sudo=(sudo)
	export DEBIAN_FRONTEND=noninteractive
	"${sudo[@]}" apt-get update -qq >/dev/null
	"${sudo[@]}" apt-get install -y -qq --no-install-recommends postgresql >/dev/null
	pg_bindir >/dev/null || die "postgresql installed but no initdb under /usr/lib/postgresql/*/bin"
}

start_postgresql() {
	local bindir pgpid port
	bindir=$(pg_bindir)

	if pgpid=$(postmaster_pid) && pid_is "$pgpid" postgres && [[ -f "$PG_PORTFILE" ]]; then
		log "postgresql already running (pid $pgpid, port $(cat "$PG_PORTFILE"))"
		return 0
	fi

	# not running: start from a fresh cluster so every cold start is clean
	log "initialising postgresql cluster in $PGDATA_DIR"
	rm -rf "$STATE/pg"
	mkdir -p "$PGDATA_DIR" "$PG_SOCK_DIR"
	chmod 755 "$STATE" "$STATE/pg"
	chmod 700 "$PGDATA_DIR"
	if [[ $EUID -eq 0 ]]; then chown -R postgres:postgres "$STATE/pg"; fi
	as_pg "$bindir/initdb" -D "$PGDATA_DIR" -U postgres --auth=trust --encoding=UTF8 --locale=C.UTF-8 >"$STATE/pg/initdb.log" 2>&1 ||
		{ cat "$STATE/pg/initdb.log" >&2; die "initdb failed"; }

	port=$(pick_port 54320 54321 54399) || die "no free port for postgresql"
	cat >>"$PGDATA_DIR/postgresql.conf" <<-EOF
		# added by .ci/mongo-wire.sh
		listen_addresses = '127.0.0.1'
		port = $port
		unix_socket_directories = '$PG_SOCK_DIR'
		max_connections = 200
		fsync = off
		synchronous_commit = off
		full_page_writes = off
	EOF
	# trust on loopback and the private socket only
	cat >"$PGDATA_DIR/pg_hba.conf" <<-EOF
		local all all trust
		host  all all 127.0.0.1/32 trust
	EOF

	log "starting postgresql on 127.0.0.1:$port"
	as_pg "$bindir/pg_ctl" -D "$PGDATA_DIR" -l "$PG_LOG" -w -t "$WAIT_SECS" start >/dev/null ||
		{ cat "$PG_LOG" >&2 || true; die "postgresql did not start"; }
	echo "$port" >"$PG_PORTFILE"

	log "creating role $PG_USER and database $PG_DB"
	as_pg "$bindir/psql" -h "$PG_SOCK_DIR" -p "$port" -U postgres -d postgres -v ON_ERROR_STOP=1 -qAt >/dev/null <<-EOF
		CREATE ROLE $PG_USER LOGIN;
		CREATE DATABASE $PG_DB OWNER $PG_USER;
	EOF
}

stop_postgresql() {
	local bindir pgpid i
	pgpid=$(postmaster_pid 2>/dev/null) || pgpid=""
	if [[ -z "$pgpid" ]] || ! pid_is "$pgpid" postgres; then
		return 0
	fi
	# only touch the postmaster this script started (listed in $PIDS_FILE)
	if [[ -f "$PIDS_FILE" ]] && ! grep -qx "$pgpid" "$PIDS_FILE"; then
		echo "mongo-wire: postmaster $pgpid is not in $PIDS_FILE; leaving it alone" >&2
		return 0
	fi
	log "stopping postgresql (pid $pgpid)"
	if bindir=$(pg_bindir); then
		as_pg "$bindir/pg_ctl" -D "$PGDATA_DIR" -m fast -w -t 30 stop >/dev/null 2>&1 || true
	fi
	if pid_is "$pgpid" postgres; then
		kill -INT "$pgpid" 2>/dev/null || true
		for ((i = 0; i < 100; i++)); do pid_is "$pgpid" postgres || break; sleep 0.1; done
	fi
	pid_is "$pgpid" postgres && kill -KILL "$pgpid" 2>/dev/null || true
}

# ---------------------------------------------------------------- ferretdb

build_ferretdb() {
	if [[ -x "$FERRETDB_BIN" ]]; then
		log "ferretdb binary cached at $FERRETDB_BIN"
		return 0
	fi
	command -v go >/dev/null || die "go not found in PATH"

	local work dir
	work="$STATE/ferretdb-build"
	rm -rf "$work"
	mkdir -p "$work/dl"

	log "downloading $FERRETDB_MODULE@$FERRETDB_VERSION (go module proxy)"
	# run outside any module so no go.mod/go.sum of the project is touched
	dir=$(cd "$work/dl" && GOWORK=off GOFLAGS="${GOFLAGS:-} -mod=mod" \
		go mod download -json "$FERRETDB_MODULE@$FERRETDB_VERSION" |
		sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
	[[ -n "$dir" && -f "$dir/go.mod" ]] || die "go mod download gave no source dir for $FERRETDB_MODULE@$FERRETDB_VERSION"

	cp -R "$dir" "$work/src"
	chmod -R u+w "$work/src"
	# FerretDB embeds build/version/*.txt; version.txt is normally generated from git
	if [[ ! -s "$work/src/build/version/version.txt" ]]; then
		echo "$FERRETDB_VERSION" >"$work/src/build/version/version.txt"
	fi
	echo "kiln-ci" >"$work/src/build/version/package.txt"

	# Build tags: the PostgreSQL backend is on by default (off only with
	# ferretdb_no_postgresql); ferretdb_no_sqlite skips the large SQLite backend
	# we do not use. No ferretdb_debug / -race: a normal release-like build.
	log "building ferretdb $FERRETDB_VERSION (go build, tags: ferretdb_no_sqlite)"
	(cd "$work/src" && GOWORK=off GOFLAGS="${GOFLAGS:-} -mod=mod" CGO_ENABLED=0 \
		go build -trimpath -tags ferretdb_no_sqlite -o "$FERRETDB_BIN.tmp" ./cmd/ferretdb) ||
		die "go build of ferretdb failed"
	mv "$FERRETDB_BIN.tmp" "$FERRETDB_BIN"
	rm -rf "$work"
	log "built $("$FERRETDB_BIN" --version 2>/dev/null | head -n 1 || echo "$FERRETDB_BIN")"
}

start_ferretdb() {
	local fpid port pgport i v unset_vars=()
	if fpid=$(ferretdb_pid) && pid_is "$fpid" ferretdb && port=$(ferretdb_port); then
		log "ferretdb already running (pid $fpid, port $port)"
		return 0
	fi
	pgport=$(cat "$PG_PORTFILE")
	port=$(pick_port 27017 27018 27117) || die "no free port for ferretdb"
	mkdir -p "$FERRETDB_STATE_DIR"

	# default flags otherwise; drop inherited FERRETDB_* variables so that
	# nothing (e.g. FERRETDB_TEST_ENABLE_NESTED_PUSHDOWN) changes the defaults
	while IFS= read -r v; do unset_vars+=("$v"); done < <(env | sed -n 's/^\(FERRETDB_[A-Za-z0-9_]*\)=.*/\1/p')

	log "starting ferretdb on 127.0.0.1:$port (postgresql 127.0.0.1:$pgport, log $FERRETDB_LOG)"
	: >"$FERRETDB_LOG"
	# the subshell execs ferretdb, so $! is ferretdb's own PID
	(
		for v in "${unset_vars[@]}"; do unset "$v"; done
		export DO_NOT_TRACK=1
		exec "$FERRETDB_BIN" \
			--handler=postgresql \
			--postgresql-url="postgres://$PG_USER@127.0.0.1:$pgport/$PG_DB" \
			--listen-addr="127.0.0.1:$port" \
			--debug-addr=- \
			--state-dir="$FERRETDB_STATE_DIR" \
			--telemetry=disable
	) </dev/null >>"$FERRETDB_LOG" 2>&1 &
	fpid=$!
	echo "$fpid" >"$FERRETDB_PIDFILE"
	echo "$port" >"$STATE/ferretdb.port"

	log "waiting for ferretdb to accept connections (up to ${WAIT_SECS}s)"
	for ((i = 0; i < WAIT_SECS * 5; i++)); do
		# plain liveness here: comm only reads "ferretdb" once the subshell has exec'ed
		if ! kill -0 "$fpid" 2>/dev/null; then
			echo "---- $FERRETDB_LOG" >&2; cat "$FERRETDB_LOG" >&2
			die "ferretdb exited during startup"
		fi
		if port_in_use "$port"; then
			return 0
		fi
		sleep 0.2
	done
	echo "---- $FERRETDB_LOG" >&2; cat "$FERRETDB_LOG" >&2
	kill -TERM "$fpid" 2>/dev/null || true
	die "ferretdb did not accept connections on 127.0.0.1:$port within ${WAIT_SECS}s"
}

stop_ferretdb() {
	local fpid i
	fpid=$(ferretdb_pid 2>/dev/null) || fpid=""
	if [[ -n "$fpid" ]] && pid_is "$fpid" ferretdb; then
		log "stopping ferretdb (pid $fpid)"
		kill -TERM "$fpid" 2>/dev/null || true
		for ((i = 0; i < 100; i++)); do pid_is "$fpid" ferretdb || break; sleep 0.1; done
		pid_is "$fpid" ferretdb && kill -KILL "$fpid" 2>/dev/null || true
	fi
	rm -f "$FERRETDB_PIDFILE" "$STATE/ferretdb.port"
}

# ---------------------------------------------------------------- commands

cmd_start() {
	mkdir -p "$STATE"
	install_postgresql
	build_ferretdb
	start_postgresql
	write_pids
	start_ferretdb
	write_pids
	local uri
	uri="mongodb://127.0.0.1:$(ferretdb_port)/"
	echo "export MONGODB_URI=$uri" >"$ENV_FILE"
	log "MongoDB wire server (FerretDB $FERRETDB_VERSION) ready: $uri"
	log "env: source $ENV_FILE   pids: $PIDS_FILE ($(tr '\n' ' ' <"$PIDS_FILE"))"
	echo "$uri"
}

cmd_stop() {
	stop_ferretdb
	stop_postgresql
	rm -f "$PIDS_FILE" "$ENV_FILE"
	log "stopped"
}

cmd_status() {
	local fpid pgpid rc=0
	if fpid=$(ferretdb_pid 2>/dev/null) && pid_is "$fpid" ferretdb; then
		echo "ferretdb: running (pid $fpid, mongodb://127.0.0.1:$(ferretdb_port)/)"
	else
		echo "ferretdb: not running"; rc=1
	fi
	if pgpid=$(postmaster_pid 2>/dev/null) && pid_is "$pgpid" postgres; then
		echo "postgresql: running (pid $pgpid, 127.0.0.1:$(cat "$PG_PORTFILE" 2>/dev/null))"
	else
		echo "postgresql: not running"; rc=1
	fi
	return $rc
}

case "${1:-start}" in
start) cmd_start ;;
stop) cmd_stop ;;
status) cmd_status ;;
*) die "usage: $0 [start|stop|status]" ;;
esac
