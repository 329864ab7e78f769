// Package sqlite is Kiln's embedded default store: one SQLite database file
// in WAL mode, implementing store.Store.
//
// Concurrency model: all writes go through a pool of exactly one connection
// whose transactions start with BEGIN IMMEDIATE, so in-process writers queue
// in database/sql instead of meeting SQLITE_BUSY, and the compare-and-swap of
// Put is serialised. Reads use a separate pool of query_only connections that
// WAL lets run concurrently with the writer.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/store"
	"github.com/kiln-fhir/kiln/fhirserver/store/sqlite/internal/compile"
)

// writerCheckpointPages is the WAL size, in pages, past which the writer
// checkpoints (see open).
const writerCheckpointPages = 8192

// Store is the SQLite backend. It is safe for concurrent use.
type Store struct {
	path   string
	writer *sql.DB // one connection: every write and every Transact
	reader *sql.DB // several query_only connections

	rq readQueries  // prepared on reader
	wq readQueries  // the same reads, prepared on writer (inside Transact)
	pq writeQueries // prepared on writer

	searchStmts stmtCache // search shapes, prepared on reader
	estimates   estimateCache
	tune        compile.Tuning

	closeOnce sync.Once
	closeErr  error
}

var _ store.Store = (*Store)(nil)

// options are the knobs tests and benchmarks turn; Open uses the defaults.
type options struct {
	synchronous string
	tune        *compile.Tuning // nil: compile.DefaultTuning
	// keepFreed turns secure_delete off on the writer: benchmarks only,
	// to measure what zeroing freed space costs.
	keepFreed bool
}

// Open opens (creating if needed) the database file at path, applies any
// pending schema migrations and prepares the statements. The parent folder is
// created with mode 0700 if it is missing: the file holds health data.
func Open(ctx context.Context, path string) (*Store, error) {
	return open(ctx, path, options{synchronous: defaultSynchronous})
}

func open(ctx context.Context, path string, o options) (_ *Store, err error) {
	abs, err := createPrivate(path)
	if err != nil {
		return nil, fmt.Errorf("sqlite store: open %s: %w", path, err)
	}
	s := &Store{path: abs, tune: compile.DefaultTuning, estimates: estimateCache{now: time.Now}}
	if o.tune != nil {
		s.tune = *o.tune
	}
	defer func() {
		if err != nil {
			s.closeAll()
		}
	}()

	// A migrator connects first: it switches the file to WAL and migrates
	// the schema before the pools open (on a connection of its own, see
	// migratorRole). A file system without shared memory support (no WAL)
	// is refused rather than run with readers blocking the writer.
	if err := migrateWith(ctx, abs, o.synchronous); err != nil {
		return nil, fmt.Errorf("%w (database %s)", err, path)
	}

	// SQLite checkpoints the WAL into the database inside the commit that
	// takes it past this many pages (1000 by default), holding the
	// writer. Fewer, larger checkpoints copy a page rewritten by several
	// commits once: transactions of 100 resources ran 7-11 % faster at
	// 4096 and 8192 pages than at 1000 (BenchmarkTransaction100,
	// alternating runs), for a WAL of up to 32 MB.
	checkpoints := "wal_autocheckpoint(" + strconv.Itoa(writerCheckpointPages) + ")"
	writerPragmas := []string{checkpoints}
	if o.keepFreed {
		writerPragmas = append(writerPragmas, "secure_delete(0)")
	}
	if s.writer, err = openWriterPool(ctx, abs, writerRole, o.synchronous, writerPragmas...); err != nil {
		return nil, fmt.Errorf("sqlite store: open %s: %w", path, err)
	}

	s.reader, err = sql.Open(driverName, dsn(abs, readerRole, o.synchronous))
	if err != nil {
		return nil, fmt.Errorf("sqlite store: open %s: %w", path, err)
	}
	// Each connection carries its own SQLite instance and page cache, so
	// the pool is sized to the CPUs, not to the clients; four per CPU
	// because a query on a large database waits on reads from the OS as
	// much as it computes (at 1M Observations, 8 connections on 2 CPUs
	// served 20 % more searches than 2).
	n := min(max(4*runtime.GOMAXPROCS(0), 4), 16)
	s.reader.SetMaxOpenConns(n)
	s.reader.SetMaxIdleConns(n)
	s.reader.SetConnMaxLifetime(0)
	s.reader.SetConnMaxIdleTime(0)

	if err := s.rq.prepare(ctx, s.reader); err != nil {
		return nil, fmt.Errorf("sqlite store: open %s: prepare reads: %w", path, err)
	}
	if err := s.wq.prepare(ctx, s.writer); err != nil {
		return nil, fmt.Errorf("sqlite store: open %s: prepare reads on writer: %w", path, err)
	}
	if err := s.pq.prepare(ctx, s.writer); err != nil {
		return nil, fmt.Errorf("sqlite store: open %s: prepare writes: %w", path, err)
	}
	return s, nil
}

// Close closes both pools. Readers close first, so the writer's is the last
// connection to the file: SQLite then checkpoints the WAL into the database
// and removes it. Calls after Close fail; Close itself is idempotent.
func (s *Store) Close() error {
	s.closeOnce.Do(func() { s.closeErr = s.closeAll() })
	return s.closeErr
}

func (s *Store) closeAll() error {
	var errs []error
	errs = append(errs, s.rq.close(), s.wq.close(), s.pq.close(), s.searchStmts.close())
	if s.reader != nil {
		errs = append(errs, s.reader.Close())
	}
	if s.writer != nil {
		errs = append(errs, s.writer.Close())
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("sqlite store: close %s: %w", s.path, err)
	}
	return nil
}

// Ping runs a trivial query on the reader pool.
func (s *Store) Ping(ctx context.Context) error {
	var one int
	if err := s.rq.ping.QueryRowContext(ctx).Scan(&one); err != nil {
		return wrapErr(ctx, "ping", err)
	}
	return nil
}

// Read returns the current version: one primary-key lookup in resources and
// one rowid lookup of the version it points at.
func (s *Store) Read(ctx context.Context, typ, id string) (*store.Version, error) {
	return read(ctx, s.rq.read, typ, id)
}

// VRead returns one version through the UNIQUE (type, id, version) index.
func (s *Store) VRead(ctx context.Context, typ, id string, version int64) (*store.Version, error) {
	return vread(ctx, s.rq.vread, typ, id, version)
}

// History pages through versions newest first; see history.go.
func (s *Store) History(ctx context.Context, q store.HistoryQuery) (*store.HistoryPage, error) {
	return history(ctx, q, &s.rq, nil)
}

// Put applies w in its own IMMEDIATE transaction.
func (s *Store) Put(ctx context.Context, w store.Write) error {
	if err := w.Check(); err != nil {
		return fmt.Errorf("sqlite store: put: %w", err)
	}
	tx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		return wrapErr(ctx, "put: begin", err)
	}
	defer tx.Rollback() // no-op after Commit
	if err := s.put(ctx, newWriteTx(tx), w); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return wrapErr(ctx, "put: commit", err)
	}
	return nil
}

// put is the compare-and-swap, inside a write transaction the caller owns:
// check the pointer, append the version, move the pointer. The write lock
// is held from BEGIN IMMEDIATE, so nothing can change the pointer between
// the check and the move.
//
// A create (version 1) reads nothing first: its version row and its
// pointer are plain INSERTs, and the uniqueness of (type, id, version) and
// of (type, id) refuses them when the resource exists. Most writes are
// creates, and that read was 4 % of the writer's instructions per
// Observation (perf stat on BenchmarkPutWithRows).
func (s *Store) put(ctx context.Context, tx *writeTx, w store.Write) error {
	fail := func(step string, err error) error {
		return wrapErr(ctx, fmt.Sprintf("put %s%s", writeRef(w), step), err)
	}
	// current is the pointer: version 0 when there is none.
	current := func() (version, rid int64, err error) {
		st := tx.stmt(s.pq.current)
		err = st.QueryRowContext(ctx, w.Type, w.ID).Scan(&version, &rid)
		if errors.Is(err, sql.ErrNoRows) {
			return 0, 0, nil
		}
		if err != nil {
			return 0, 0, fail("", err)
		}
		return version, rid, nil
	}
	conflict := func(cur int64) error {
		return fmt.Errorf("sqlite store: put %s: current version is %d: %w", writeRef(w), cur, store.ErrConflict)
	}
	// refused explains a failed INSERT of a create: a conflict if the
	// resource exists, else err itself (a failed statement leaves the
	// transaction usable).
	refused := func(step string, err error) error {
		if ctx.Err() != nil {
			return fail(step, err)
		}
		cur, _, cerr := current()
		switch {
		case cerr != nil:
			return errors.Join(fail(step, err), cerr)
		case cur != 0:
			return conflict(cur)
		}
		return fail(step, err)
	}

	created := w.Version == 1
	var rid int64
	if !created {
		cur, r, err := current()
		if err != nil {
			return err
		}
		if cur != w.Version-1 {
			return conflict(cur)
		}
		rid = r
	}

	lu := micros(w.LastUpdated)
	// A tombstone's body is SQL NULL. A nil []byte would bind as an empty
	// BLOB, which the schema's CHECK rejects, hence the untyped nil.
	var body any
	if !w.Deleted {
		body = w.Body
	}
	insert := tx.stmt(s.pq.insert)
	res, err := insert.ExecContext(ctx, w.Type, w.ID, w.Version, lu, string(w.Method), w.Deleted, body)
	if err != nil && created {
		return refused(": insert version", err)
	}
	if err != nil {
		return fail(": insert version", err)
	}
	seq, err := res.LastInsertId()
	if err != nil {
		return fail(": insert version", err)
	}

	if created {
		st := tx.stmt(s.pq.create)
		res, err := st.ExecContext(ctx, w.Type, w.ID, w.Version, seq, w.Deleted, lu)
		if err != nil {
			// A pointer without its first version: the version row just
			// added must not stay behind if the caller goes on.
			del := tx.stmt(s.pq.dropVersion)
			if _, derr := del.ExecContext(ctx, seq); derr != nil {
				return errors.Join(fail(": move pointer", err), fail(": undo version", derr))
			}
			return refused(": move pointer", err)
		}
		// rid is the rowid of resources.
		if rid, err = res.LastInsertId(); err != nil {
			return fail(": move pointer", err)
		}
	} else {
		st := tx.stmt(s.pq.update)
		if _, err := st.ExecContext(ctx, rid, w.Version, seq, w.Deleted, lu); err != nil {
			return fail(": move pointer", err)
		}
	}
	if err := s.putRows(ctx, tx, w, rid, created); err != nil {
		return fail(": index rows", err)
	}
	return nil
}

// writeTx is a write transaction with the writer's statements bound to it
// once each: Tx.StmtContext on every use allocated and took locks for
// every row written. Bound statements close with the transaction. Not
// safe for concurrent use (tx serialises the goroutines sharing it).
type writeTx struct {
	*sql.Tx
	bound map[*sql.Stmt]*sql.Stmt
}

func newWriteTx(tx *sql.Tx) *writeTx {
	return &writeTx{Tx: tx, bound: make(map[*sql.Stmt]*sql.Stmt)}
}

// stmt is st bound to the transaction. Binding ignores the caller's
// context on purpose: the statement is kept for the calls after this one,
// and one bound under a context already done would carry its error to
// all of them. Each execution takes its own context.
func (w *writeTx) stmt(st *sql.Stmt) *sql.Stmt {
	b, ok := w.bound[st]
	if !ok {
		b = w.StmtContext(context.Background(), st)
		w.bound[st] = b
	}
	return b
}

func writeRef(w store.Write) string {
	return fmt.Sprintf("%s/%s version %d", w.Type, w.ID, w.Version)
}

// Transact runs fn inside one IMMEDIATE transaction on the writer
// connection. Reads through the Tx see its own writes.
//
// fn must use only tx: the Store's own Put (or a nested Transact) would
// wait for the writer connection that fn is holding, until its context
// ends.
func (s *Store) Transact(ctx context.Context, fn func(tx store.Tx) error) error {
	sqlTx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		return wrapErr(ctx, "transact: begin", err)
	}
	defer sqlTx.Rollback() // also on panic in fn
	t := &tx{s: s, tx: newWriteTx(sqlTx)}
	if err := fn(t); err != nil {
		return err // the contract: fn's error, as is
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := sqlTx.Commit(); err != nil {
		return wrapErr(ctx, "transact: commit", err)
	}
	return nil
}

// tx is store.Tx over one *sql.Tx.
type tx struct {
	s  *Store
	tx *writeTx
	// mu serialises every call (and the commit): goroutines sharing a Tx
	// share one connection and its statements, and must not interleave
	// the check and the move of a Put's compare-and-swap.
	mu sync.Mutex
}

func (t *tx) Read(ctx context.Context, typ, id string) (*store.Version, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return read(ctx, t.tx.stmt(t.s.wq.read), typ, id)
}

func (t *tx) VRead(ctx context.Context, typ, id string, version int64) (*store.Version, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return vread(ctx, t.tx.stmt(t.s.wq.vread), typ, id, version)
}

func (t *tx) History(ctx context.Context, q store.HistoryQuery) (*store.HistoryPage, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return history(ctx, q, &t.s.wq, t.tx.Tx)
}

func (t *tx) Put(ctx context.Context, w store.Write) error {
	if err := w.Check(); err != nil {
		return fmt.Errorf("sqlite store: put: %w", err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.s.put(ctx, t.tx, w)
}

func read(ctx context.Context, st *sql.Stmt, typ, id string) (*store.Version, error) {
	v := &store.Version{Type: typ, ID: id}
	var lu int64
	var method string
	err := st.QueryRowContext(ctx, typ, id).Scan(&v.Version, &lu, &method, &v.Deleted, &v.Body)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("sqlite store: read %s/%s: %w", typ, id, store.ErrNotFound)
	}
	if err != nil {
		return nil, wrapErr(ctx, "read "+typ+"/"+id, err)
	}
	v.LastUpdated, v.Method = fromMicros(lu), store.Method(method)
	return v, nil
}

func vread(ctx context.Context, st *sql.Stmt, typ, id string, version int64) (*store.Version, error) {
	v := &store.Version{Type: typ, ID: id, Version: version}
	var lu int64
	var method string
	err := st.QueryRowContext(ctx, typ, id, version).Scan(&lu, &method, &v.Deleted, &v.Body)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("sqlite store: vread %s/%s/_history/%d: %w", typ, id, version, store.ErrNotFound)
	}
	if err != nil {
		return nil, wrapErr(ctx, fmt.Sprintf("vread %s/%s/_history/%d", typ, id, version), err)
	}
	v.LastUpdated, v.Method = fromMicros(lu), store.Method(method)
	return v, nil
}

// micros is the stored form of a timestamp: unix microseconds, rounded down.
// FHIR instants carry at most that precision in practice (the body keeps the
// exact text); LastUpdated comes back truncated to the microsecond.
func micros(t time.Time) int64 { return t.UnixMicro() }

func fromMicros(us int64) time.Time { return time.UnixMicro(us).UTC() }

// wrapErr adds context to err. When ctx is done the result also matches
// ctx.Err(): SQLite reports an interrupted statement as SQLITE_INTERRUPT,
// which callers should not need to know about.
func wrapErr(ctx context.Context, op string, err error) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("sqlite store: %s: %w (%w)", op, cerr, err)
	}
	return fmt.Errorf("sqlite store: %s: %w", op, err)
}
