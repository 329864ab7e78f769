package storetest

import (
	"errors"
	"testing"

	"github.com/kiln-fhir/kiln/fhirserver/store"
)

var transactTests = []test{
	{"CommitsEveryWrite", testTransactCommit},
	{"ErrorRollsBackEveryWrite", testTransactError},
	{"ConflictRollsBackEarlierWrites", testTransactConflict},
	{"ReadsSeeOwnWritesOthersDoNot", testTransactReads},
}

// transact runs s.Transact(fn). When the backend reports
// ErrTransactionsUnsupported it logs that (the test then passes on the
// remaining checks), verifies fn was not called and that none of the
// resources in untouched exist, and returns supported=false.
func transact(t *testing.T, s *handle, fn func(tx store.Tx) error, untouched ...[2]string) (supported bool, err error) {
	t.Helper()
	called := false
	err = s.Transact(ctx(t), func(tx store.Tx) error {
		called = true
		return fn(tx)
	})
	if !errors.Is(err, store.ErrTransactionsUnsupported) {
		return true, err
	}
	t.Logf("Transact returned %v: checking that fn was not called and nothing was written", err)
	if called {
		t.Errorf("Transact reported ErrTransactionsUnsupported after calling fn")
	}
	for _, r := range untouched {
		if _, err := s.Read(ctx(t), r[0], r[1]); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Read %s/%s after an unsupported Transact: %v, want ErrNotFound", r[0], r[1], err)
		}
	}
	return false, err
}

// testTransactCommit proves every Put inside a Transact whose fn returns nil
// lands.
func testTransactCommit(t *testing.T, s *handle) {
	a := write("Patient", "a", 1, at(1))
	b := write("Observation", "b", 1, at(1))
	ok, err := transact(t, s, func(tx store.Tx) error {
		if err := tx.Put(ctx(t), a); err != nil {
			return err
		}
		return tx.Put(ctx(t), b)
	}, [2]string{"Patient", "a"}, [2]string{"Observation", "b"})
	if !ok {
		return
	}
	if err != nil {
		t.Fatalf("Transact: %v", err)
	}
	wantVersion(t, "Read Patient/a", mustRead(t, s, "Patient", "a"), a)
	wantVersion(t, "Read Observation/b", mustRead(t, s, "Observation", "b"), b)
}

// testTransactError proves that when fn fails, Transact returns fn's error
// and none of its writes land: a resource it updated reads as before, one it
// created does not exist.
func testTransactError(t *testing.T, s *handle) {
	a1 := write("Patient", "a", 1, at(1))
	mustPut(t, s, a1)
	boom := errors.New("fn failed")
	ok, err := transact(t, s, func(tx store.Tx) error {
		if err := tx.Put(ctx(t), write("Patient", "a", 2, at(2))); err != nil {
			return err
		}
		if err := tx.Put(ctx(t), write("Patient", "new", 1, at(2))); err != nil {
			return err
		}
		return boom
	}, [2]string{"Patient", "new"})
	if !ok {
		wantVersion(t, "Read Patient/a", mustRead(t, s, "Patient", "a"), a1)
		return
	}
	if !errors.Is(err, boom) {
		t.Fatalf("Transact: %v, want fn's error", err)
	}
	wantVersion(t, "Read Patient/a after rollback", mustRead(t, s, "Patient", "a"), a1)
	if _, err := s.VRead(ctx(t), "Patient", "a", 2); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("VRead Patient/a/_history/2 after rollback: %v, want ErrNotFound", err)
	}
	if _, err := s.Read(ctx(t), "Patient", "new"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Read Patient/new after rollback: %v, want ErrNotFound", err)
	}
	// The rolled-back versions are free again.
	mustPut(t, s, write("Patient", "a", 2, at(3)), write("Patient", "new", 1, at(3)))
}

// testTransactConflict proves a conflicting Put inside Transact reports
// ErrConflict, which fn passes on, and that Transact then rolls back the Puts
// made before it.
func testTransactConflict(t *testing.T, s *handle) {
	b1 := write("Patient", "b", 1, at(1))
	mustPut(t, s, b1)
	var putErr error
	ok, err := transact(t, s, func(tx store.Tx) error {
		if err := tx.Put(ctx(t), write("Patient", "a", 1, at(2))); err != nil {
			return err
		}
		putErr = tx.Put(ctx(t), write("Patient", "b", 1, at(2))) // b exists
		return putErr
	}, [2]string{"Patient", "a"})
	if !ok {
		return
	}
	wantErr(t, "the conflicting Put inside Transact", putErr, store.ErrConflict)
	wantErr(t, "Transact", err, store.ErrConflict)
	if _, err := s.Read(ctx(t), "Patient", "a"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Read Patient/a after the rolled-back Transact: %v, want ErrNotFound", err)
	}
	wantVersion(t, "Read Patient/b", mustRead(t, s, "Patient", "b"), b1)
}

// testTransactReads proves reads through the Tx (Read, VRead, History) see
// the transaction's own writes, while readers outside it see the state before
// it until it commits.
func testTransactReads(t *testing.T, s *handle) {
	a1 := write("Patient", "a", 1, at(1))
	mustPut(t, s, a1)
	a2 := write("Patient", "a", 2, at(2))
	n1 := write("Patient", "n", 1, at(3))
	ok, err := transact(t, s, func(tx store.Tx) error {
		mustPut(t, tx, a2, n1)
		wantVersion(t, "tx.Read Patient/a", mustRead(t, tx, "Patient", "a"), a2)
		wantVersion(t, "tx.Read Patient/n", mustRead(t, tx, "Patient", "n"), n1)
		wantVersion(t, "tx.VRead Patient/a/_history/2", mustVRead(t, tx, "Patient", "a", 2), a2)
		q := store.HistoryQuery{Type: "Patient", Count: 1}
		wantHistory(t, q, collect(t, tx, q), []store.Write{n1, a2, a1})

		// Outside the transaction nothing has happened yet.
		wantVersion(t, "Read Patient/a outside the tx", mustRead(t, s, "Patient", "a"), a1)
		if _, err := s.Read(ctx(t), "Patient", "n"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Read Patient/n outside the tx: %v, want ErrNotFound", err)
		}
		return nil
	}, [2]string{"Patient", "n"})
	if !ok {
		return
	}
	if err != nil {
		t.Fatalf("Transact: %v", err)
	}
	wantVersion(t, "Read Patient/a after commit", mustRead(t, s, "Patient", "a"), a2)
	wantVersion(t, "Read Patient/n after commit", mustRead(t, s, "Patient", "n"), n1)
}
