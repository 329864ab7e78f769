package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/kiln-fhir/kiln/internal/app"
)

// runPartitionKeysRotate is `kiln admin keys rotate --partition P`: the
// key rotation of an encrypted partition (app.RotateKeys), run beside
// the servers, printing its progress; or, with --status, where the
// partition's rotation is.
func runPartitionKeysRotate(ctx context.Context, a *app.App, o partitionRotateFlags, stdout io.Writer) error {
	if o.status {
		return printRotationStatus(ctx, a, o.partition, stdout)
	}
	p := &progressPrinter{out: stdout, every: 2 * time.Second}
	job, err := a.RotateKeys(ctx, app.RotateOptions{Partition: o.partition, Ring: o.ring, Page: o.page, Lease: o.lease, Rate: o.rate, Progress: p.print})
	switch {
	case err == nil:
	case errors.Is(err, context.Canceled) && job != nil:
		p.flush()
		return fmt.Errorf("stopped in phase %s (%d/%d); run the command again to carry the rotation on from there", job.Phase, job.Done, job.Total)
	default:
		p.flush()
		return err
	}
	p.flush()
	fmt.Fprintf(stdout, "rotate %s %s keys: done: key %d is current", job.Partition, job.Ring, job.Target)
	if len(job.Retired) > 0 {
		fmt.Fprintf(stdout, "; key %s retired", idList(job.Retired))
	}
	if job.Ring == app.RingData {
		fmt.Fprintf(stdout, "; %d values re-wrapped", job.Rewrapped)
	} else {
		fmt.Fprintf(stdout, "; %d resources reindexed", job.Done)
	}
	fmt.Fprintln(stdout)
	if len(job.Kept) > 0 {
		fmt.Fprintf(stdout, "rotate %s %s keys: key %s kept: values under it kept turning up after the re-wrap (writes that outlived the bounds); run the command again to re-wrap them and retire it\n",
			job.Partition, job.Ring, idList(job.Kept))
	}
	return nil
}

// partitionRotateFlags are the flags of a partition's rotation.
type partitionRotateFlags struct {
	partition, ring string
	page            int
	lease           time.Duration
	rate            float64
	status          bool
}

func idList(ids []uint32) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = fmt.Sprint(id)
	}
	return strings.Join(s, ", ")
}

// printRotationStatus prints the partition's keys (ids only) and its
// rotation job as last recorded.
func printRotationStatus(ctx context.Context, a *app.App, partition string, stdout io.Writer) error {
	ids, err := a.PartitionKeyIDs(ctx, partition)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s keys: %s (* current)\n", partition, ids)
	job, err := a.RotationStatus(ctx, partition)
	if err != nil {
		return err
	}
	if job == nil {
		fmt.Fprintf(stdout, "%s: no rotation has run\n", partition)
		return nil
	}
	fmt.Fprintf(stdout, "%s: %s rotation to key %d, phase %s, %d/%d, started %s, last step %s\n", partition, job.Ring, job.Target, job.Phase,
		job.Done, job.Total, job.Started.Format(time.RFC3339), job.Updated.Format(time.RFC3339))
	switch {
	case job.Phase == app.PhaseDone:
		fmt.Fprintf(stdout, "%s: finished %s; retired %s; kept %s\n", partition, job.Finished.Format(time.RFC3339), orNone(job.Retired), orNone(job.Kept))
	case job.Owner != "" && time.Now().Before(job.LeaseUntil):
		fmt.Fprintf(stdout, "%s: running in %s (lease until %s)\n", partition, job.Owner, job.LeaseUntil.Format(time.RFC3339))
	case job.Owner != "":
		fmt.Fprintf(stdout, "%s: stopped (the lease of %s lapsed at %s); kiln admin keys rotate --partition %s carries it on\n",
			partition, job.Owner, job.LeaseUntil.Format(time.RFC3339), partition)
	default:
		fmt.Fprintf(stdout, "%s: stopped; kiln admin keys rotate --partition %s carries it on\n", partition, partition)
	}
	return nil
}

func orNone(ids []uint32) string {
	if len(ids) == 0 {
		return "none"
	}
	return "key " + idList(ids)
}

// progressPrinter prints a rotation's progress: each phase as it
// starts, then a line every so often, and the last line of a pass.
type progressPrinter struct {
	out     io.Writer
	every   time.Duration
	phase   string
	printed time.Time
	pending string // the latest line not printed yet
}

func (p *progressPrinter) print(r app.RotationProgress) {
	if r.Phase == p.phase && r.Wait == 0 && (r.Phase == app.PhaseStaged || r.Phase == app.PhasePromoted) {
		return // the end of a wait: the next phase says what follows
	}
	line := progressLine(r)
	if r.Phase != p.phase {
		p.flush()
		p.phase = r.Phase
		p.emit(line)
		return
	}
	if time.Since(p.printed) >= p.every {
		p.emit(line)
		return
	}
	p.pending = line
}

func (p *progressPrinter) emit(line string) {
	fmt.Fprintln(p.out, line)
	p.printed, p.pending = time.Now(), ""
}

// flush prints the latest line if it was held back.
func (p *progressPrinter) flush() {
	if p.pending != "" {
		p.emit(p.pending)
	}
}

// progressLine is one line of progress: what the phase does, and
// done/total, rate and ETA for a pass, or the time left for a wait.
func progressLine(r app.RotationProgress) string {
	head := fmt.Sprintf("rotate %s %s keys: ", r.Partition, r.Ring)
	switch r.Phase {
	case app.PhaseStage:
		return head + fmt.Sprintf("adding key %d, staged", r.Target)
	case app.PhaseStaged:
		return head + fmt.Sprintf("key %d staged; waiting %s for every server to load it", r.Target, r.Wait.Round(time.Second/10))
	case app.PhasePromoted:
		what := "seals"
		if r.Ring == app.RingBlind {
			what = "tags"
		}
		return head + fmt.Sprintf("key %d %s from now on; waiting %s for every server to use it and for writes under the old key to land", r.Target, what, r.Wait.Round(time.Second/10))
	case app.PhaseRetire:
		return head + "retiring the old keys"
	case app.PhaseDone:
		return head + "finished"
	}
	unit, pass := "values", r.Phase
	switch r.Phase {
	case app.PhaseRebuild:
		unit = "resources"
	case app.PhaseRewrapRecords:
		pass = app.PhaseRewrap // the records are the pass's last values
	case app.PhaseVerifyRecords:
		pass = app.PhaseVerify
	}
	if r.Wait > 0 {
		return head + fmt.Sprintf("%s: waiting %s for late writes to land", pass, r.Wait.Round(time.Second/10))
	}
	eta := "ETA -"
	if r.ETA > 0 {
		eta = "ETA " + r.ETA.Round(time.Second).String()
	} else if r.Done >= r.Total {
		eta = "ETA 0s"
	}
	return head + fmt.Sprintf("%s %d/%d %s, %.0f/s, %s", pass, r.Done, r.Total, unit, r.PerSecond, eta)
}
