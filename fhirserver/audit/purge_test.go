package audit

import (
	"context"
	"sync"
	"testing"
	"time"
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
	st, path := openLog(t)
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
	if es, err := st.Newest(ctx, 11, 11); err != nil || len(es) != 0 {
		t.Errorf("purged records are still there: %d, %v", len(es), err)
	}
	if es, err := st.Newest(ctx, 12, 1); err != nil || len(es) != 1 || es[0].Seq != 11 {
		t.Errorf("record 11 is not the oldest left: %v, %v", es, err)
	}

	// Tampering with the oldest record left (seq 11) is still detected.
	body := editBody(t, bodyOf(t, st, 11), false)
	execSQL(t, path, `UPDATE audit_log SET body = ? WHERE seq = 11`, body)
	if rep, _ := Verify(ctx, st, nil); rep.OK || rep.FirstBroken != idFor(11) {
		t.Errorf("tampering after a purge: %+v, want %s broken", rep, idFor(11))
	}
}

// TestPurgeFindsTheCutOff checks the search for the newest record written
// before the cut-off, whatever the spacing of the records and the place of
// the cut-off (before all, between any two, after all).
func TestPurgeFindsTheCutOff(t *testing.T) {
	ctx := context.Background()
	st, _ := openLog(t)
	clock := &testClock{t: time.Date(2019, 1, 1, 0, 0, 0, 0, time.UTC)}
	opts := testOptions(t, nil)
	opts.Now = clock.now
	rec := newRecorder(t, st, opts)
	const n = 37
	for i := range n {
		recordN(t, rec, i, 1)
		clock.add(time.Duration(1+i%3) * time.Hour)
	}
	all, err := st.Newest(ctx, 0, n)
	if err != nil || len(all) != n {
		t.Fatalf("%d entries, %v", len(all), err)
	}
	for i := n - 1; i >= -1; i-- { // newest first: the entry the cut-off follows
		var cut time.Time
		want := int64(0)
		if i >= 0 {
			e := all[n-1-i]
			cut, want = e.Time.Add(time.Second), e.Seq
		} else {
			cut = all[n-1].Time
		}
		got, ok, err := newestBefore(ctx, st, cut)
		if err != nil || ok != (want > 0) || got.Seq != want {
			t.Errorf("cut-off after record %d: got %d %v %v", want, got.Seq, ok, err)
		}
	}
	// With the oldest records gone, as after a purge.
	if _, err := st.DeleteThrough(ctx, 10, 100); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := newestBefore(ctx, st, all[n-1-5].Time.Add(time.Second)); err != nil || ok {
		t.Errorf("cut-off before every record left: got %d %v %v", got.Seq, ok, err)
	}
	if got, ok, err := newestBefore(ctx, st, all[n-1-20].Time.Add(time.Second)); err != nil || !ok || got.Seq != 21 {
		t.Errorf("cut-off after record 21: got %d %v %v", got.Seq, ok, err)
	}
}
