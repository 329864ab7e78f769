package main

import (
	"context"
	"errors"
	"io"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/indexversion"

	"github.com/kiln-fhir/kiln/fhirserver/auth"
	"github.com/kiln-fhir/kiln/fhirserver/search"
	"github.com/kiln-fhir/kiln/fhirserver/store"
	"github.com/kiln-fhir/kiln/internal/app"
)

// familyHits is how many Patients family=value finds.
func familyHits(t *testing.T, ctx context.Context, a *app.App, value string) int {
	t.Helper()
	vs, err := a.FHIR.SearchAll(ctx, "Patient", url.Values{"family": {value}}, 100)
	if err != nil {
		t.Fatal(err)
	}
	return len(vs)
}

// A store whose string keys were built by the former fold (precomposed
// ễ kept, as fold version 1 did) is refused by kiln serve, with the way
// out in the message; kiln admin reindex rebuilds the keys, records the
// new version, and family=nguyen then finds Nguyễn. A new store records
// the current version on its first open, with no reindex.
func TestIndexVersionMigration(t *testing.T) {
	dir := t.TempDir()
	ctx := auth.WithPrincipal(t.Context(), &auth.Principal{Grant: auth.Grant{Platform: auth.PatientsRead | auth.PatientsWrite}})
	a, _ := openTestApp(t, "--data", dir, "--validation", "base")
	if v, err := indexversion.Stored(ctx, a.Store); err != nil || v != indexversion.Current {
		t.Fatalf("new store: index version %d, %v; want %d recorded", v, err, indexversion.Current)
	}
	if _, err := a.FHIR.CreateWithID(ctx, "Patient", "p1", []byte(`{"resourceType":"Patient","name":[{"family":"Nguyễn","given":["Văn"]}]}`)); err != nil {
		t.Fatal(err)
	}
	if n := familyHits(t, ctx, a, "nguyen"); n != 1 {
		t.Fatalf("family=nguyen on fresh rows: %d hits, want 1", n)
	}
	// What an older kiln left: the family key folded without U+1EC5, and
	// no record (or an old one) of the version.
	v, err := a.Store.Read(ctx, "Patient", "p1")
	if err != nil {
		t.Fatal(err)
	}
	old := &search.Rows{Keys: []string{"family\x1fnguyễn"}}
	if n, err := a.Store.Reindex(ctx, []store.IndexUpdate{{Type: "Patient", ID: "p1", Version: v.Version, Rows: old}}); err != nil || n != 1 {
		t.Fatalf("writing old rows: %d, %v", n, err)
	}
	if err := a.Store.DeleteRecord(ctx, "search-index", "version"); err != nil {
		t.Fatal(err)
	}
	if n := familyHits(t, ctx, a, "nguyen"); n != 0 {
		t.Fatalf("family=nguyen on old rows: %d hits, want 0 (the test's old rows are not old)", n)
	}
	a.Close()

	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out strings.Builder
	err = run(sctx, []string{"serve", "--addr", "127.0.0.1:0", "--data", dir, "--log-level", "warn"}, nil, &out, &out)
	var stale *indexversion.StaleError
	if !errors.As(err, &stale) || stale.Stored != 1 || !strings.Contains(err.Error(), "kiln admin reindex") {
		t.Fatalf("serve on a stale index: %v, want a StaleIndexError from version 1 naming kiln admin reindex", err)
	}
	if strings.Contains(out.String(), "First start") {
		t.Error("serve created the first admin before refusing")
	}

	out.Reset()
	if err := run(t.Context(), []string{"admin", "reindex", "--data", dir}, nil, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"reindex: Patient 1/1\n", "reindex: search index at version 2\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("reindex output %q lacks %q", out.String(), want)
		}
	}
	a, _ = openTestApp(t, "--data", dir, "--validation", "base")
	if v, err := indexversion.Stored(ctx, a.Store); err != nil || v != indexversion.Current {
		t.Errorf("after reindex: index version %d, %v", v, err)
	}
	if err := indexversion.Check(ctx, a.Store); err != nil {
		t.Errorf("after reindex: %v", err)
	}
	for _, q := range []string{"nguyen", "Nguyễn", "NGUYEN", "Nguye\u0302\u0303n"} {
		if n := familyHits(t, ctx, a, q); n != 1 {
			t.Errorf("family=%s after reindex: %d hits, want 1", q, n)
		}
	}
}

// A reindex of some types only leaves the recorded version as it was:
// the other types still hold old keys.
func TestReindexTypeKeepsVersion(t *testing.T) {
	dir := t.TempDir()
	a, _ := openTestApp(t, "--data", dir, "--validation", "base")
	if _, err := a.FHIR.CreateWithID(auth.WithPrincipal(t.Context(), &auth.Principal{Grant: auth.Grant{Platform: auth.PatientsWrite}}),
		"Patient", "p1", []byte(`{"resourceType":"Patient","name":[{"family":"Trần"}]}`)); err != nil {
		t.Fatal(err)
	}
	if err := indexversion.Record(t.Context(), a.Store, 1); err != nil {
		t.Fatal(err)
	}
	a.Close()
	var out strings.Builder
	if err := run(t.Context(), []string{"admin", "reindex", "--data", dir, "--type", "Patient"}, nil, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "stays at version 1") {
		t.Errorf("output %q does not say the version stays", out.String())
	}
	a, _ = openTestApp(t, "--data", dir, "--validation", "base")
	if v, err := indexversion.Stored(t.Context(), a.Store); err != nil || v != 1 {
		t.Errorf("index version %d, %v; want 1 still", v, err)
	}
}
