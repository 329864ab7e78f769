package audit

import (
	"context"
	"fmt"
	"math"

	"github.com/kiln-fhir/kiln/fhirserver/store"
)

// Report is the result of Verify.
type Report struct {
	// Checked counts the records read.
	Checked int64
	// OK: the chain is intact.
	OK bool
	// FirstBroken is the id of the oldest broken record in chain order
	// (the one with the lowest seq) and Reason says what is wrong with it.
	FirstBroken string
	Reason      string
	// Head is the seq of the newest record (0: empty partition).
	Head int64
}

// verifyPage bounds one Newest page.
const verifyPageCount = 500

// Verify walks every record of l, newest first, and checks the chain: each
// record's stored hash equals the one recomputed from its canonical bytes;
// each record's hash equals the prev of the record after it; seq numbers
// are contiguous down to 1 and record 1's prev is zero; and each record's
// seq and id are those of the log entry that holds it.
//
// When the link between records s and s+1 does not hold, record s is
// reported: records 1 … s-1 verified, and either s was rewritten (with a
// recomputed hash) or s+1's prev was. The newest record can be rewritten
// with a recomputed hash undetected; compare Report.Head and the head hash
// with one published earlier (Recorder.Head) to cover it.
//
// Memory stays bounded: records are read a page at a time. progress, if
// not nil, is called after each page. A log error ends the walk and is
// returned.
func Verify(ctx context.Context, l Log, progress func(checked int64)) (Report, error) {
	v := verifier{brokenSeq: math.MaxInt64}
	var before int64 // 0: from the newest
	for {
		page, err := l.Newest(ctx, before, verifyPageCount)
		if err != nil {
			r := v.report()
			r.OK = false
			return r, fmt.Errorf("audit: verify: %w", err)
		}
		for _, e := range page {
			v.check(e)
		}
		if progress != nil {
			progress(v.checked)
		}
		if len(page) < verifyPageCount {
			break
		}
		before = page[len(page)-1].Seq
		if before <= 1 {
			break
		}
	}
	v.finish()
	return v.report(), nil
}

// verifier is Verify's state: a constant amount whatever the chain's
// length.
type verifier struct {
	checked int64
	head    int64
	// The previous (newer) chain record seen.
	haveNext bool
	nextSeq  int64
	nextPrev string
	// The newest retention checkpoint seen: records up to anchorSeq may
	// have been purged; record anchorSeq's hash was anchorHash.
	anchorSeq  int64
	anchorHash string
	// The oldest break found so far.
	brokenSeq int64
	brokenID  string
	reason    string
}

func (v *verifier) mark(seq int64, id, reason string) {
	if seq < v.brokenSeq {
		v.brokenSeq, v.brokenID, v.reason = seq, id, reason
	}
}

// check takes the entries newest first. The entry's seq is the record's
// position in the chain; the body must agree with it.
func (v *verifier) check(e store.LogEntry) {
	v.checked++
	s, id := e.Seq, idFor(e.Seq)
	if v.head == 0 {
		v.head = s
	}
	rec, err := parseRecord(e.Body)
	if err != nil {
		v.mark(s, id, "not an audit chain record: "+err.Error())
		return
	}
	if rec.Seq != s {
		// Another record's body, or a moved one: it cannot link the
		// chain at s (the next one older reports s missing too).
		v.mark(s, id, fmt.Sprintf("seq %d in the record differs from its place in the log (%d)", rec.Seq, s))
		return
	}
	if rec.Purged != nil && rec.Purged.Seq < s && rec.Purged.Seq > v.anchorSeq {
		v.anchorSeq, v.anchorHash = rec.Purged.Seq, rec.Purged.Hash
	}
	if v.anchorSeq > 0 && s == v.anchorSeq && rec.Hash != v.anchorHash {
		v.mark(s, id, "hash does not match the retention checkpoint that names it")
	}
	switch {
	case rec.ID != id:
		v.mark(s, id, fmt.Sprintf("id %.30q does not match seq %d", rec.ID, s))
	case rec.Computed == "":
		v.mark(s, id, "hash element or prev malformed: the record was modified")
	case rec.Computed != rec.Hash:
		v.mark(s, id, "stored hash differs from the recomputed one: the record was modified")
	}
	if v.haveNext {
		switch {
		case s == v.nextSeq-1:
			if rec.Hash != v.nextPrev {
				v.mark(s, id, fmt.Sprintf("hash does not match the prev of %s: one of the two was modified", idFor(v.nextSeq)))
			}
		case s < v.nextSeq-1:
			v.mark(s+1, idFor(s+1), fmt.Sprintf("missing: records %s … %s are absent", idFor(s+1), idFor(v.nextSeq-1)))
		default:
			// Newest returns seqs in decreasing order; a log that does
			// not is broken too.
			v.mark(s, id, fmt.Sprintf("out of order: found after %s", idFor(v.nextSeq)))
			return // keep following the chain from the newer record
		}
	}
	v.haveNext, v.nextSeq, v.nextPrev = true, s, rec.Prev
}

// finish checks the oldest record.
func (v *verifier) finish() {
	if !v.haveNext {
		return
	}
	switch {
	case v.nextSeq != 1 && v.anchorSeq > 0 && v.nextSeq == v.anchorSeq+1:
		// Everything up to the checkpoint was purged.
		if v.nextPrev != v.anchorHash {
			v.mark(v.nextSeq, idFor(v.nextSeq), "prev does not match the retention checkpoint")
		}
	case v.nextSeq != 1 && v.anchorSeq > 0 && v.nextSeq <= v.anchorSeq:
		// A purge that stopped midway: the records left chain to each
		// other, and record anchorSeq (if still there) matched the
		// checkpoint.
	case v.nextSeq != 1:
		v.mark(1, idFor(1), fmt.Sprintf("missing: records %s … %s are absent", idFor(1), idFor(v.nextSeq-1)))
	case v.nextPrev != zeroHash:
		v.mark(1, idFor(1), "the first record's prev is not 64 zeros")
	}
}

func (v *verifier) report() Report {
	r := Report{Checked: v.checked, Head: v.head, OK: v.brokenSeq == math.MaxInt64}
	if !r.OK {
		r.FirstBroken, r.Reason = v.brokenID, v.reason
	}
	return r
}
