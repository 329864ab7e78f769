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
		// tamper changes the store (through its API) or wraps it.
		tamper     func(t *testing.T, st store.Store) store.Store
		firstBroke string
		reason     string
	}{
		{
			name: "update",
			tamper: func(t *testing.T, st store.Store) store.Store {
				v, err := st.Read(context.Background(), "AuditEvent", idFor(5))
				if err != nil {
					t.Fatal(err)
				}
				err = st.Put(context.Background(), store.Write{
					Type: "AuditEvent", ID: v.ID, Version: 2, LastUpdated: time.Now().UTC(),
					Method: store.MethodUpdate, Body: editBody(t, v.Body, true),
				})
				if err != nil {
					t.Fatal(err)
				}
				return st
			},
			firstBroke: "ae-000000000005", reason: "version 2",
		},
		{
			name: "delete",
			tamper: func(t *testing.T, st store.Store) store.Store {
				err := st.Put(context.Background(), store.Write{
					Type: "AuditEvent", ID: idFor(5), Version: 2, LastUpdated: time.Now().UTC(),
					Method: store.MethodDelete, Deleted: true,
				})
				if err != nil {
					t.Fatal(err)
				}
				return st
			},
			firstBroke: "ae-000000000005", reason: "deleted",
		},
		{
			name:       "body edited in place",
			tamper:     wrapEdit(idFor(5), func(t *testing.T, b []byte) []byte { return editBody(t, b, false) }),
			firstBroke: "ae-000000000005", reason: "recomputed",
		},
		{
			name:       "body edited in place with its hash recomputed",
			tamper:     wrapEdit(idFor(5), func(t *testing.T, b []byte) []byte { return editBody(t, b, true) }),
			firstBroke: "ae-000000000005", reason: "prev of ae-000000000006",
		},
		{
			name: "whitespace added",
			tamper: wrapEdit(idFor(5), func(t *testing.T, b []byte) []byte {
				return bytes.Replace(b, []byte(`"id":`), []byte(`"id": `), 1)
			}),
			firstBroke: "ae-000000000005", reason: "recomputed",
		},
		{
			name: "hash element removed",
			tamper: wrapEdit(idFor(5), func(t *testing.T, b []byte) []byte {
				return bytes.Replace(b, []byte(`"url":"hash"`), []byte(`"url":"hush"`), 1)
			}),
			firstBroke: "ae-000000000005", reason: "not an audit chain record",
		},
		{
			name:       "newest record edited",
			tamper:     wrapEdit(idFor(n), func(t *testing.T, b []byte) []byte { return editBody(t, b, false) }),
			firstBroke: "ae-000000000010", reason: "recomputed",
		},
		{
			name:       "first record edited with its hash recomputed",
			tamper:     wrapEdit(idFor(1), func(t *testing.T, b []byte) []byte { return editBody(t, b, true) }),
			firstBroke: "ae-000000000001", reason: "prev of ae-000000000002",
		},
		{
			name: "two records edited: the older is reported",
			tamper: func(t *testing.T, st store.Store) store.Store {
				st = wrapEdit(idFor(7), func(t *testing.T, b []byte) []byte { return editBody(t, b, false) })(t, st)
				return wrapEdit(idFor(3), func(t *testing.T, b []byte) []byte { return editBody(t, b, false) })(t, st)
			},
			firstBroke: "ae-000000000003",
		},
		{
			name: "record removed",
			tamper: func(t *testing.T, st store.Store) store.Store {
				return historyWrapper{Store: st, edit: func(v *store.Version) *store.Version {
					if v.ID == idFor(5) {
						return nil
					}
					return v
				}}
			},
			firstBroke: "ae-000000000005", reason: "missing",
		},
		{
			name: "oldest records removed",
			tamper: func(t *testing.T, st store.Store) store.Store {
				return historyWrapper{Store: st, edit: func(v *store.Version) *store.Version {
					if s, _ := seqOf(v.ID); s <= 2 {
						return nil
					}
					return v
				}}
			},
			firstBroke: "ae-000000000001", reason: "missing",
		},
		{
			name: "forged record appended with a gap",
			tamper: func(t *testing.T, st store.Store) store.Store {
				v, err := st.Read(context.Background(), "AuditEvent", idFor(n))
				if err != nil {
					t.Fatal(err)
				}
				rec, _ := parseRecord(v.Body)
				body, _ := sampleEvent(0).seal(time.Now(), Source{Observer: "kiln"}, 99, rec.Hash)
				err = st.Put(context.Background(), store.Write{
					Type: "AuditEvent", ID: idFor(99), Version: 1, LastUpdated: time.Now().UTC(),
					Method: store.MethodCreate, Body: body,
				})
				if err != nil {
					t.Fatal(err)
				}
				return st
			},
			firstBroke: "ae-000000000011", reason: "missing",
		},
		{
			name: "id changed",
			tamper: func(t *testing.T, st store.Store) store.Store {
				return historyWrapper{Store: st, edit: func(v *store.Version) *store.Version {
					if v.ID == idFor(4) {
						c := *v
						c.Body = bytes.Replace(v.Body, []byte(idFor(4)), []byte(idFor(40)), 1)
						return &c
					}
					return v
				}}
			},
			firstBroke: "ae-000000000004", reason: "id does not match",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := openStore(t)
			r := newRecorder(t, st, testOptions(t, nil))
			recordN(t, r, 0, n)
			if rep := verify(t, st); !rep.OK {
				t.Fatalf("before tampering: %+v", rep)
			}
			rep := verify(t, tt.tamper(t, st))
			if rep.OK || rep.FirstBroken != tt.firstBroke || !strings.Contains(rep.Reason, tt.reason) {
				t.Fatalf("report %+v, want %s broken (%q)", rep, tt.firstBroke, tt.reason)
			}
		})
	}
}

// wrapEdit returns a tamper step that rewrites the body of version 1 of id
// as History returns it, keeping version 1: the edit the store API cannot
// make, done on the file itself.
func wrapEdit(id string, edit func(t *testing.T, b []byte) []byte) func(t *testing.T, st store.Store) store.Store {
	return func(t *testing.T, st store.Store) store.Store {
		return historyWrapper{Store: st, edit: func(v *store.Version) *store.Version {
			if v.ID != id || v.Version != 1 {
				return v
			}
			c := *v
			c.Body = edit(t, v.Body)
			return &c
		}}
	}
}

// After an update of an audit record, a restarted recorder still continues
// the chain from its true tail.
func TestRestartAfterTampering(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	r1, err := NewRecorder(ctx, st, testOptions(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	recordN(t, r1, 0, 10)
	r1.Close(ctx)
	if err := st.Put(ctx, store.Write{
		Type: "AuditEvent", ID: idFor(10), Version: 2, LastUpdated: time.Now().UTC().Add(time.Second),
		Method: store.MethodDelete, Deleted: true,
	}); err != nil {
		t.Fatal(err)
	}
	r2 := newRecorder(t, st, testOptions(t, nil))
	if seq, _ := r2.Head(); seq != 10 {
		t.Fatalf("restarted at %d, want 10", seq)
	}
	recordN(t, r2, 10, 3)
	rep := verify(t, st)
	if rep.OK || rep.FirstBroken != idFor(10) || rep.Checked != 14 || rep.Head != 13 {
		t.Fatalf("report %+v", rep)
	}
}

func TestVerifyStoreError(t *testing.T) {
	st := historyErr{openStore(t)}
	rep, err := Verify(context.Background(), st, nil)
	if err == nil || rep.OK {
		t.Fatalf("Verify on a failing store: %+v, %v", rep, err)
	}
}

type historyErr struct{ store.Store }

func (historyErr) History(context.Context, store.HistoryQuery) (*store.HistoryPage, error) {
	return nil, errors.New("io error")
}
