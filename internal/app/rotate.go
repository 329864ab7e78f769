package app

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/store"
)

// A key rotation of an encrypted partition is a job whose state is one
// record of the partition's store (kind rotationJobKind, id the
// partition's name; plain JSON beside the keys record, outside the seal:
// it holds ids, counts and times, no key and no data). The command that
// runs it holds a lease in that record, renewed as it works; a command
// that finds the job unfinished and its lease lapsed carries on from the
// record's phase and cursor. docs/format/partition-keys.md describes the
// protocol and both records; the steps are in rotate_steps.go.
const rotationJobKind = "key-rotation"

// rotationJobFormat is the version of the job record this build writes.
const rotationJobFormat = 1

// The rings a rotation rotates.
const (
	RingData  = "data"
	RingBlind = "blind"
)

// The phases of a rotation job, in order (a data rotation verifies, a
// blind one rebuilds the index instead of re-wrapping).
const (
	PhaseStage         = "stage"          // adding the new key, staged
	PhaseStaged        = "staged"         // waiting for every server to load it
	PhasePromoted      = "promoted"       // it seals or tags; waiting for writes under the old keys to land
	PhaseRewrap        = "rewrap"         // data: re-wrapping every version's body
	PhaseRewrapRecords = "rewrap-records" // data: … and every record's value
	PhaseVerify        = "verify"         // data: a second pass, which must find nothing left
	PhaseVerifyRecords = "verify-records" // data: … over the records
	PhaseRebuild       = "rebuild"        // blind: reindexing every current resource
	PhaseRetire        = "retire"         // removing the old keys from the ring
	PhaseDone          = "done"
)

// RotationJob is a partition's key rotation as its record holds it.
type RotationJob struct {
	Format    int    `json:"v"`
	Partition string `json:"partition"`
	// Ring is RingData or RingBlind; Target the id of the key it adds.
	Ring   string `json:"ring"`
	Target uint32 `json:"target"`
	Phase  string `json:"phase"`
	// Cursor continues the phase's pass: a history cursor of the store
	// under the seal (rewrap, verify), or a search cursor of the resource
	// type CursorType (rebuild); "" is the start.
	Cursor     string `json:"cursor,omitempty"`
	CursorType string `json:"cursor_type,omitempty"`
	// UpdatedBefore bounds the rebuild to the resources last updated
	// before it (its start): those written since were tagged under the
	// new key by their writers.
	UpdatedBefore time.Time `json:"updated_before,omitzero"`
	// Done of Total values (rewrap, verify) or resources (rebuild) of the
	// phase's pass. Total is counted when the pass starts; values written
	// meanwhile may take Done past it.
	Done  int64 `json:"done"`
	Total int64 `json:"total"`
	// Rewrapped counts the values the re-wrap moved; Found those the
	// verification found still under old keys, in its latest round
	// (Round, from 1).
	Rewrapped int64 `json:"rewrapped,omitempty"`
	Found     int64 `json:"found,omitempty"`
	Round     int   `json:"round,omitempty"`
	// Retired are the old keys' ids removed at the end; Kept those left in
	// the ring because values may still be under them.
	Retired []uint32 `json:"retired,omitempty"`
	Kept    []uint32 `json:"kept,omitempty"`
	// Started, PhaseStarted, Updated and Finished are wall-clock times of
	// the commands that ran the job.
	Started      time.Time `json:"started"`
	PhaseStarted time.Time `json:"phase_started"`
	Updated      time.Time `json:"updated"`
	Finished     time.Time `json:"finished,omitzero"`
	// Owner names the command holding the lease (host, process, random),
	// which lapses at LeaseUntil unless renewed; "" when none holds it.
	Owner      string    `json:"owner,omitempty"`
	LeaseUntil time.Time `json:"lease_until,omitzero"`

	version int64 // the record's version
}

// RotateOptions configure RotateKeys.
type RotateOptions struct {
	// Partition is the encrypted partition ("workforce").
	Partition string
	// Ring: RingData or RingBlind for a new rotation ("": RingData). A
	// rotation under way is carried on whichever ring it rotates; naming
	// the other one is an error.
	Ring string
	// Page is how many values (or resources) one step handles (0: 500).
	Page int
	// Lease is how long the job's lease outlives its last step (0: 30 s):
	// after a kill, another command can carry the job on that much later.
	Lease time.Duration
	// Rate, when positive, is the most values (or resources) a second the
	// job handles, to spare a busy server.
	Rate float64
	// Progress, when set, is told after every step and while waiting.
	Progress func(RotationProgress)
	// Now is the clock of the job record's times and of leases (nil:
	// time.Now); the waits are measured on the monotonic clock.
	Now func() time.Time

	// killAt, in tests, stops the job as a kill would (the lease is not
	// released) when it returns true.
	killAt func(RotationProgress) bool
}

// RotationProgress is where a rotation is.
type RotationProgress struct {
	Partition, Ring, Phase string
	Target                 uint32
	// Done and Total as in RotationJob; PerSecond is this command's rate
	// in the phase, ETA the time left at that rate (0: unknown).
	Done, Total int64
	PerSecond   float64
	ETA         time.Duration
	// Wait is, in a waiting phase, how long is left.
	Wait time.Duration
}

// RotationBusyError: another command holds the lease of the rotation.
type RotationBusyError struct {
	Partition, Ring, Owner string
	Until                  time.Time
}

func (e *RotationBusyError) Error() string {
	return fmt.Sprintf("a rotation of the %s partition's %s keys is running in another command (%s); its lease, renewed as it works, runs until %s: run this again after that to carry the rotation on if it stopped",
		e.Partition, e.Ring, e.Owner, e.Until.UTC().Format(time.RFC3339))
}

// errKilled ends a job stopped by the test hook killAt.
var errKilled = errors.New("rotation killed (test)")

// RotationStatus is the partition's rotation job as last recorded (nil
// when no rotation ever ran).
func (a *App) RotationStatus(ctx context.Context, partition string) (*RotationJob, error) {
	s, err := a.sealedService(partition)
	if err != nil {
		return nil, err
	}
	job, err := readJob(ctx, s.inner, partition)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	return job, err
}

// sealedService is the service of an encrypted partition.
func (a *App) sealedService(partition string) (*Service, error) {
	i := slices.IndexFunc(a.Services, func(s *Service) bool { return s.Partition == partition })
	switch {
	case i < 0:
		return nil, fmt.Errorf("no partition %q is mounted", partition)
	case a.Services[i].keys == nil:
		return nil, fmt.Errorf("the %s partition is not encrypted: it has no keys to rotate", partition)
	}
	return a.Services[i], nil
}

func readJob(ctx context.Context, rec store.Records, partition string) (*RotationJob, error) {
	r, err := rec.GetRecord(ctx, rotationJobKind, partition)
	if err != nil {
		return nil, err
	}
	var job RotationJob
	if err := json.Unmarshal(r.Value, &job); err != nil {
		return nil, fmt.Errorf("the %s partition's rotation record: %w", partition, err)
	}
	if job.Format > rotationJobFormat {
		return nil, fmt.Errorf("the %s partition's rotation record has format %d, newer than this build reads (%d)", partition, job.Format, rotationJobFormat)
	}
	job.version = r.Version
	return &job, nil
}

// rotation is one command's run of a job.
type rotation struct {
	a     *App
	s     *Service
	opts  RotateOptions
	job   *RotationJob
	owner string
	// The phase's progress in this run: the job's Done when this run
	// started it, and when.
	runDone  int64
	runStart time.Time
}

// RotateKeys runs the partition's key rotation to its end: a new one
// (of opts.Ring), or the one under way, from where its record says it
// is. It returns the job as it left it. When ctx ends it stops after the
// current step, records where it is and releases its lease, so that the
// next call carries on at once; after a kill the next call waits for the
// lease to lapse (a *RotationBusyError until then).
func (a *App) RotateKeys(ctx context.Context, opts RotateOptions) (*RotationJob, error) {
	s, err := a.sealedService(opts.Partition)
	if err != nil {
		return nil, err
	}
	if opts.Ring != "" && opts.Ring != RingData && opts.Ring != RingBlind {
		return nil, fmt.Errorf("unknown key ring %q: want %s or %s", opts.Ring, RingData, RingBlind)
	}
	if opts.Page <= 0 {
		opts.Page = 500
	}
	if opts.Lease <= 0 {
		opts.Lease = 30 * time.Second
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	r := &rotation{a: a, s: s, opts: opts, owner: newOwner()}
	if err := r.begin(ctx); err != nil {
		return r.job, err
	}
	err = r.run(ctx)
	if err != nil && !errors.Is(err, errKilled) {
		r.release()
	}
	return r.job, err
}

// newOwner names this command in the lease: where it runs, and a random
// part so that two commands of one process differ.
func newOwner() string {
	host, _ := os.Hostname()
	b := make([]byte, 4)
	rand.Read(b)
	return fmt.Sprintf("%s pid %d #%s", host, os.Getpid(), hex.EncodeToString(b))
}

// begin takes the job's lease: a new job when none is under way, else
// the one under way when its lease is free or lapsed.
func (r *rotation) begin(ctx context.Context) error {
	job, err := readJob(ctx, r.s.inner, r.opts.Partition)
	var prev int64
	switch {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		return err
	case job.Phase != PhaseDone:
		if r.opts.Ring != "" && r.opts.Ring != job.Ring {
			return fmt.Errorf("a rotation of the %s partition's %s keys is under way (phase %s): carry it to its end first (leave out --ring, or give --ring %s)",
				job.Partition, job.Ring, job.Phase, job.Ring)
		}
		if job.Owner != "" && r.opts.Now().Before(job.LeaseUntil) {
			return &RotationBusyError{Partition: job.Partition, Ring: job.Ring, Owner: job.Owner, Until: job.LeaseUntil}
		}
		r.job = job
		return r.save(ctx)
	default:
		prev = job.version
	}
	ring := r.opts.Ring
	if ring == "" {
		ring = RingData
	}
	keys, _, err := readPartitionKeys(ctx, r.s.inner, r.a.master, r.opts.Partition)
	if err != nil {
		return err
	}
	ids, current := ringOf(keys, ring)
	target := newestID(ids) + 1
	if newestID(ids) > current {
		target = newestID(ids) // a key staged by a job whose record was lost
	}
	keys.wipe()
	now := r.now()
	r.job = &RotationJob{Format: rotationJobFormat, Partition: r.opts.Partition, Ring: ring, Target: target, Phase: PhaseStage,
		Started: now, PhaseStarted: now, version: prev}
	return r.save(ctx)
}

// ringOf is the ring of keys that ring names, and its current id.
func ringOf(k *partitionKeys, ring string) (map[uint32][]byte, uint32) {
	if ring == RingBlind {
		return k.Blind, k.blindCurrent()
	}
	return k.Data, k.dataCurrent()
}

// save writes the job record (a compare-and-swap on its version) with
// this command's lease renewed.
func (r *rotation) save(ctx context.Context) error {
	now := r.now()
	j := r.job
	j.Owner, j.LeaseUntil, j.Updated = r.owner, now.Add(r.opts.Lease), now
	if j.Phase == PhaseDone {
		j.Owner, j.LeaseUntil = "", time.Time{}
	}
	return r.put(ctx)
}

func (r *rotation) put(ctx context.Context) error {
	j := r.job
	value, err := json.Marshal(j)
	if err != nil {
		return err
	}
	err = r.s.inner.PutRecord(ctx, store.Record{Kind: rotationJobKind, ID: j.Partition, Version: j.version + 1, Value: value})
	if errors.Is(err, store.ErrConflict) {
		return fmt.Errorf("the %s partition's rotation record changed under this command (another command took the rotation over, or started one): %w", j.Partition, err)
	}
	if err != nil {
		return err
	}
	j.version++
	return nil
}

// release gives the lease up, so that the next command carries on at
// once; best effort, after the command's context may have ended.
func (r *rotation) release() {
	if r.job == nil || r.job.Owner != r.owner || r.job.Phase == PhaseDone {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r.job.Owner, r.job.LeaseUntil = "", time.Time{}
	if err := r.put(ctx); err != nil {
		r.a.logger.Warn("releasing the rotation's lease", "partition", r.job.Partition, "err", err)
	}
}

// enter moves the job to phase. A pass (rewrap, verify, rebuild) starts
// from nothing, with total to do; the other phases keep the counts of
// the last pass, for the record.
func (r *rotation) enter(ctx context.Context, phase string, total int64) error {
	j := r.job
	j.Phase, j.PhaseStarted = phase, r.now()
	j.Cursor, j.CursorType = "", ""
	if phase == PhaseRewrap || phase == PhaseVerify || phase == PhaseRebuild {
		j.Done, j.Total = 0, total
	}
	r.runDone, r.runStart = j.Done, time.Now()
	return r.save(ctx)
}

// now is the job's clock, in UTC.
func (r *rotation) now() time.Time { return r.opts.Now().UTC() }

// progress tells the caller where the job is; wait is the time left of
// a waiting phase.
func (r *rotation) progress(wait time.Duration) error {
	j := r.job
	p := RotationProgress{Partition: j.Partition, Ring: j.Ring, Phase: j.Phase, Target: j.Target, Done: j.Done, Total: j.Total, Wait: wait}
	if el := time.Since(r.runStart).Seconds(); el > 0 && !r.runStart.IsZero() {
		p.PerSecond = float64(j.Done-r.runDone) / el
		if p.PerSecond > 0 && j.Total > j.Done {
			p.ETA = time.Duration(float64(j.Total-j.Done) / p.PerSecond * float64(time.Second))
		}
	}
	if r.opts.Progress != nil {
		r.opts.Progress(p)
	}
	if r.opts.killAt != nil && r.opts.killAt(p) {
		return errKilled
	}
	return nil
}

// stepped records a step that handled n values: the job's record
// (cursor, counts, lease), then the caller, then the rate's pause.
func (r *rotation) stepped(ctx context.Context, n int) error {
	r.job.Done += int64(n)
	if r.runStart.IsZero() {
		r.runDone, r.runStart = r.job.Done-int64(n), time.Now()
	}
	if err := r.save(ctx); err != nil {
		return err
	}
	if err := r.progress(0); err != nil {
		return err
	}
	if r.opts.Rate > 0 {
		due := time.Duration(float64(r.job.Done-r.runDone) / r.opts.Rate * float64(time.Second))
		return sleep(ctx, due-time.Since(r.runStart))
	}
	return ctx.Err()
}

// wait waits d, renewing the lease and telling the caller as it goes.
func (r *rotation) wait(ctx context.Context, d time.Duration) error {
	end := time.Now().Add(d)
	for {
		left := time.Until(end)
		if err := r.progress(max(left, 0)); err != nil {
			return err
		}
		if left <= 0 {
			return nil
		}
		if err := sleep(ctx, min(left, r.opts.Lease/3)); err != nil {
			return err
		}
		if err := r.save(ctx); err != nil {
			return err
		}
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// PartitionKeyIDs names the keys of an encrypted partition by id, the
// current ones marked (ids only, never key material): "data 1 2*, blind 1*".
func (a *App) PartitionKeyIDs(ctx context.Context, partition string) (string, error) {
	s, err := a.sealedService(partition)
	if err != nil {
		return "", err
	}
	keys, _, err := readPartitionKeys(ctx, s.inner, a.master, partition)
	if err != nil {
		return "", err
	}
	defer keys.wipe()
	rings, err := keys.rings()
	if err != nil {
		return "", err
	}
	return ringState(rings), nil
}
