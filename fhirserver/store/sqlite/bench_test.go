package sqlite

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/store"
)

// benchBody is a ~2 KB resource, the size of a typical Patient or
// Observation.
func benchBody(id string) []byte {
	return fmt.Appendf(nil, `{"resourceType":"Patient","id":%q,"meta":{"versionId":"1"},"text":{"status":"generated","div":"<div xmlns=\"http://www.w3.org/1999/xhtml\">%s</div>"}}`,
		id, strings.Repeat("lorem ipsum ", 165))
}

func benchOpen(b *testing.B, sync string) *Store {
	b.Helper()
	s, err := open(context.Background(), filepath.Join(b.TempDir(), "bench.db"), options{synchronous: sync})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

func benchWrite(id string, version int64) store.Write {
	return store.Write{Type: "Patient", ID: id, Version: version, LastUpdated: time.Now(), Method: store.MethodCreate, Body: benchBody(id)}
}

// fill writes n resources (one version each) in batches of one transaction.
func fill(b *testing.B, s *Store, n int) {
	b.Helper()
	for i := 0; i < n; i += 500 {
		err := s.Transact(context.Background(), func(tx store.Tx) error {
			for j := i; j < min(i+500, n); j++ {
				if err := tx.Put(context.Background(), benchWrite(fmt.Sprintf("p%d", j), 1)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRead: the hot path, current version of a random resource among
// 10,000, from all CPUs.
func BenchmarkRead(b *testing.B) {
	const n = 10000
	s := benchOpen(b, defaultSynchronous)
	fill(b, s, n)
	var seed atomic.Uint64
	b.SetBytes(int64(len(benchBody("p0"))))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		x := seed.Add(0x9E3779B97F4A7C15)
		for pb.Next() {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
			if _, err := s.Read(context.Background(), "Patient", fmt.Sprintf("p%d", x%n)); err != nil {
				b.Error(err) // not Fatal: this is not the benchmark's goroutine
				return
			}
		}
	})
}

// BenchmarkPutCreate: one create per transaction, one after the other: the
// commit (and with FULL, the fsync) rate of a single client.
func BenchmarkPutCreate(b *testing.B) {
	for _, sync := range []string{"FULL", "NORMAL"} {
		b.Run("synchronous="+sync, func(b *testing.B) {
			s := benchOpen(b, sync)
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				if err := s.Put(context.Background(), benchWrite(fmt.Sprintf("c%d", i), 1)); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commits/s")
		})
	}
}

// BenchmarkPutCreateParallel: creates from all CPUs (and 4 goroutines per
// CPU, as HTTP handlers would be); they queue for the single writer.
func BenchmarkPutCreateParallel(b *testing.B) {
	for _, sync := range []string{"FULL", "NORMAL"} {
		b.Run("synchronous="+sync, func(b *testing.B) {
			s := benchOpen(b, sync)
			var next atomic.Int64
			b.SetParallelism(4)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					id := fmt.Sprintf("c%d", next.Add(1))
					if err := s.Put(context.Background(), benchWrite(id, 1)); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commits/s")
		})
	}
}

// BenchmarkPutUpdate: the compare-and-swap on an existing resource.
func BenchmarkPutUpdate(b *testing.B) {
	s := benchOpen(b, defaultSynchronous)
	fill(b, s, 1)
	b.ResetTimer()
	for v := int64(2); b.Loop(); v++ {
		w := benchWrite("p0", v)
		w.Method = store.MethodUpdate
		if err := s.Put(context.Background(), w); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkHistoryPage: pages of 20, walking the history of 10,000
// versions from the newest (restarting at the end), per level, and with _at
// (the versions current an hour from now) at the system level.
func BenchmarkHistoryPage(b *testing.B) {
	const n = 10000
	s := benchOpen(b, defaultSynchronous)
	fill(b, s, n/2)
	// A second version of every resource, and one resource with many.
	err := s.Transact(context.Background(), func(tx store.Tx) error {
		for j := 0; j < n/2; j++ {
			w := benchWrite(fmt.Sprintf("p%d", j), 2)
			if j == 0 {
				continue
			}
			if err := tx.Put(context.Background(), w); err != nil {
				return err
			}
		}
		for v := int64(2); v <= 1000; v++ {
			if err := tx.Put(context.Background(), benchWrite("p0", v)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	soon := time.Now().Add(time.Hour)
	for _, q := range []store.HistoryQuery{{}, {Type: "Patient"}, {Type: "Patient", ID: "p0"}, {AtLow: soon.Add(-time.Millisecond), AtHigh: soon}} {
		name := map[bool]string{true: "system", false: "type"}[q.Type == ""]
		if q.ID != "" {
			name = "instance"
		}
		if !q.AtLow.IsZero() {
			name = "system_at"
		}
		q.Count = 20
		b.Run(name, func(b *testing.B) {
			cur := ""
			for b.Loop() {
				q.Cursor = cur
				page, err := s.History(context.Background(), q)
				if err != nil {
					b.Fatal(err)
				}
				if len(page.Versions) == 0 {
					b.Fatal("empty page")
				}
				cur = page.Next
			}
		})
	}
}

// BenchmarkSecureDelete: what zeroing freed space costs the writer, with
// it (the default) and without: updates of Observations with their index
// rows (each update frees the old rows' cells, which secure_delete
// zeroes), and creates of 100 per transaction (which free nothing).
func BenchmarkSecureDelete(b *testing.B) {
	for _, mode := range []string{"on", "off"} {
		b.Run("update/secure_delete="+mode, func(b *testing.B) {
			s, err := open(context.Background(), filepath.Join(b.TempDir(), "bench.db"), options{synchronous: defaultSynchronous, keepFreed: mode == "off"})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { s.Close() })
			r := rand.New(rand.NewPCG(5, 6))
			const n = 1000
			versions := make([]int64, n)
			for i := range n {
				if err := s.Put(context.Background(), observationWrite(r, i%100, i)); err != nil {
					b.Fatal(err)
				}
				versions[i] = 1
			}
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				k := i % n
				w := observationWrite(r, k%100, k)
				versions[k]++
				w.Version, w.Method = versions[k], store.MethodUpdate
				if err := s.Put(context.Background(), w); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "updates/s")
		})
		b.Run("create100/secure_delete="+mode, func(b *testing.B) {
			s, err := open(context.Background(), filepath.Join(b.TempDir(), "bench.db"), options{synchronous: defaultSynchronous, keepFreed: mode == "off"})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { s.Close() })
			r := rand.New(rand.NewPCG(3, 4))
			i := 0
			for b.Loop() {
				err := s.Transact(context.Background(), func(tx store.Tx) error {
					for range 100 {
						if err := tx.Put(context.Background(), observationWrite(r, i%1000, i)); err != nil {
							return err
						}
						i++
					}
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(i)/b.Elapsed().Seconds(), "resources/s")
		})
	}
}
