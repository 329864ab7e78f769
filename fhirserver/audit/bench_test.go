package audit

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"
)

// BenchmarkRecord measures events/s through Record and a final Flush on
// SQLite, with the default queue and batch sizes.
func BenchmarkRecord(b *testing.B) {
	for _, bc := range []struct {
		name     string
		parallel bool
	}{{"serial", false}, {"parallel", true}} {
		b.Run(bc.name, func(b *testing.B) {
			st, _ := openLog(b)
			r, err := NewRecorder(context.Background(), st, Options{
				FlushInterval: time.Second,
				Logger:        slog.New(slog.NewTextHandler(io.Discard, nil)),
			})
			if err != nil {
				b.Fatal(err)
			}
			defer r.Close(context.Background())
			ctx := context.Background()
			ev := sampleEvent(1)
			b.ReportAllocs()
			b.ResetTimer()
			if bc.parallel {
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if err := r.Record(ctx, ev); err != nil {
							b.Error(err)
							return
						}
					}
				})
			} else {
				for range b.N {
					if err := r.Record(ctx, ev); err != nil {
						b.Fatal(err)
					}
				}
			}
			if err := r.Flush(ctx); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

// BenchmarkVerify measures records/s checked by Verify on SQLite.
func BenchmarkVerify(b *testing.B) {
	const n = 20000
	st, _ := openLog(b)
	r, err := NewRecorder(context.Background(), st, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for i := range n {
		if err := r.Record(ctx, sampleEvent(i)); err != nil {
			b.Fatal(err)
		}
	}
	if err := r.Close(ctx); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		rep, err := Verify(ctx, st, nil)
		if err != nil || !rep.OK || rep.Checked != n {
			b.Fatalf("%+v %v", rep, err)
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
}
