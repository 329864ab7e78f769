package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/search"
	"github.com/kiln-fhir/kiln/fhirserver/store"
)

var lifecycleTests = []test{
	{"PingOnOpenStore", testPing},
	{"CloseSucceeds", testClose},
	{"CancelledContextFailsFast", testCancelled},
}

// testPing proves an open store reports itself ready, empty or not.
func testPing(t *testing.T, s *handle) {
	if err := s.Ping(ctx(t)); err != nil {
		t.Fatalf("Ping on an empty store: %v", err)
	}
	mustPut(t, s, write("Patient", "a", 1, at(1)))
	if err := s.Ping(ctx(t)); err != nil {
		t.Fatalf("Ping: %v", err)
	}
}

// testClose proves Close succeeds on a store that has served reads and
// writes.
func testClose(t *testing.T, s *handle) {
	mustPut(t, s, write("Patient", "a", 1, at(1)))
	mustRead(t, s, "Patient", "a")
	if err := s.close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// testCancelled proves every call given an already cancelled context returns
// an error promptly instead of hanging or doing the work: a cancelled Put or
// Transact writes nothing.
func testCancelled(t *testing.T, s *handle) {
	a1 := write("Patient", "a", 1, at(1))
	mustPut(t, s, a1)
	dead, cancel := context.WithCancel(context.Background())
	cancel()

	calls := []struct {
		name string
		call func() error
	}{
		{"Read", func() error { _, err := s.Read(dead, "Patient", "a"); return err }},
		{"VRead", func() error { _, err := s.VRead(dead, "Patient", "a", 1); return err }},
		{"History", func() error {
			_, err := s.History(dead, store.HistoryQuery{Count: 10})
			return err
		}},
		{"Search", func() error {
			_, err := s.Search(dead, &search.Query{Types: []string{"Patient"}, Count: 10})
			return err
		}},
		{"Put", func() error { return s.Put(dead, write("Patient", "a", 2, at(2))) }},
		{"Put (create)", func() error { return s.Put(dead, write("Patient", "b", 1, at(2))) }},
		{"Transact", func() error {
			return s.Transact(dead, func(tx store.Tx) error {
				return tx.Put(dead, write("Patient", "c", 1, at(2)))
			})
		}},
		{"Ping", func() error { return s.Ping(dead) }},
	}
	for _, c := range calls {
		done := make(chan error, 1)
		go func() { done <- c.call() }()
		select {
		case err := <-done:
			if err == nil {
				t.Errorf("%s with a cancelled context succeeded", c.name)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s with a cancelled context still running after 10s", c.name)
		}
	}

	wantVersion(t, "Read Patient/a", mustRead(t, s, "Patient", "a"), a1)
	for _, id := range []string{"b", "c"} {
		if _, err := s.Read(ctx(t), "Patient", id); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Read Patient/%s after cancelled writes: %v, want ErrNotFound", id, err)
		}
	}
}
