package audit

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/store"
	"github.com/kiln-fhir/kiln/fhirserver/store/sqlite"
)

func openStore(t testing.TB) store.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "audit.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// sampleEvent is event i of a test: a read of Patient/i by user/u<i%7>.
func sampleEvent(i int) Event {
	return Event{
		Time:      time.Date(2026, 1, 2, 3, 4, 5, i*1000, time.UTC),
		Subtype:   SubtypeRead,
		Status:    200,
		Agent:     Agent{Who: fmt.Sprintf("user/u%d", i%7), Role: "provider", Address: "192.0.2.10"},
		Entity:    Entity{What: fmt.Sprintf("Patient/%d", i)},
		RequestID: fmt.Sprintf("req-%d", i),
	}
}

// syncBuffer is a goroutine-safe log sink.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func testOptions(t testing.TB, log *syncBuffer) Options {
	var w interface{ Write([]byte) (int, error) } = testWriter{t}
	if log != nil {
		w = log
	}
	return Options{
		FlushInterval: 10 * time.Millisecond,
		Source:        Source{Observer: "kiln", Site: "test"},
		Logger:        slog.New(slog.NewTextHandler(w, nil)),
		RetryMin:      time.Millisecond,
		RetryMax:      20 * time.Millisecond,
	}
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(bytes.TrimSpace(p)))
	return len(p), nil
}

// newRecorder starts a recorder and closes it at the end of the test.
func newRecorder(t testing.TB, st store.Store, opts Options) *Recorder {
	t.Helper()
	r, err := NewRecorder(context.Background(), st, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(context.Background()) })
	return r
}

func recordN(t testing.TB, r *Recorder, from, n int) {
	t.Helper()
	ctx := context.Background()
	for i := from; i < from+n; i++ {
		if err := r.Record(ctx, sampleEvent(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

func verify(t testing.TB, st store.Store) Report {
	t.Helper()
	rep, err := Verify(context.Background(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// historyWrapper rewrites what History returns.
type historyWrapper struct {
	store.Store
	edit func(v *store.Version) *store.Version // nil result: drop
}

func (h historyWrapper) History(ctx context.Context, q store.HistoryQuery) (*store.HistoryPage, error) {
	page, err := h.Store.History(ctx, q)
	if err != nil {
		return nil, err
	}
	out := &store.HistoryPage{Next: page.Next}
	for _, v := range page.Versions {
		if v = h.edit(v); v != nil {
			out.Versions = append(out.Versions, v)
		}
	}
	return out, nil
}

// txWrapper intercepts Transact.
type txWrapper struct {
	store.Store
	transact func(ctx context.Context, fn func(store.Tx) error) error
}

func (w txWrapper) Transact(ctx context.Context, fn func(store.Tx) error) error {
	return w.transact(ctx, fn)
}
