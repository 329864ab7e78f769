package sqlite

// Everything that depends on which database/sql SQLite driver is linked in
// lives in this file: the import, the driver name, the DSN syntax and the
// per-connection PRAGMAs.
//
// Switching to the fallback driver, modernc.org/sqlite v1.60.1: replace the
// import below with
//
//	_ "modernc.org/sqlite" // registers "sqlite"
//
// and set driverName to "sqlite". modernc.org/sqlite understands the same
// "file:" URI with "_pragma=name(value)" and "_txlock=immediate" parameters,
// but not the buffered WAL's VFS (internal/walbuf, written against this
// driver's vfs package): dsn must then leave out its "vfs" parameter.
// (Also add the module to go.mod.)
//
// github.com/ncruces/go-sqlite3/embed is deliberately not imported: since
// v0.30 the SQLite build is compiled into the driver (wasm2go) and that
// package is an empty, deprecated shim whose init prints a warning.

import (
	"net/url"
	"path/filepath"
	"strconv"
	"strings"

	_ "github.com/ncruces/go-sqlite3/driver" // registers "sqlite3"

	"github.com/kiln-fhir/kiln/fhirserver/store/sqlite/internal/walbuf"
)

// driverName is the database/sql driver the store opens.
const driverName = "sqlite3"

// busyTimeoutMS bounds how long a connection waits on a lock held by another
// connection before it reports SQLITE_BUSY. In-process writers never wait on
// each other (they share one connection, see Open); this covers readers
// during WAL recovery and other processes such as a backup tool.
const busyTimeoutMS = 5000

// defaultSynchronous is the durability level of commits. FULL syncs the WAL
// on every commit, so an acknowledged write survives power loss; NORMAL
// would only guarantee consistency (the last commits may roll back after a
// power cut). Benchmarks open with NORMAL to measure the difference.
const defaultSynchronous = "FULL"

// cacheKiB is the page cache of each connection by role, as a negative
// cache_size (KiB): the single writer gets more, readers are up to 8.
var cacheKiB = [...]int{writerRole: -65536, readerRole: -32768, migratorRole: -65536}

// role says which pool a connection belongs to.
type role int

const (
	writerRole role = iota
	readerRole
	// migratorRole is a writer without the buffered WAL, for the schema
	// migrations Open runs before the pools open: they rewrite whole
	// tables, and must be free to spill pages to the WAL before they
	// commit (internal/walbuf).
	migratorRole
)

// dsn builds the data source name for path. Both pools use the same
// database file; readers are made query_only so that a bug can never turn
// the reader pool into a second writer (which could then meet SQLITE_BUSY).
// extra are more PRAGMAs, name(value), for this pool alone.
func dsn(path string, r role, synchronous string, extra ...string) string {
	// busy_timeout first, as the driver documentation asks: later PRAGMAs may
	// already need a lock.
	pragmas := []string{
		"busy_timeout(" + strconv.Itoa(busyTimeoutMS) + ")",
	}
	writes := r == writerRole || r == migratorRole
	if writes {
		// journal_mode is persistent in the file; a writer connects first
		// (Open) and switches it, readers then find the file in WAL mode.
		// journal_size_limit truncates the WAL after checkpoints so a burst
		// of writes does not leave a large file behind.
		pragmas = append(pragmas, "journal_mode(WAL)", "journal_size_limit(67108864)")
		// Freed space is zeroed: an UPDATE or DELETE otherwise leaves the
		// old cell's bytes in the unused space of its page (and freed
		// pages on the freelist) until later writes happen to reuse it,
		// which is how an erased patient's name survived in the pages of
		// search_keys and resource_versions (docs/erasure.md, with its
		// measured cost). Per connection: every writing connection sets it.
		pragmas = append(pragmas, "secure_delete(1)")
	}
	pragmas = append(pragmas,
		"synchronous("+synchronous+")",
		"foreign_keys(1)",
		// A page cache per connection (negative: KiB). The default 2 MB
		// is far smaller than the working set of the index b-trees: reads
		// would go back to the OS for hot interior pages. (The writer's
		// grows past it for a larger transaction: see cache_spill below.)
		"cache_size("+strconv.Itoa(cacheKiB[r])+")",
	)

	if r == readerRole {
		pragmas = append(pragmas, "query_only(1)")
	}
	pragmas = append(pragmas, extra...)

	q := url.Values{"_pragma": pragmas}
	if r == writerRole && (synchronous == "FULL" || synchronous == "EXTRA") {
		// The buffered WAL and what makes it safe: see internal/walbuf.
		walbuf.Register()
		q.Set("vfs", walbuf.VFSName)
		q.Add("_pragma", "cache_spill(0)")
	}
	if writes {
		// Every database/sql transaction on the writer starts with BEGIN
		// IMMEDIATE: it takes the write lock up front, so a transaction never
		// fails halfway when upgrading from a read lock.
		q.Set("_txlock", "immediate")
	}

	p := filepath.ToSlash(path)
	if !strings.HasPrefix(p, "/") {
		p = "/" + p // Windows drive paths: file:///C:/...
	}
	u := url.URL{Scheme: "file", Path: p, RawQuery: q.Encode()}
	return u.String()
}
