package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"

	"github.com/kiln-fhir/kiln/fhirserver/search"
)

// applicationID marks a database file as Kiln's ("KILN" in ASCII), so Open
// refuses to add tables to some unrelated SQLite file it was pointed at.
const applicationID = 0x4B494C4E

// migrations is the ordered schema history. The database's PRAGMA
// user_version is the number of migrations applied; Open applies the missing
// ones in one transaction. Never edit an entry that has shipped: append a new
// one.
var migrations = [][]string{
	// 1: versions and the current-version pointer.
	{
		// resource_versions holds every version of every resource, exactly
		// once. Only erasure (Rewrite) updates its rows and only the
		// retention purge deletes them.
		//
		// seq is the insertion order. AUTOINCREMENT (rather than a plain
		// rowid) guarantees a seq is never reused, even after the newest row
		// is erased; history cursors and their snapshot bound (maxSeq) rely
		// on seq only ever growing.
		//
		// last_updated is unix microseconds, UTC.
		// STRICT makes SQLite reject values of the wrong type (e.g. a body
		// bound as TEXT) instead of silently converting them.
		`CREATE TABLE resource_versions (
			seq          INTEGER PRIMARY KEY AUTOINCREMENT,
			type         TEXT    NOT NULL,
			id           TEXT    NOT NULL,
			version      INTEGER NOT NULL CHECK (version >= 1),
			last_updated INTEGER NOT NULL,
			method       TEXT    NOT NULL,
			deleted      INTEGER NOT NULL CHECK (deleted IN (0, 1)),
			body         BLOB,
			CHECK ((deleted = 1) = (body IS NULL)),
			UNIQUE (type, id, version)
		) STRICT`,
		// System history: ORDER BY last_updated DESC, seq DESC. seq is the
		// rowid, which every index carries as its last column, so this index
		// is ordered by (last_updated, seq) without storing seq twice.
		`CREATE INDEX resource_versions_by_time ON resource_versions (last_updated)`,
		// Type history: (type, last_updated, seq) for the same reason.
		`CREATE INDEX resource_versions_by_type_time ON resource_versions (type, last_updated)`,
		// Instance history: without it a page would read and sort every
		// version of the resource (bodies included), or walk the whole type.
		`CREATE INDEX resource_versions_by_instance_time ON resource_versions (type, id, last_updated)`,
		// resources points at each resource's current version: the row the
		// compare-and-swap of Put checks, and that search will join against.
		// seq lets Read reach the version row by rowid. WITHOUT ROWID keeps
		// the row inside the primary-key b-tree: one lookup.
		`CREATE TABLE resources (
			type         TEXT    NOT NULL,
			id           TEXT    NOT NULL,
			version      INTEGER NOT NULL,
			seq          INTEGER NOT NULL REFERENCES resource_versions (seq),
			deleted      INTEGER NOT NULL,
			last_updated INTEGER NOT NULL,
			PRIMARY KEY (type, id)
		) STRICT, WITHOUT ROWID`,
	},
	// 2: search. resources gets a stable integer id (rid), the order search
	// results fall back on and what index rows point at; one index table
	// per row shape of search.Rows (not one per parameter).
	{
		// Rebuilt, as SQLite cannot add a primary key. rid is never reused:
		// a delete is a tombstone pointer, and the retention purge never
		// deletes the row holding the highest rid (see Purge).
		`CREATE TABLE resources_new (
			rid          INTEGER PRIMARY KEY,
			type         TEXT    NOT NULL,
			id           TEXT    NOT NULL,
			version      INTEGER NOT NULL,
			seq          INTEGER NOT NULL REFERENCES resource_versions (seq),
			deleted      INTEGER NOT NULL,
			last_updated INTEGER NOT NULL,
			UNIQUE (type, id)
		) STRICT`,
		`INSERT INTO resources_new (type, id, version, seq, deleted, last_updated)
			SELECT type, id, version, seq, deleted, last_updated FROM resources ORDER BY seq`,
		`DROP TABLE resources`,
		`ALTER TABLE resources_new RENAME TO resources`,
		// A type-level search without a selective clause walks the live
		// resources of one type in rid order (the index carries rid as its
		// last column), testing each without reading its table row.
		`CREATE INDEX resources_by_type ON resources (type, deleted)`,
		// Equality keys "param\x1fvalue". The primary key serves exact and
		// prefix lookups (then type, then rid: one key's matches come out
		// in rid order, so a page of them needs no sort); by_rid serves the
		// per-resource probes, includes and the delete on update. A key is
		// unique per resource (Rows.Keys has no duplicates).
		`CREATE TABLE search_keys (
			key  TEXT    NOT NULL,
			type TEXT    NOT NULL,
			rid  INTEGER NOT NULL,
			PRIMARY KEY (key, type, rid)
		) STRICT, WITHOUT ROWID`,
		`CREATE INDEX search_keys_by_rid ON search_keys (rid, key)`,
		// Date ranges [low, high) in unix microseconds. The primary key
		// answers probes of one resource; by_low and by_high the range
		// scans when a date clause drives the search. Duplicate rows carry
		// no information, so they are dropped (INSERT OR IGNORE).
		`CREATE TABLE search_dates (
			rid   INTEGER NOT NULL,
			param TEXT    NOT NULL,
			low   INTEGER NOT NULL,
			high  INTEGER NOT NULL,
			type  TEXT    NOT NULL,
			PRIMARY KEY (rid, param, low, high)
		) STRICT, WITHOUT ROWID`,
		`CREATE INDEX search_dates_by_low ON search_dates (param, type, low, high)`,
		`CREATE INDEX search_dates_by_high ON search_dates (param, type, high, low)`,
		// Number and quantity ranges [low, high], inclusive.
		`CREATE TABLE search_numbers (
			rid   INTEGER NOT NULL,
			param TEXT    NOT NULL,
			low   REAL    NOT NULL,
			high  REAL    NOT NULL,
			type  TEXT    NOT NULL,
			PRIMARY KEY (rid, param, low, high)
		) STRICT, WITHOUT ROWID`,
		// Only by_low: numbers seldom lead a search (a value with no code
		// or subject is rarely asked for), and a quantity has several unit
		// forms, so every index here costs several inserts per resource.
		`CREATE INDEX search_numbers_by_low ON search_numbers (param, type, low, high)`,
		// One row per parameter a resource has any entry for: _sort reads
		// lo (ascending) or hi (descending), :missing tests presence. ANY
		// keeps each value's own type (text, integer or real).
		`CREATE TABLE search_sorts (
			rid   INTEGER NOT NULL,
			param TEXT    NOT NULL,
			type  TEXT    NOT NULL,
			lo    ANY,
			hi    ANY,
			PRIMARY KEY (rid, param)
		) STRICT, WITHOUT ROWID`,
	},
	// 3: a sorted search whose clauses match many resources walks the sort
	// rows of its type in order (ascending by lo, descending by hi),
	// testing each resource, until the page is full. rid (also carried as
	// part of the primary key) is spelled out to order ties.
	{
		`CREATE INDEX search_sorts_by_lo ON search_sorts (param, type, lo, rid)`,
		`CREATE INDEX search_sorts_by_hi ON search_sorts (param, type, hi, rid)`,
	},
	// 4: records, the server's own state (store.Records) beside the
	// resources: one row per record, its current version only. expires is
	// unix microseconds, 0 = never; an expired row counts as absent and is
	// deleted lazily by the next PutRecord.
	{
		`CREATE TABLE records (
			kind    TEXT    NOT NULL,
			id      TEXT    NOT NULL,
			version INTEGER NOT NULL,
			value   BLOB    NOT NULL,
			expires INTEGER NOT NULL DEFAULT 0,
			PRIMARY KEY (kind, id)
		) STRICT, WITHOUT ROWID`,
		// The purge of expired rows reads only the rows it deletes.
		`CREATE INDEX records_by_expiry ON records (expires) WHERE expires > 0`,
	},
	// 5: named counters (store.Sequencer): one row per counter, holding
	// the last value handed out.
	{
		`CREATE TABLE sequences (
			name  TEXT    NOT NULL PRIMARY KEY,
			value INTEGER NOT NULL
		) STRICT, WITHOUT ROWID`,
	},
	// 6: the sort values of a resource are one row, a JSON object
	// {"param": [lo, hi], ...} (lo, hi: text, integer or real; null for a
	// composite's presence), instead of one row per parameter with two
	// indexes over it: those were 3 of the ~5 b-tree inserts of every
	// index row a write added, and cost a third of a transaction's commit
	// rate. A sort by a date parameter walks search_dates in order
	// instead; other sorts read the values of the matches.
	//
	// Reals are rewritten with 17 significant digits (json_array would
	// keep 15, rounding ±max float to infinity); text is cut as the
	// parameter's keys are (search.MaxKeyBytes), which a sort by a string
	// now reads in order.
	{
		`CREATE TABLE search_sort_values (
			rid  INTEGER PRIMARY KEY,
			vals TEXT    NOT NULL
		) STRICT`,
		`INSERT INTO search_sort_values (rid, vals)
			SELECT rid, json_group_object(param, json('[' || ` + sortJSON("lo") + ` || ',' || ` + sortJSON("hi") + ` || ']'))
			FROM search_sorts GROUP BY rid`,
		`DROP TABLE search_sorts`,
	},
}

// sortJSON is the SQL of the JSON text of column col of search_sorts.
func sortJSON(col string) string {
	return `CASE typeof(` + col + `) WHEN 'real' THEN printf('%!.17g', ` + col + `) WHEN 'integer' THEN ` + col +
		` WHEN 'text' THEN json_quote(` + cutText(col) + `) ELSE 'null' END`
}

// cutText is the SQL of text column col of search_sorts cut as search's
// key function cuts the value of a key of param: to the key's byte limit,
// back to the start of a character.
func cutText(col string) string {
	b := `CAST(` + col + ` AS BLOB)`
	m := `(` + strconv.Itoa(search.MaxKeyBytes) + ` - length(CAST(param AS BLOB)) - 1)`
	starts := func(at string) string { return `substr(` + b + `, ` + at + `, 1) NOT BETWEEN x'80' AND x'BF'` }
	return `CASE WHEN length(` + b + `) <= ` + m + ` THEN ` + col + ` ELSE CAST(substr(` + b + `, 1, CASE` +
		` WHEN ` + starts(m+`+1`) + ` THEN ` + m +
		` WHEN ` + starts(m) + ` THEN ` + m + `-1` +
		` WHEN ` + starts(m+`-1`) + ` THEN ` + m + `-2` +
		` ELSE ` + m + `-3 END) AS TEXT) END`
}

// schemaVersion is the user_version this build writes.
func schemaVersion() int { return len(migrations) }

// migrateWith opens a migrator connection to abs (switching it to WAL),
// migrates, and closes it.
func migrateWith(ctx context.Context, abs, synchronous string) error {
	db, err := openWriterPool(ctx, abs, migratorRole, synchronous)
	if err != nil {
		return fmt.Errorf("sqlite store: migrate: open: %w", err)
	}
	err = migrate(ctx, db)
	if cerr := db.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("sqlite store: migrate: close: %w", cerr)
	}
	return err
}

// migrate brings the database up to schemaVersion in one write transaction,
// so a crash mid-migration leaves the previous schema intact.
func migrate(ctx context.Context, db *sql.DB) error {
	tx, err := db.BeginTx(ctx, nil) // BEGIN IMMEDIATE: see dsn
	if err != nil {
		return fmt.Errorf("sqlite store: migrate: begin: %w", err)
	}
	defer tx.Rollback()

	var current, appID int
	if err := tx.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&current); err != nil {
		return fmt.Errorf("sqlite store: migrate: read user_version: %w", err)
	}
	if err := tx.QueryRowContext(ctx, `PRAGMA application_id`).Scan(&appID); err != nil {
		return fmt.Errorf("sqlite store: migrate: read application_id: %w", err)
	}
	switch {
	case appID == applicationID:
	case appID == 0 && current == 0:
		// A new file, or some other SQLite database: only the former is ours
		// to initialise.
		var objects int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema`).Scan(&objects); err != nil {
			return fmt.Errorf("sqlite store: migrate: inspect schema: %w", err)
		}
		if objects != 0 {
			return fmt.Errorf("sqlite store: migrate: the database already holds %d schema objects but is not a Kiln database", objects)
		}
	default:
		return fmt.Errorf("sqlite store: migrate: not a Kiln database (application_id %#x)", appID)
	}
	if current > schemaVersion() {
		return fmt.Errorf("sqlite store: migrate: database schema version %d is newer than this build supports (%d); upgrade Kiln", current, schemaVersion())
	}
	if current == schemaVersion() {
		return nil
	}

	for v := current; v < schemaVersion(); v++ {
		for _, stmt := range migrations[v] {
			if _, err := tx.ExecContext(ctx, stmt); err != nil {
				return fmt.Errorf("sqlite store: migrate to version %d: %w", v+1, err)
			}
		}
	}
	// PRAGMA takes no bound parameters; both values are integers we control.
	// The header fields they set are part of page 1, so they commit or roll
	// back with the migration.
	if _, err := tx.ExecContext(ctx, fmt.Sprintf(`PRAGMA application_id = %d`, applicationID)); err != nil {
		return fmt.Errorf("sqlite store: migrate: set application_id: %w", err)
	}
	if _, err := tx.ExecContext(ctx, fmt.Sprintf(`PRAGMA user_version = %d`, schemaVersion())); err != nil {
		return fmt.Errorf("sqlite store: migrate: set user_version: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlite store: migrate: commit: %w", err)
	}
	return nil
}
