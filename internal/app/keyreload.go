package app

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/store/sealed"
)

// startKeyReloads starts, for each sealed partition, a goroutine that
// reads its keys record again every third of the record's view TTL
// (5 s by default), so that a key staged, promoted or retired by a
// rotation reaches this server well within the TTL. The sealed store
// also reloads by itself when its copy reaches the TTL before a write
// or a search, and after a value names a key it lacks: these
// goroutines keep those loads off the request path. Close stops them.
func (a *App) startKeyReloads() {
	ctx, cancel := context.WithCancel(context.Background())
	a.stopReload = cancel
	for _, s := range a.Services {
		if s.keys == nil {
			continue
		}
		a.reloads.Add(1)
		go func() {
			defer a.reloads.Done()
			for {
				every := max(s.keys.Rings().MaxAge/3, 10*time.Millisecond)
				select {
				case <-ctx.Done():
					return
				case <-time.After(every):
				}
				before := ringState(s.keys.Rings())
				lctx, done := context.WithTimeout(ctx, every)
				err := s.keys.Reload(lctx)
				done()
				if err != nil && ctx.Err() == nil {
					a.logger.Warn("reloading an encrypted partition's keys", "partition", s.Partition, "err", err)
				}
				if after := ringState(s.keys.Rings()); err == nil && after != before {
					a.logger.Info("an encrypted partition's keys changed", "partition", s.Partition, "keys", after)
				}
			}
		}()
	}
}

// ringState names the keys of rings by id, the current ones marked:
// "data 1 2*, blind 1*" (ids only, never key material).
func ringState(r sealed.Rings) string {
	ids := func(all []uint32, current uint32) string {
		var b strings.Builder
		for _, id := range all {
			fmt.Fprintf(&b, " %d", id)
			if id == current {
				b.WriteString("*")
			}
		}
		return b.String()
	}
	return "data" + ids(r.Data.IDs(), r.Data.CurrentID()) + ", blind" + ids(r.Blind.IDs(), r.Blind.CurrentID())
}
