package app

import (
	"context"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/audit"
)

// Maintain runs the hourly work (signing key rotation by age, client
// secret expiry, audit retention) until ctx ends.
func (a *App) Maintain(ctx context.Context) {
	t := time.NewTicker(time.Hour)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := a.Auth.Maintain(ctx); err != nil && ctx.Err() == nil {
				a.logger.Error("auth maintenance", "err", err)
			}
			cutoff := time.Now().AddDate(-a.cfg.AuditRetentionYears, 0, 0)
			if n, err := audit.Purge(ctx, a.Recorder, a.AuditLog, cutoff); err != nil && ctx.Err() == nil {
				a.logger.Error("audit retention", "err", err)
			} else if n > 0 {
				a.logger.Info("audit retention: purged old records", "records", n)
			}
		}
	}
}
