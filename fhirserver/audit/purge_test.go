package audit

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/store"
)

type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *testClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// TestPurgeKeepsTheChainVerifiable proves retention: records older than the
// cut-off are removed, a chained checkpoint vouches for the last of them,
// the chain still verifies (and keeps growing), and tampering with the
// first record left is still caught.
func TestPurgeKeepsTheChainVerifiable(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	clock := &testClock{t: time.Date(2019, 1, 1, 0, 0, 0, 0, time.UTC)}
	opts := testOptions(t, nil)
	opts.Now = clock.now
	rec := newRecorder(t, st, opts)
	recordN(t, rec, 0, 10)
	if err := rec.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	clock.add(8 * 365 * 24 * time.Hour)
	recordN(t, rec, 10, 5)
	if err := rec.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	cutoff := clock.now().Add(-7 * 365 * 24 * time.Hour)
	n, err := Purge(ctx, rec, st, cutoff)
	if err != nil || n != 10 {
		t.Fatalf("Purge: %d, %v; want the 10 old records", n, err)
	}
	if n, err := Purge(ctx, rec, st, cutoff); err != nil || n != 0 {
		t.Errorf("a second purge: %d, %v; want nothing", n, err)
	}
	recordN(t, rec, 15, 3)
	if err := rec.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	rep, err := Verify(ctx, st, nil)
	if err != nil || !rep.OK {
		t.Fatalf("Verify after the purge: %+v, %v", rep, err)
	}
	// 5 kept + the first checkpoint + 3 new; the second (empty) purge
	// wrote no checkpoint.
	if rep.Checked != 9 {
		t.Errorf("checked %d records, want 9", rep.Checked)
	}
	if _, err := st.Read(ctx, "AuditEvent", idFor(1)); err == nil {
		t.Error("a purged record is still readable")
	}

	// Tampering with the oldest record left (seq 11) is still detected.
	first, err := st.Read(ctx, "AuditEvent", idFor(11))
	if err != nil {
		t.Fatal(err)
	}
	w := store.Write{Type: "AuditEvent", ID: idFor(11), Version: 2, LastUpdated: clock.now().Add(time.Hour),
		Method: store.MethodUpdate, Body: first.Body}
	if err := st.Put(ctx, w); err != nil {
		t.Fatal(err)
	}
	if rep, _ := Verify(ctx, st, nil); rep.OK || rep.FirstBroken != idFor(11) {
		t.Errorf("tampering after a purge: %+v, want %s broken", rep, idFor(11))
	}
}
