package audit

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/store"
)

// editBody changes a recorded outcome; with rehash it also recomputes the
// record's own hash, as a careful forger would.
func editBody(t *testing.T, body []byte, rehash bool) []byte {
	t.Helper()
	b := bytes.Replace(body, []byte(`"outcome":"0"`), []byte(`"outcome":"8"`), 1)
	if bytes.Equal(b, body) {
		t.Fatal("nothing to edit")
	}
	if !rehash {
		return b
	}
	rec, err := parseRecord(b)
	if err != nil {
		t.Fatal(err)
	}
	canonical, _ := withHash(b, rec.Hash, "")
	h, err := chainHash(rec.Prev, canonical)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := withHash(b, rec.Hash, h)
	return out
}

func TestVerifyDetectsTampering(t *testing.T) {
	const n = 10
	tests := []struct {
		name string
		// tamper changes the database file (through SQL, path) or wraps
		// the log.
		tamper     func(t *testing.T, l Log, path string) Log
		firstBroke string
		reason     string
	}{
		{
			name: "body edited in the file",
			tamper: func(t *testing.T, l Log, path string) Log {
				execSQL(t, path, `UPDATE audit_log SET body = ? WHERE seq = 5`, editBody(t, bodyOf(t, l, 5), false))
				return l
			},
			firstBroke: "ae-000000000005", reason: "recomputed",
		},
		{
			name: "body edited in the file with its hash recomputed",
			tamper: func(t *testing.T, l Log, path string) Log {
				execSQL(t, path, `UPDATE audit_log SET body = ? WHERE seq = 5`, editBody(t, bodyOf(t, l, 5), true))
				return l
			},
			firstBroke: "ae-000000000005", reason: "prev of ae-000000000006",
		},
		{
			name: "record deleted from the file",
			tamper: func(t *testing.T, l Log, path string) Log {
				execSQL(t, path, `DELETE FROM audit_log WHERE seq = 5`)
				return l
			},
			firstBroke: "ae-000000000005", reason: "missing",
		},
		{
			name: "record moved to another seq in the file",
			tamper: func(t *testing.T, l Log, path string) Log {
				execSQL(t, path, `UPDATE audit_log SET seq = 50 WHERE seq = 5`)
				return l
			},
			firstBroke: "ae-000000000005", reason: "missing", // and ae-000000000050's seq differs
		},
		{
			name:       "body edited in place",
			tamper:     wrapEdit(5, func(t *testing.T, b []byte) []byte { return editBody(t, b, false) }),
			firstBroke: "ae-000000000005", reason: "recomputed",
		},
		{
			name:       "body edited in place with its hash recomputed",
			tamper:     wrapEdit(5, func(t *testing.T, b []byte) []byte { return editBody(t, b, true) }),
			firstBroke: "ae-000000000005", reason: "prev of ae-000000000006",
		},
		{
			name: "whitespace added",
			tamper: wrapEdit(5, func(t *testing.T, b []byte) []byte {
				return bytes.Replace(b, []byte(`"id":`), []byte(`"id": `), 1)
			}),
			firstBroke: "ae-000000000005", reason: "recomputed",
		},
		{
			name: "hash element removed",
			tamper: wrapEdit(5, func(t *testing.T, b []byte) []byte {
				return bytes.Replace(b, []byte(`"url":"hash"`), []byte(`"url":"hush"`), 1)
			}),
			firstBroke: "ae-000000000005", reason: "not an audit chain record",
		},
		{
			name:       "newest record edited",
			tamper:     wrapEdit(n, func(t *testing.T, b []byte) []byte { return editBody(t, b, false) }),
			firstBroke: "ae-000000000010", reason: "recomputed",
		},
		{
			name:       "first record edited with its hash recomputed",
			tamper:     wrapEdit(1, func(t *testing.T, b []byte) []byte { return editBody(t, b, true) }),
			firstBroke: "ae-000000000001", reason: "prev of ae-000000000002",
		},
		{
			name: "two records edited: the older is reported",
			tamper: func(t *testing.T, l Log, path string) Log {
				l = wrapEdit(7, func(t *testing.T, b []byte) []byte { return editBody(t, b, false) })(t, l, path)
				return wrapEdit(3, func(t *testing.T, b []byte) []byte { return editBody(t, b, false) })(t, l, path)
			},
			firstBroke: "ae-000000000003",
		},
		{
			name: "record removed",
			tamper: func(t *testing.T, l Log, _ string) Log {
				return readWrapper{Log: l, edit: func(e store.LogEntry) (store.LogEntry, bool) { return e, e.Seq != 5 }}
			},
			firstBroke: "ae-000000000005", reason: "missing",
		},
		{
			name: "oldest records removed",
			tamper: func(t *testing.T, l Log, _ string) Log {
				return readWrapper{Log: l, edit: func(e store.LogEntry) (store.LogEntry, bool) { return e, e.Seq > 2 }}
			},
			firstBroke: "ae-000000000001", reason: "missing",
		},
		{
			name: "forged record appended with a gap",
			tamper: func(t *testing.T, l Log, _ string) Log {
				rec, _ := parseRecord(bodyOf(t, l, n))
				now := time.Now().UTC()
				body, _ := sampleEvent(0).seal(now, Source{Observer: "kiln"}, 99, rec.Hash)
				if err := l.Append(context.Background(), []store.LogEntry{{Seq: 99, Time: now, Body: body}}); err != nil {
					t.Fatal(err)
				}
				return l
			},
			firstBroke: "ae-000000000011", reason: "missing",
		},
		{
			name: "id changed",
			tamper: wrapEdit(4, func(t *testing.T, b []byte) []byte {
				return bytes.Replace(b, []byte(idFor(4)), []byte(idFor(40)), 1)
			}),
			firstBroke: "ae-000000000004", reason: "id \"ae-000000000040\" does not match",
		},
		{
			name: "seq mismatch: another record's body in its place",
			tamper: func(t *testing.T, l Log, _ string) Log {
				six := bodyOf(t, l, 6)
				return readWrapper{Log: l, edit: func(e store.LogEntry) (store.LogEntry, bool) {
					if e.Seq == 5 {
						e.Body = six
					}
					return e, true
				}}
			},
			firstBroke: "ae-000000000005", reason: "seq 6 in the record differs from its place in the log (5)",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, path := openLog(t)
			r := newRecorder(t, l, testOptions(t, nil))
			recordN(t, r, 0, n)
			if rep := verify(t, l); !rep.OK {
				t.Fatalf("before tampering: %+v", rep)
			}
			rep := verify(t, tt.tamper(t, l, path))
			if rep.OK || rep.FirstBroken != tt.firstBroke || !strings.Contains(rep.Reason, tt.reason) {
				t.Fatalf("report %+v, want %s broken (%q)", rep, tt.firstBroke, tt.reason)
			}
		})
	}
}

// wrapEdit returns a tamper step that rewrites the body of record seq as
// Newest returns it: an edit of the file the log API cannot make.
func wrapEdit(seq int64, edit func(t *testing.T, b []byte) []byte) func(t *testing.T, l Log, path string) Log {
	return func(t *testing.T, l Log, _ string) Log {
		return readWrapper{Log: l, edit: func(e store.LogEntry) (store.LogEntry, bool) {
			if e.Seq == seq {
				e.Body = edit(t, e.Body)
			}
			return e, true
		}}
	}
}

// After the newest record is edited in the file, a restarted recorder
// still continues the chain from it, and Verify reports it.
func TestRestartAfterTampering(t *testing.T) {
	ctx := context.Background()
	l, path := openLog(t)
	r1, err := NewRecorder(ctx, l, testOptions(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	recordN(t, r1, 0, 10)
	r1.Close(ctx)
	execSQL(t, path, `UPDATE audit_log SET body = ? WHERE seq = 10`, editBody(t, bodyOf(t, l, 10), false))
	r2 := newRecorder(t, l, testOptions(t, nil))
	if seq, _ := r2.Head(); seq != 10 {
		t.Fatalf("restarted at %d, want 10", seq)
	}
	recordN(t, r2, 10, 3)
	rep := verify(t, l)
	if rep.OK || rep.FirstBroken != idFor(10) || rep.Checked != 13 || rep.Head != 13 {
		t.Fatalf("report %+v", rep)
	}
}

// A newest record that is not a chain record at all stops the recorder
// from starting: it would have no hash to chain to.
func TestRecorderRefusesABrokenTail(t *testing.T) {
	ctx := context.Background()
	l, path := openLog(t)
	r1 := newRecorder(t, l, testOptions(t, nil))
	recordN(t, r1, 0, 3)
	r1.Close(ctx)
	execSQL(t, path, `UPDATE audit_log SET body = ? WHERE seq = 3`, []byte(`{"resourceType":"Patient"}`))
	if _, err := NewRecorder(ctx, l, testOptions(t, nil)); err == nil || !strings.Contains(err.Error(), "ae-000000000003") {
		t.Fatalf("NewRecorder on a broken tail: %v", err)
	}
}

func TestVerifyLogError(t *testing.T) {
	l, _ := openLog(t)
	rep, err := Verify(context.Background(), newestErr{l}, nil)
	if err == nil || rep.OK {
		t.Fatalf("Verify on a failing log: %+v, %v", rep, err)
	}
}

type newestErr struct{ Log }

func (newestErr) Newest(context.Context, int64, int) ([]store.LogEntry, error) {
	return nil, errors.New("io error")
}
