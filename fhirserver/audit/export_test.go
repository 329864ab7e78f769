package audit

import (
	"bufio"
	"bytes"
	"context"
	"testing"
	"time"
)

// Export writes, oldest first, exactly the records recorded since a time
// and of one partition, byte for byte as stored, across several pages.
func TestExportSelectsBySinceAndPartition(t *testing.T) {
	l, _ := openLog(t)
	r := newRecorder(t, l, testOptions(t, nil))
	ctx := context.Background()
	record := func(from, n int) {
		for i := from; i < from+n; i++ {
			e := sampleEvent(i)
			e.Partition = []string{"clinical", "workforce", ""}[i%3]
			if err := r.Record(ctx, e); err != nil {
				t.Fatal(err)
			}
		}
		if err := r.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	record(0, 300)
	time.Sleep(5 * time.Millisecond)
	since := time.Now()
	time.Sleep(5 * time.Millisecond)
	record(300, 2*exportPage+200) // more than two pages

	for _, c := range []struct {
		name string
		q    ExportQuery
		want func(i int) bool
	}{
		{"all", ExportQuery{}, func(int) bool { return true }},
		{"since", ExportQuery{Since: since}, func(i int) bool { return i >= 300 }},
		{"workforce since", ExportQuery{Since: since, Partition: "workforce"}, func(i int) bool { return i >= 300 && i%3 == 1 }},
		{"clinical", ExportQuery{Partition: "clinical"}, func(i int) bool { return i%3 == 0 }},
		{"after everything", ExportQuery{Since: time.Now().Add(time.Hour)}, func(int) bool { return false }},
	} {
		t.Run(c.name, func(t *testing.T) {
			var out bytes.Buffer
			n, err := Export(ctx, l, c.q, &out)
			if err != nil {
				t.Fatal(err)
			}
			var want [][]byte
			for seq := int64(1); seq <= int64(300+2*exportPage+200); seq++ {
				if c.want(int(seq - 1)) {
					want = append(want, bodyOf(t, l, seq))
				}
			}
			sc := bufio.NewScanner(&out)
			sc.Buffer(nil, 1<<20)
			i := 0
			for sc.Scan() {
				if i >= len(want) || !bytes.Equal(sc.Bytes(), want[i]) {
					t.Fatalf("line %d is not the stored record expected", i)
				}
				i++
			}
			if i != len(want) || n != len(want) {
				t.Errorf("%d lines (n=%d), want %d", i, n, len(want))
			}
		})
	}
}
