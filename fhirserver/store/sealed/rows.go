package sealed

import (
	"slices"

	"github.com/kiln-fhir/kiln/fhirserver/search"
)

// keySep separates a parameter from its value in index keys (search.Entry.Keys).
const keySep = "\x1f"

// lastUpdated is the one parameter whose date rows are kept: its value is
// the version's LastUpdated, which the store holds in plain anyway.
const lastUpdated = "_lastUpdated"

// plainKey reports whether the index key k stays as it is: a literal
// reference "param\x1fType/id" (search.RefKey) to an opaque id. Such a key
// holds a resource type and a random id, which the store keeps in plain
// as the referenced resource's own key; _include, _revinclude, chains,
// _has and compartments follow these keys inside the backend.
func (p *params) plainKey(k string) bool {
	_, _, id, ok := search.RefKey(k)
	return ok && p.opaque(id)
}

// blindRows returns the rows of r the partition stores (r is left as it
// was): every key blinded under blind's current key but the
// plain references, the date rows of _lastUpdated alone, no number rows
// (their values, and the unit codes in their parameters, are the data),
// and one sort row per parameter with no values, which :missing reads.
func (p *params) blindRows(blind *BlindKeys, r *search.Rows) *search.Rows {
	if r == nil {
		return nil
	}
	out := &search.Rows{}
	if len(r.Keys) > 0 {
		out.Keys = make([]string, len(r.Keys))
		id := blind.current
		for i, k := range r.Keys {
			if p.plainKey(k) {
				out.Keys[i] = k
			} else {
				out.Keys[i] = blind.tag(id, k)
			}
		}
		slices.Sort(out.Keys)
		out.Keys = slices.Compact(out.Keys)
	}
	for _, d := range r.Dates {
		if d.Param == lastUpdated {
			out.Dates = append(out.Dates, d)
		}
	}
	if len(r.Sorts) > 0 {
		out.Sorts = make([]search.SortRow, len(r.Sorts))
		for i, s := range r.Sorts {
			out.Sorts[i] = search.SortRow{Param: s.Param}
		}
	}
	return out
}

// queryKeys appends the keys a query looks up for the plain key k: k
// itself when it stays plain, else its tag under every key of blind,
// so that rows not yet rebuilt after a rotation are still found.
func (p *params) queryKeys(blind *BlindKeys, out []string, k string) []string {
	if p.plainKey(k) {
		return append(out, k)
	}
	for _, id := range blind.ids {
		out = append(out, blind.tag(id, k))
	}
	return out
}
