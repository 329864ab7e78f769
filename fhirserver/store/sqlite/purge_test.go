package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/store"
)

// A purge never frees the highest rid, so a resource created after it
// gets a number no earlier resource had: a search cursor's snapshot (every
// rid up to the highest when it began) never takes in a newer resource.
func TestPurgeNeverLetsARidBeReused(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "clinical.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	old := time.Date(2015, 1, 1, 0, 0, 0, 0, time.UTC)
	put := func(id string, at time.Time) {
		t.Helper()
		w := store.Write{Type: "AuditEvent", ID: id, Version: 1, LastUpdated: at, Method: store.MethodCreate,
			Body: fmt.Appendf(nil, `{"resourceType":"AuditEvent","id":%q,"meta":{"versionId":"1"}}`, id)}
		if err := s.Put(ctx, w); err != nil {
			t.Fatal(err)
		}
	}
	maxRid := func() (n int64) {
		t.Helper()
		if err := s.writer.QueryRowContext(ctx, `SELECT coalesce(max(rid), 0) FROM resources`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	put("a", old)
	put("b", old)
	highest := maxRid()
	n, err := s.Purge(ctx, "AuditEvent", time.Now(), 10)
	if err != nil || n != 1 {
		t.Fatalf("purge of two due resources: %d, %v; want 1 (the highest rid stays)", n, err)
	}
	if _, err := s.Read(ctx, "AuditEvent", "b"); err != nil {
		t.Fatalf("the resource holding the highest rid was purged: %v", err)
	}
	put("c", time.Now())
	if got := maxRid(); got <= highest {
		t.Fatalf("a resource created after the purge got rid %d, not above the %d an earlier one held", got, highest)
	}
	if n, err := s.Purge(ctx, "AuditEvent", time.Now().Add(-time.Hour), 10); err != nil || n != 1 {
		t.Fatalf("once something newer exists the kept resource is purged: %d, %v", n, err)
	}
}
