package audit

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/store"
)

// ErrClosed is returned by Record after Close.
var ErrClosed = errors.New("audit: recorder closed")

// Source is the observer of the events: the server that records them.
type Source struct {
	Observer string // source.observer.display, e.g. "kiln"
	Site     string // source.site, e.g. the instance or host name
}

// Options configure a Recorder. The zero value is usable.
type Options struct {
	// QueueSize bounds the events held in memory, queued or being written
	// (default 4096). Record waits while it is reached.
	QueueSize int
	// BatchSize is the most events written in one append (default
	// 1000, at most QueueSize). A full batch is written at once.
	BatchSize int
	// FlushInterval is the longest an event waits before it is written
	// (default 1 s).
	FlushInterval time.Duration
	// Source names this server in every event (default observer "kiln").
	Source Source
	// Logger receives write failures and retries, with counts only
	// (default slog.Default()).
	Logger *slog.Logger
	// RetryMin and RetryMax bound the back-off after a failed write
	// (defaults 100 ms and 10 s).
	RetryMin, RetryMax time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// QueryKey keys the tags that replace the values of a recorded query
	// (KeyedQuery): the server's audit query key, so that its tags can
	// be confirmed later. Empty: a random key for this Recorder alone,
	// whose tags nobody can confirm (never the raw values).
	QueryKey []byte
}

// Recorder appends AuditEvents to the audit partition. It is safe for
// concurrent use.
type Recorder struct {
	dst   Log
	opts  Options
	log   *slog.Logger
	batch int

	mu          sync.Mutex
	queue       [][]byte      // accepted events' elements, not yet taken by the writer
	inflight    int           // taken by the writer, not yet durable
	enq, done   int64         // events accepted / durable, in order
	flushTarget int64         // Flush wants done >= flushTarget
	closing     bool          // Close was called
	space       chan struct{} // closed (and replaced) when events become durable
	progress    chan struct{} // closed (and replaced) when done advances
	head        chainFields   // last durable record (Hash set)

	wake    chan struct{} // nudges the writer; capacity 1
	ctx     context.Context
	cancel  context.CancelFunc
	stopped chan struct{}

	// Writer-goroutine state.
	tail   tail
	wrote  int64 // writes committed, for logs
	failed bool  // the last attempt failed (logs the recovery)
}

// tail is the newest record of the chain as the writer knows it.
type tail struct {
	seq         int64
	hash        string
	lastUpdated time.Time
}

// NewRecorder starts a recorder on dst, continuing the chain found there.
func NewRecorder(ctx context.Context, dst Log, opts Options) (*Recorder, error) {
	if opts.QueueSize <= 0 {
		opts.QueueSize = 4096
	}
	if opts.BatchSize <= 0 {
		opts.BatchSize = 1000
	}
	if opts.FlushInterval <= 0 {
		opts.FlushInterval = time.Second
	}
	if opts.Source.Observer == "" {
		opts.Source.Observer = "kiln"
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.RetryMin <= 0 {
		opts.RetryMin = 100 * time.Millisecond
	}
	if opts.RetryMax < opts.RetryMin {
		opts.RetryMax = max(10*time.Second, opts.RetryMin)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if len(opts.QueryKey) == 0 {
		opts.QueryKey = make([]byte, 32)
		rand.Read(opts.QueryKey)
	}
	t, err := readTail(ctx, dst)
	if err != nil {
		return nil, fmt.Errorf("audit: find the chain's tail: %w", err)
	}
	r := &Recorder{
		dst:      dst,
		opts:     opts,
		log:      opts.Logger,
		batch:    min(opts.BatchSize, opts.QueueSize),
		queue:    make([][]byte, 0, opts.QueueSize),
		space:    make(chan struct{}),
		progress: make(chan struct{}),
		wake:     make(chan struct{}, 1),
		stopped:  make(chan struct{}),
		tail:     t,
		head:     chainFields{Seq: t.seq, Hash: t.hash},
	}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	go r.run()
	return r, nil
}

// readTail reads the newest record of the log.
func readTail(ctx context.Context, l Log) (tail, error) {
	es, err := l.Newest(ctx, 0, 1)
	if err != nil {
		return tail{}, err
	}
	if len(es) == 0 {
		return tail{hash: zeroHash}, nil
	}
	e := es[0]
	rec, err := parseRecord(e.Body)
	if err != nil {
		return tail{}, fmt.Errorf("newest record %s is not a chain record: %v", idFor(e.Seq), err)
	}
	if rec.Seq != e.Seq {
		return tail{}, fmt.Errorf("newest record %s holds seq %d", idFor(e.Seq), rec.Seq)
	}
	if _, err := chainHash(rec.Hash, nil); err != nil {
		return tail{}, fmt.Errorf("newest record %s: hash: %v", idFor(e.Seq), err)
	}
	return tail{seq: rec.Seq, hash: rec.Hash, lastUpdated: e.Time}, nil
}

// Record queues e. It waits while the queue is full and returns ctx.Err()
// if ctx ends first, or ErrClosed after Close. A nil error means the event
// will be written (Flush waits until it is).
func (r *Recorder) Record(ctx context.Context, e Event) error {
	if e.Time.IsZero() {
		e.Time = r.opts.Now()
	}
	// Before the event is queued: no raw value is held even in memory.
	e.Entity.Query = KeyedQuery(r.opts.QueryKey, e.Entity.Query)
	elements := e.elements(r.opts.Source)
	for {
		r.mu.Lock()
		if r.closing {
			r.mu.Unlock()
			return ErrClosed
		}
		if len(r.queue)+r.inflight < r.opts.QueueSize {
			r.queue = append(r.queue, elements)
			r.enq++
			full := len(r.queue) >= r.batch
			r.mu.Unlock()
			if full {
				r.nudge()
			}
			return nil
		}
		wait := r.space
		r.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Flush waits until every event recorded before the call is durable.
func (r *Recorder) Flush(ctx context.Context) error {
	r.mu.Lock()
	target := r.enq
	r.flushTarget = max(r.flushTarget, target)
	r.mu.Unlock()
	r.nudge()
	return r.waitDone(ctx, target)
}

func (r *Recorder) waitDone(ctx context.Context, target int64) error {
	for {
		r.mu.Lock()
		done, wait := r.done, r.progress
		r.mu.Unlock()
		if done >= target {
			return nil
		}
		select {
		case <-wait:
		case <-r.stopped:
			r.mu.Lock()
			done = r.done
			r.mu.Unlock()
			if done >= target {
				return nil
			}
			return ErrClosed
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Close stops accepting events, writes every queued one and stops the
// writer. If ctx ends first, the writer is stopped anyway and the events
// not yet written are lost (logged as a count); Close returns ctx.Err().
// The log is not closed.
func (r *Recorder) Close(ctx context.Context) error {
	r.mu.Lock()
	if r.closing {
		r.mu.Unlock()
		<-r.stopped
		return nil
	}
	r.closing = true
	target := r.enq
	r.flushTarget = max(r.flushTarget, target)
	close(r.space) // Records waiting for space see closing
	r.space = make(chan struct{})
	r.mu.Unlock()
	r.nudge()
	err := r.waitDone(ctx, target)
	r.cancel()
	<-r.stopped
	if err != nil {
		r.mu.Lock()
		lost := r.enq - r.done
		r.mu.Unlock()
		r.log.Error("audit: recorder closed before all events were written", "unwritten", lost)
	}
	return err
}

// Head returns the sequence number and hash of the newest durable record
// (0 and 64 zeros for an empty chain). Publishing it elsewhere (a log, a
// metric) anchors the chain's tail, which Verify alone cannot protect.
func (r *Recorder) Head() (seq int64, hash string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.head.Seq, r.head.Hash
}

func (r *Recorder) nudge() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// run is the writer goroutine.
func (r *Recorder) run() {
	defer close(r.stopped)
	tick := time.NewTicker(r.opts.FlushInterval)
	defer tick.Stop()
	for {
		r.mu.Lock()
		n := len(r.queue)
		urgent := n >= r.batch || n > 0 && r.flushTarget > r.done
		r.mu.Unlock()
		if !urgent {
			select {
			case <-r.ctx.Done():
				return
			case <-r.wake:
				continue
			case <-tick.C:
			}
		}
		if !r.writeBatch() {
			return
		}
	}
}

// conflictsWorthAWarning: a batch that conflicted this many times in a row
// is reported, once.
const conflictsWorthAWarning = 8

// pendingWrite is one event being written and its record.
type pendingWrite struct {
	elements []byte // Event.elements
	e        store.LogEntry
	c        chainFields
}

// writeBatch takes up to one batch off the queue and writes it, retrying
// until it is durable. It reports false when the recorder is stopping
// with the batch unwritten.
func (r *Recorder) writeBatch() bool {
	r.mu.Lock()
	n := min(len(r.queue), r.batch)
	if n == 0 {
		r.mu.Unlock()
		return true
	}
	batch := make([]pendingWrite, n)
	for i := range batch {
		batch[i].elements = r.queue[i]
	}
	m := copy(r.queue, r.queue[n:])
	clear(r.queue[m:])
	r.queue = r.queue[:m]
	r.inflight = n
	r.mu.Unlock()

	r.build(batch)
	delay := r.opts.RetryMin
	conflicts := 0
	for len(batch) > 0 {
		k, err := r.commit(batch)
		if k > 0 {
			r.durable(batch[:k])
			batch = batch[k:]
		}
		if err == nil {
			if r.failed {
				r.failed = false
				r.log.Info("audit: writes recovered", "written", r.wrote)
			}
			continue
		}
		// A conflict is another writer's append at the same seq: another
		// Kiln instance on the same log, or an admin command beside the
		// server. It is expected: re-chain on the new tail at once, quietly.
		// Anything else is a failure worth a warning and a back-off.
		conflict := errors.Is(err, store.ErrConflict)
		if conflict {
			conflicts++
			r.log.Debug("audit: another writer appended first; re-chaining", "pending", len(batch))
			if conflicts == conflictsWorthAWarning {
				// Other writers do not win this often; a log that reports
				// conflicts without a new tail (a stale read?) might.
				r.log.Warn("audit: appends keep conflicting; events kept for retry", "pending", len(batch), "attempts", conflicts)
			}
		} else {
			r.failed = true
			r.log.Warn("audit: write failed; events kept for retry", "pending", len(batch), "retry_in", delay, "error", err)
		}
		if !conflict || delay > r.opts.RetryMin {
			select {
			case <-r.ctx.Done():
				return false
			case <-time.After(delay):
			}
		} else if r.ctx.Err() != nil {
			return false
		}
		delay = min(2*delay, r.opts.RetryMax)
		// The log may hold more of the chain than we know: an append
		// that reported an error after all (or stored a prefix), or
		// another writer.
		k, err = r.resync(batch, conflict)
		if err != nil {
			r.log.Warn("audit: cannot read the chain's tail", "error", err)
			continue
		}
		if k > 0 {
			r.durable(batch[:k])
			batch = batch[k:]
		}
	}
	return true
}

// build assigns seq numbers after r.tail and renders the records.
func (r *Recorder) build(batch []pendingWrite) {
	t := r.tail
	now := r.opts.Now().UTC().Truncate(time.Microsecond)
	for i := range batch {
		// LastUpdated strictly increases along the chain, so that Purge
		// can find the records written before a time by seq.
		lu := now
		if next := t.lastUpdated.Add(time.Microsecond); lu.Before(next) {
			lu = next.UTC()
		}
		seq := t.seq + 1
		body, hash := seal(batch[i].elements, lu, seq, t.hash)
		batch[i].e = store.LogEntry{Seq: seq, Time: lu, Body: body}
		batch[i].c = chainFields{Seq: seq, Prev: t.hash, Hash: hash}
		t = tail{seq: seq, hash: hash, lastUpdated: lu}
	}
}

// commit appends batch to the log; k is how many are known durable (on
// an error, resync finds out whether a prefix was stored).
func (r *Recorder) commit(batch []pendingWrite) (k int, err error) {
	entries := make([]store.LogEntry, len(batch))
	for i := range batch {
		entries[i] = batch[i].e
	}
	if err := r.dst.Append(r.ctx, entries); err != nil {
		return 0, err
	}
	return len(batch), nil
}

// resync looks at the log after a failed write. The first k of batch's
// records found stored were written after all. When none was, unless the
// tail is the one the batch was built on, the batch is rebuilt on it.
// conflict: the write failed because another writer appended, so a moved
// tail is no surprise.
func (r *Recorder) resync(batch []pendingWrite, conflict bool) (k int, err error) {
	// The failed append may have stored a prefix of the batch (MongoDB's
	// ordered insert stops at the first taken seq), and another writer may
	// have appended after it: the tail alone cannot tell. Look at the seqs
	// the batch meant to take.
	stored, err := r.dst.Newest(r.ctx, batch[len(batch)-1].c.Seq+1, len(batch))
	if err != nil {
		return 0, err
	}
	hashes := make(map[int64]string, len(stored))
	for _, e := range stored {
		if rec, err := parseRecord(e.Body); err == nil && rec.Seq == e.Seq {
			hashes[e.Seq] = rec.Hash
		}
	}
	for k < len(batch) && hashes[batch[k].c.Seq] == batch[k].c.Hash {
		k++
	}
	if k > 0 {
		return k, nil // the rest, if any, is re-chained by the next attempt's resync
	}
	t, err := readTail(r.ctx, r.dst)
	if err != nil {
		return 0, err
	}
	if t.seq == r.tail.seq && t.hash == r.tail.hash {
		return 0, nil
	}
	if !conflict {
		r.log.Warn("audit: the chain's tail moved (another writer?); re-chaining pending events", "pending", len(batch))
	}
	r.tail = t
	r.build(batch)
	return 0, nil
}

// durable records that ws were written.
func (r *Recorder) durable(ws []pendingWrite) {
	last := ws[len(ws)-1]
	r.tail = tail{seq: last.c.Seq, hash: last.c.Hash, lastUpdated: last.e.Time}
	r.wrote += int64(len(ws))
	r.mu.Lock()
	r.done += int64(len(ws))
	r.inflight -= len(ws)
	r.head = last.c
	close(r.progress)
	r.progress = make(chan struct{})
	close(r.space)
	r.space = make(chan struct{})
	r.mu.Unlock()
}
