package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
)

// Statements are prepared once per pool at Open. database/sql then prepares
// each lazily on every connection that runs it and keeps it there, so a hot
// Read costs a bind and a step, not a parse.

const (
	pingSQL = `SELECT 1`

	// The pointer row is found by primary key; the version row by rowid.
	readSQL = `SELECT v.version, v.last_updated, v.method, v.deleted, v.body
		FROM resources AS r JOIN resource_versions AS v ON v.seq = r.seq
		WHERE r.type = ? AND r.id = ?`

	vreadSQL = `SELECT last_updated, method, deleted, body
		FROM resource_versions
		WHERE type = ? AND id = ? AND version = ?`

	currentSQL = `SELECT version, rid FROM resources WHERE type = ? AND id = ?`

	insertSQL = `INSERT INTO resource_versions (type, id, version, last_updated, method, deleted, body)
		VALUES (?, ?, ?, ?, ?, ?, ?)`

	// The pointer of a new resource (rid is its rowid), and of the next
	// version of an existing one.
	createSQL = `INSERT INTO resources (type, id, version, seq, deleted, last_updated)
		VALUES (?, ?, ?, ?, ?, ?)`
	updateSQL = `UPDATE resources SET version = ?2, seq = ?3, deleted = ?4, last_updated = ?5
		WHERE rid = ?1`

	dropVersionSQL = `DELETE FROM resource_versions WHERE seq = ?`

	// Index rows are replaced wholesale on every write of a resource: up
	// to keysPerInsert keys (keysSQL) and rangesPerInsert ranges
	// (rangesSQL) per INSERT, the sort values as one row (see putRows).
	deleteKeysSQL    = `DELETE FROM search_keys WHERE rid = ?`
	deleteDatesSQL   = `DELETE FROM search_dates WHERE rid = ?`
	deleteNumbersSQL = `DELETE FROM search_numbers WHERE rid = ?`
	deleteSortsSQL   = `DELETE FROM search_sort_values WHERE rid = ?`

	insertSortsSQL = `INSERT INTO search_sort_values (rid, vals) VALUES (?, ?)`
)

// keysPerInsert is the most keys one INSERT takes: an Observation has ~11,
// a Patient ~30. Rows of bound values cost 6 % less writer CPU per
// Observation than the JSON array of keys json_each split before
// (PutWithRows, 100 per transaction).
const keysPerInsert = 16

// bulkKeysPerInsert is how many keys one INSERT takes for a resource with
// many (a Patient of 100,000 names has 800,000): a statement per 16 keys
// re-seeks both B-trees of search_keys from their roots for each
// statement, while one long statement keeps its cursors where the last
// row went (by_rid grows at its end for a new resource).
const bulkKeysPerInsert = 512

// keysSQL inserts n keys of one resource: ?1..?n, then its type and rid.
// A resource's keys are unique (search.Rows), so OR IGNORE only keeps a
// repeated reindex harmless.
func keysSQL(n int) string {
	var b strings.Builder
	b.WriteString(`INSERT OR IGNORE INTO search_keys (key, type, rid) VALUES `)
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "(?%d, ?%d, ?%d)", i+1, n+1, n+2)
	}
	return b.String()
}

// rangesPerInsert is the most date or number rows one INSERT takes. A
// Synthea-like Observation has 2 dates and 3 numbers; a statement per row
// cost a third more writer time for them than one statement each.
const rangesPerInsert = 4

// rangesSQL inserts n rows (rid, param, low, high, type) into table.
// Duplicate rows carry no information and are dropped.
func rangesSQL(table string, n int) string {
	return `INSERT OR IGNORE INTO ` + table + ` (rid, param, low, high, type) VALUES (?, ?, ?, ?, ?)` +
		strings.Repeat(`, (?, ?, ?, ?, ?)`, n-1)
}

// level is the scope of a history query.
type level int

const (
	systemLevel level = iota
	typeLevel
	instanceLevel
	numLevels
)

// historySQL builds the page query of one level, with or without the _at
// lower bound. Parameters, in order: the level's keys (type; type and id),
// the lowest and highest last_updated in range, the cursor position
// (lastUpdated, seq), maxSeq, [atLow, maxSeq].
//
// The range bounds fold Since, AtHigh and the cursor into one BETWEEN (see
// history), because SQLite uses only one upper bound of an index range: with
// the cursor as a separate residual test, a later page would walk down from
// the newest version through every earlier page. Absent bounds are bound as
// extreme values, so only the _at lower bound (a subquery per row) needs its
// own variant.
//
// max_seq is an uncorrelated subquery, evaluated once and in the same
// snapshot as the page, so the first page can hand it to the cursor.
func historySQL(l level, atLow bool) string {
	var b strings.Builder
	b.WriteString(`SELECT v.seq, v.type, v.id, v.version, v.last_updated, v.method, v.deleted, v.body,
		(SELECT max(seq) FROM resource_versions) AS max_seq
		FROM resource_versions AS v `)
	// INDEXED BY pins the plan: each level has an index that yields its rows
	// already in page order, so a page reads Count+1 rows and never sorts.
	// Left to itself the planner can pick an index that merely avoids the
	// sort (walking a whole type for one resource's history).
	switch l {
	case systemLevel:
		b.WriteString(`INDEXED BY resource_versions_by_time
		WHERE `)
	case typeLevel:
		b.WriteString(`INDEXED BY resource_versions_by_type_time
		WHERE v.type = ? AND `)
	case instanceLevel:
		b.WriteString(`INDEXED BY resource_versions_by_instance_time
		WHERE v.type = ? AND v.id = ? AND `)
	}
	b.WriteString(`v.last_updated BETWEEN ? AND ?
		AND (v.last_updated < ? OR v.seq < ?)
		AND v.seq <= ?`)
	if atLow {
		// Current at some moment in [AtLow, AtHigh): not superseded by the
		// next version of the same resource at or before AtLow. Versions
		// have no gaps, so "the next version" is version+1, found through
		// the UNIQUE (type, id, version) index.
		//
		// The next version counts only if it is inside the cursor's
		// snapshot (seq <= maxSeq): one written between two pages must not
		// take from later pages a version that was current when the first
		// page was read. The unary + keeps the planner from using that
		// term as a rowid range instead of the unique index's equalities.
		b.WriteString(`
		AND NOT EXISTS (SELECT 1 FROM resource_versions AS n
			WHERE n.type = v.type AND n.id = v.id AND n.version = v.version + 1
			AND n.last_updated <= ? AND +n.seq <= ?)`)
	}
	// No LIMIT: history stops reading after Count+1 rows, which costs the
	// same since rows stream in index order. A bound "LIMIT ?" would make
	// SQLite re-prepare the statement on every execution (the limit value
	// feeds its planner), measured at about a fifth of a page's time.
	b.WriteString(`
		ORDER BY v.last_updated DESC, v.seq DESC`)
	return b.String()
}

// readQueries are the statements of store.Reader.
type readQueries struct {
	ping, read, vread *sql.Stmt
	record            *sql.Stmt               // GetRecord: on every authenticated request
	history           [numLevels][2]*sql.Stmt // [level][atLow]
}

func (q *readQueries) prepare(ctx context.Context, db *sql.DB) (err error) {
	prep := func(dst **sql.Stmt, query string) {
		if err == nil {
			*dst, err = db.PrepareContext(ctx, query)
		}
	}
	prep(&q.ping, pingSQL)
	prep(&q.read, readSQL)
	prep(&q.vread, vreadSQL)
	prep(&q.record, getRecordSQL)
	for l := range numLevels {
		prep(&q.history[l][0], historySQL(l, false))
		prep(&q.history[l][1], historySQL(l, true))
	}
	return err
}

func (q *readQueries) close() error {
	errs := []error{closeStmt(q.ping), closeStmt(q.read), closeStmt(q.vread), closeStmt(q.record)}
	for l := range numLevels {
		errs = append(errs, closeStmt(q.history[l][0]), closeStmt(q.history[l][1]))
	}
	return errors.Join(errs...)
}

// writeQueries are the statements of the compare-and-swap in Put.
type writeQueries struct {
	current, insert, create, update, dropVersion *sql.Stmt
	// index rows: delete by rid; insert the keys, 1..rangesPerInsert
	// ranges, the sort values
	delete               [len(deleteRowsSQL)]*sql.Stmt
	insSorts             *sql.Stmt
	insKeys              [keysPerInsert]*sql.Stmt
	insKeysBulk          *sql.Stmt // bulkKeysPerInsert keys
	insDates, insNumbers [rangesPerInsert]*sql.Stmt
}

// deleteRowsSQL empties each index table of one resource's rows.
var deleteRowsSQL = [...]string{deleteKeysSQL, deleteDatesSQL, deleteNumbersSQL, deleteSortsSQL}

func (q *writeQueries) prepare(ctx context.Context, db *sql.DB) (err error) {
	prep := func(dst **sql.Stmt, query string) {
		if err == nil {
			*dst, err = db.PrepareContext(ctx, query)
		}
	}
	prep(&q.current, currentSQL)
	prep(&q.insert, insertSQL)
	prep(&q.create, createSQL)
	prep(&q.update, updateSQL)
	prep(&q.dropVersion, dropVersionSQL)
	for i, d := range deleteRowsSQL {
		prep(&q.delete[i], d)
	}
	prep(&q.insSorts, insertSortsSQL)
	for n := range keysPerInsert {
		prep(&q.insKeys[n], keysSQL(n+1))
	}
	prep(&q.insKeysBulk, keysSQL(bulkKeysPerInsert))
	for n := range rangesPerInsert {
		prep(&q.insDates[n], rangesSQL("search_dates", n+1))
		prep(&q.insNumbers[n], rangesSQL("search_numbers", n+1))
	}
	return err
}

func (q *writeQueries) close() error {
	errs := []error{closeStmt(q.current), closeStmt(q.insert), closeStmt(q.create), closeStmt(q.update), closeStmt(q.dropVersion), closeStmt(q.insSorts), closeStmt(q.insKeysBulk)}
	for _, st := range q.delete {
		errs = append(errs, closeStmt(st))
	}
	for _, st := range q.insKeys {
		errs = append(errs, closeStmt(st))
	}
	for n := range rangesPerInsert {
		errs = append(errs, closeStmt(q.insDates[n]), closeStmt(q.insNumbers[n]))
	}
	return errors.Join(errs...)
}

func closeStmt(s *sql.Stmt) error {
	if s == nil {
		return nil
	}
	return s.Close()
}
