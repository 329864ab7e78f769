package sqlite

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/search"
	"github.com/kiln-fhir/kiln/fhirserver/store"
	"github.com/kiln-fhir/kiln/internal/securitytest"
)

// patientWithName is version v of Patient/p1 named family, with its
// string index rows (the rows of search_keys that kept erased names).
func patientWithName(v int64, family string) store.Write {
	rows := search.MakeRows([]search.Entry{
		{Param: "family", Kind: search.KindString, Str: family, Exact: family},
		{Param: "name", Kind: search.KindString, Str: family, Exact: family},
	})
	return store.Write{Type: "Patient", ID: "p1", Version: v, LastUpdated: time.Now(), Method: store.MethodUpdate,
		Body: fmt.Appendf(nil, `{"resourceType":"Patient","id":"p1","meta":{"versionId":"%d"},"name":[{"family":%q}]}`, v, family), Index: &rows}
}

// filesHolding lists the files of the database (main, -wal, -shm) that hold
// b, with the count.
func filesHolding(t *testing.T, path string, b []byte) []string {
	t.Helper()
	var out []string
	for _, f := range []string{path, path + "-wal", path + "-shm"} {
		data, err := os.ReadFile(f)
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if n := bytes.Count(data, b); n > 0 {
			out = append(out, fmt.Sprintf("%s ×%d", filepath.Base(f), n))
		}
	}
	return out
}

// An erasure's writes (a new version without the name, the earlier one
// rewritten in place, the index rows replaced) followed by Forget leave no
// copy of the name in any file of the database: secure_delete zeroes the
// cells the rewrite freed in resource_versions and the index tables, and
// the checkpoint empties the WAL that held the old frames. Without
// secure_delete, the name stays in the unused space of live pages (the
// second case proves the test can see it).
func TestForgetLeavesNoReplacedContent(t *testing.T) {
	for _, tc := range []struct {
		name      string
		keepFreed bool
		wantClean bool
	}{
		{"secure_delete on", false, true},
		{"secure_delete off", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			path := filepath.Join(t.TempDir(), "clinical.db")
			s, err := open(ctx, path, options{synchronous: defaultSynchronous, keepFreed: tc.keepFreed})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			canary := []byte("Qwxzvbrtlk")
			w := patientWithName(1, string(canary))
			w.Method = store.MethodCreate
			if err := s.Put(ctx, w); err != nil {
				t.Fatal(err)
			}
			// Other rows on the same pages, so the pages stay live.
			for i := range 20 {
				o := patientWithName(1, fmt.Sprintf("Other%02d", i))
				o.ID, o.Method = fmt.Sprintf("o%d", i), store.MethodCreate
				if err := s.Put(ctx, o); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Forget(ctx); err != nil { // the name is now in the database file
				t.Fatal(err)
			}
			if got := filesHolding(t, path, canary); len(got) == 0 {
				t.Fatal("the name was never written: the test proves nothing")
			}
			err = s.Transact(ctx, func(tx store.Tx) error {
				if err := tx.Put(ctx, patientWithName(2, "X")); err != nil {
					return err
				}
				v1 := patientWithName(1, "X")
				v1.Index = nil
				return tx.(store.Rewriter).Rewrite(ctx, v1)
			})
			if err != nil {
				t.Fatal(err)
			}
			if got := filesHolding(t, path, canary); len(got) == 0 {
				t.Fatal("before Forget the WAL should still hold the old frames")
			}
			if err := s.Forget(ctx); err != nil {
				t.Fatal(err)
			}
			got := filesHolding(t, path, canary)
			if tc.wantClean && len(got) > 0 {
				t.Errorf("after Forget the name is still in %v", got)
			}
			if !tc.wantClean && len(got) == 0 {
				t.Errorf("without secure_delete the name should survive in free space: the test cannot tell")
			}
			if fi, err := os.Stat(path + "-wal"); err == nil && fi.Size() != 0 {
				t.Errorf("the WAL has %d bytes after Forget", fi.Size())
			}
		})
	}
}

// Forget fails, within its bound, while a reader holds a snapshot that
// needs the WAL's frames: it never reports the content gone when the WAL
// could not be emptied. (Slow: each attempt waits out the busy timeout.)
func TestSecurityForgetFailsWhileAReaderHoldsTheWAL(t *testing.T) {
	securitytest.Slow(t)
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "clinical.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	w := patientWithName(1, "Before")
	w.Method = store.MethodCreate
	if err := s.Put(ctx, w); err != nil {
		t.Fatal(err)
	}
	rtx, err := s.reader.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := rtx.QueryRowContext(ctx, `SELECT count(*) FROM resources`).Scan(&n); err != nil { // takes the snapshot
		t.Fatal(err)
	}
	if err := s.Put(ctx, patientWithName(2, "After")); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = s.Forget(ctx)
	if err == nil {
		t.Fatal("Forget reported success while a reader held the WAL")
	}
	if took := time.Since(start); took > time.Duration(forgetAttempts+1)*busyTimeoutMS*time.Millisecond {
		t.Errorf("Forget took %v: not bounded", took)
	}
	rtx.Rollback()
	if err := s.Forget(ctx); err != nil {
		t.Errorf("Forget after the reader let go: %v", err)
	}
}
