package app

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkRotation runs whole key rotations of the workforce partition
// (SQLite) holding 2,000 workers (a Patient each, created and updated
// once: 4,000 versions), one rotation per op with the short test bounds,
// and reports the rate of the pass that does the work: values re-wrapped
// a second (data) or resources reindexed a second (blind), from the end
// of the wait before the pass to its last step, in pages of 500.
//
//	go test -run '^$' -bench Rotation -benchtime 3x ./internal/app
func BenchmarkRotation(b *testing.B) {
	for _, ring := range []string{RingData, RingBlind} {
		b.Run(ring, func(b *testing.B) {
			s := startServer(b, Storage{DataDir: b.TempDir()})
			for i := range 2000 {
				emp := fmt.Sprintf("EMP-%d", 100000+i)
				id, err := s.createWorker(emp)
				if err != nil {
					b.Fatal(err)
				}
				body := fmt.Sprintf(`{"resourceType":"Patient","id":%q,"identifier":[{"system":"https://example.org/sid/employee-id","value":%q}],"name":[{"family":"Updated"}]}`, id, emp)
				if status, _, err := s.do("PUT", "/workforce/fhir/Patient/"+id, []byte(body)); err != nil || status != 200 {
					b.Fatalf("update: %d %v", status, err)
				}
			}
			pass := PhaseRewrap
			if ring == RingBlind {
				pass = PhaseRebuild
			}
			var n int64
			var spent time.Duration
			for b.Loop() {
				var first, last time.Time
				var done int64
				_, err := s.a.RotateKeys(b.Context(), RotateOptions{Partition: PartitionWorkforce, Ring: ring, Progress: func(p RotationProgress) {
					switch {
					case p.Phase == PhasePromoted:
						first = time.Now() // its last call ends the wait
					case p.Phase == pass || ring == RingData && p.Phase == PhaseRewrapRecords:
						last, done = time.Now(), p.Done
					}
				}})
				if err != nil {
					b.Fatal(err)
				}
				n += done
				spent += last.Sub(first)
			}
			unit := "values/s"
			if ring == RingBlind {
				unit = "resources/s"
			}
			b.ReportMetric(float64(n)/spent.Seconds(), unit)
		})
	}
}
