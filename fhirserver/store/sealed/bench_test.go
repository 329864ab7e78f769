package sealed

import (
	"bytes"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/crypt"
	"github.com/kiln-fhir/kiln/fhirserver/store"
)

// body2KB is a 2 KB resource body.
func body2KB() []byte {
	b := []byte(`{"resourceType":"Patient","id":"0190f3a2-6c1e-7b4d-8a2f-1c9e5d7b3a02","text":"`)
	b = append(b, bytes.Repeat([]byte("x"), 2048-len(b)-2)...)
	return append(b, `"}`...)
}

func benchParams(b *testing.B) *params {
	return newTestKeys(b).params(b, "workforce")
}

// BenchmarkSeal2KB seals a 2 KB body with its additional data, as Put does.
func BenchmarkSeal2KB(b *testing.B) {
	p, body := benchParams(b), body2KB()
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.keys.Rings().Data.Seal(body, p.bodyAD("Patient", "0190f3a2-6c1e-7b4d-8a2f-1c9e5d7b3a02", 3)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkOpen2KB opens a sealed 2 KB body, as a read does.
func BenchmarkOpen2KB(b *testing.B) {
	p, body := benchParams(b), body2KB()
	v := &store.Version{Type: "Patient", ID: "0190f3a2-6c1e-7b4d-8a2f-1c9e5d7b3a02", Version: 3}
	sealed, err := p.keys.Rings().Data.Seal(body, p.bodyAD(v.Type, v.ID, v.Version))
	if err != nil {
		b.Fatal(err)
	}
	v.Body = sealed
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.open(b.Context(), v); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBlindRows blinds the index rows of the canary worker.
func BenchmarkBlindRows(b *testing.B) {
	p := benchParams(b)
	w := resourceWrite(b, worker(1, t0, canaryPhone), 1, t0)
	b.ReportAllocs()
	for b.Loop() {
		p.blindRows(p.keys.Rings().Blind, w.Index)
	}
	b.ReportMetric(float64(len(w.Index.Keys)), "keys")
}

// BenchmarkCreate creates workers (a Patient with its index rows, each a
// new resource) on the bare SQLite store and through the sealed store
// over SQLite: the ratio of the two is the price of the encrypted
// partition on a write.
func BenchmarkCreate(b *testing.B) {
	base := resourceWrite(b, worker(1, t0, canaryPhone), 1, t0)
	for _, c := range []struct {
		name string
		open func(b *testing.B, path string) store.Store
	}{
		{"sqlite", func(b *testing.B, path string) store.Store { return openSQLite(b, path) }},
		{"sealed", func(b *testing.B, path string) store.Store {
			return wrap(b, openSQLite(b, path), newTestKeys(b).config("workforce"))
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			s := c.open(b, filepath.Join(b.TempDir(), "bench.db"))
			defer s.Close()
			ctx := b.Context()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i++
				w := base
				w.ID = fmt.Sprintf("0190f3a2-6c1e-7b4d-8a2f-%012x", i)
				w.LastUpdated = t0.Add(time.Duration(i) * time.Millisecond)
				if err := s.Put(ctx, w); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRewrap is the re-wrap of a data-key rotation over SQLite: one
// op is a pass over 1,000 versions of 2 KB bodies (pages of 500, as the
// rotation job's default), each moved to the other of two keys, so every
// pass re-wraps every value. values/s is the figure of docs/benchmarks.md.
func BenchmarkRewrap(b *testing.B) {
	const versions = 1000
	keys := map[uint32][]byte{1: randomKey(), 2: randomKey()}
	var rings [2]*crypt.Keyring
	for i, current := range []uint32{2, 1} {
		r, err := crypt.NewKeyringWithCurrent(keys, current)
		if err != nil {
			b.Fatal(err)
		}
		rings[i] = r
	}
	blind, err := NewBlindKeys(map[uint32][]byte{1: randomKey()})
	if err != nil {
		b.Fatal(err)
	}
	inner := openSQLite(b, filepath.Join(b.TempDir(), "bench.db"))
	s := wrap(b, inner, Config{Partition: "workforce", Keyring: rings[1], Blind: blind})
	defer s.Close()
	body := body2KB()
	for i := range versions {
		w := plainWrite("Patient", fmt.Sprintf("0190f3a2-6c1e-7b4d-8a2f-%012x", i), 1, string(body))
		if err := s.Put(b.Context(), w); err != nil {
			b.Fatal(err)
		}
	}
	n := 0
	for b.Loop() {
		cursor := ""
		for {
			p, err := RewrapBodies(b.Context(), inner, rings[n%2], cursor, 500)
			if err != nil {
				b.Fatal(err)
			}
			if p.Rewrapped != p.Seen {
				b.Fatalf("a page re-wrapped %d of %d", p.Rewrapped, p.Seen)
			}
			if cursor = p.Next; cursor == "" {
				break
			}
		}
		n++
	}
	b.ReportMetric(float64(n*versions)/b.Elapsed().Seconds(), "values/s")
}
