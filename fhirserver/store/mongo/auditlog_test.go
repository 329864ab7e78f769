package mongo_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/audit"
	kmongo "github.com/kiln-fhir/kiln/fhirserver/store/mongo"
	"github.com/kiln-fhir/kiln/fhirserver/store/mongo/mongotest"
	"github.com/kiln-fhir/kiln/fhirserver/store/storetest"
)

// openLog opens a log on a new database at MONGODB_URI, dropped when the
// test ends.
func openLog(t *testing.T) (*kmongo.Log, kmongo.Config) {
	t.Helper()
	cfg := kmongo.Config{URI: mongotest.URI(t), Database: mongotest.NewName()}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := kmongo.OpenLog(ctx, cfg)
	if err != nil {
		t.Fatalf("OpenLog: %v", err)
	}
	t.Cleanup(func() {
		l.Close()
		mongotest.Drop(t, cfg.Database)
	})
	return l, cfg
}

// TestLogContract runs the log contract on a database, opened again
// through another connection.
func TestLogContract(t *testing.T) {
	first, cfg := openLog(t)
	opened := false
	storetest.RunLog(t, func(t *testing.T) storetest.Log {
		if !opened {
			opened = true
			return first
		}
		l, err := kmongo.OpenLog(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return l
	})
}

func TestLogConfig(t *testing.T) {
	ctx := context.Background()
	for _, cfg := range []kmongo.Config{
		{URI: "", Database: "x"},
		{URI: "mongodb://127.0.0.1:1/", Database: ""},
		{URI: "mongodb://127.0.0.1:1/", Database: "x", WriteConcern: "some"},
	} {
		if l, err := kmongo.OpenLog(ctx, cfg); err == nil {
			l.Close()
			t.Errorf("OpenLog(%+v) succeeded", cfg)
		}
	}
}

// TestLogCarriesTheAuditChain runs the audit recorder, Verify and Purge on
// the log.
func TestLogCarriesTheAuditChain(t *testing.T) {
	ctx := context.Background()
	l, _ := openLog(t)
	var clock atomic.Int64 // unix seconds
	clock.Store(time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC).Unix())
	now := func() time.Time { return time.Unix(clock.Load(), 0).UTC() }
	rec, err := audit.NewRecorder(ctx, l, audit.Options{BatchSize: 7, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close(ctx)
	for i := range 30 {
		if i == 20 {
			if err := rec.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			clock.Add(3600)
		}
		if err := rec.Record(ctx, audit.Event{Subtype: audit.SubtypeRead, Status: 200, Entity: audit.Entity{What: fmt.Sprintf("Patient/%d", i)}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := rec.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if rep, err := audit.Verify(ctx, l, nil); err != nil || !rep.OK || rep.Checked != 30 || rep.Head != 30 {
		t.Fatalf("Verify: %+v, %v", rep, err)
	}
	n, err := audit.Purge(ctx, rec, l, now().Add(-time.Minute))
	if err != nil || n != 20 {
		t.Fatalf("Purge: %d, %v; want 20", n, err)
	}
	if rep, err := audit.Verify(ctx, l, nil); err != nil || !rep.OK || rep.Checked != 11 || rep.Head != 31 {
		t.Fatalf("Verify after the purge: %+v, %v", rep, err)
	}
}
