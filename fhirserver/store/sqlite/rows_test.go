package sqlite

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/kiln-fhir/kiln/fhirserver/search"
	"github.com/kiln-fhir/kiln/fhirserver/store"
)

// TestKeysStoredWhole: a resource's keys go up to keysPerInsert to an
// INSERT, bulkKeysPerInsert while it has that many left; every count
// around those chunks stores exactly the keys given, byte for byte, and
// an update replaces them.
func TestKeysStoredWhole(t *testing.T) {
	s := openTemp(t, filepath.Join(t.TempDir(), "kiln.db"))
	defer s.Close()
	keysOf := func(id string) []string {
		t.Helper()
		rows, err := s.reader.QueryContext(t.Context(), `SELECT k.key FROM search_keys AS k JOIN resources AS r ON r.rid = k.rid
			WHERE r.type = 'Basic' AND r.id = ? ORDER BY k.key`, id)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			var k string
			if err := rows.Scan(&k); err != nil {
				t.Fatal(err)
			}
			out = append(out, k)
		}
		return out
	}
	keys := func(n int, tag string) []string {
		var ks []string
		for i := range n {
			ks = append(ks, fmt.Sprintf("code\x1f%s%04d\x00é", tag, i))
		}
		slices.Sort(ks)
		return ks
	}
	for _, n := range []int{0, 1, keysPerInsert - 1, keysPerInsert, keysPerInsert + 1, 2 * keysPerInsert, 2*keysPerInsert + 1, 100,
		bulkKeysPerInsert - 1, bulkKeysPerInsert, bulkKeysPerInsert + 1, bulkKeysPerInsert + keysPerInsert + 3, 2*bulkKeysPerInsert + 5} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			id := fmt.Sprint("k", n)
			for version, tag := range []string{"a", "b"} {
				w := store.Write{Type: "Basic", ID: id, Version: int64(version + 1), LastUpdated: ts(version), Method: store.MethodUpdate,
					Body: fmt.Appendf(nil, `{"resourceType":"Basic","id":%q}`, id), Index: &search.Rows{Keys: keys(n, tag)}}
				if err := s.Put(t.Context(), w); err != nil {
					t.Fatal(err)
				}
				if got := keysOf(id); !slices.Equal(got, w.Index.Keys) {
					t.Fatalf("version %d: stored %d keys %q, want %d", version+1, len(got), got, n)
				}
			}
		})
	}
}
