package audit

import (
	"context"
	"fmt"
	"math"

	"github.com/kiln-fhir/kiln/fhirserver/store"
)

// Report is the result of Verify.
type Report struct {
	// Checked counts the AuditEvent versions read.
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

// verifyPage bounds one History page.
const (
	verifyPageCount = 500
	verifyPageBytes = 8 << 20
)

// Verify walks every AuditEvent version in st, newest first, and checks
// the chain: each record's stored hash equals the one recomputed from its
// canonical bytes; each record's hash equals the prev of the record after
// it; seq numbers are contiguous down to 1 and record 1's prev is zero; each
// id is the id of its seq; and no AuditEvent has a version other than 1 (an
// update or a delete of an audit record is tampering).
//
// When the link between records s and s+1 does not hold, record s is
// reported: records 1 … s-1 verified, and either s was rewritten (with a
// recomputed hash) or s+1's prev was. The newest record can be rewritten
// with a recomputed hash undetected; compare Report.Head and the head hash
// with one published earlier (Recorder.Head) to cover it.
//
// Memory stays bounded: records are streamed a page at a time. progress,
// if not nil, is called after each page. A store error ends the walk and is
// returned.
func Verify(ctx context.Context, st store.Store, progress func(checked int64)) (Report, error) {
	v := verifier{brokenSeq: math.MaxInt64}
	q := store.HistoryQuery{Type: "AuditEvent", Count: verifyPageCount, MaxBytes: verifyPageBytes}
	for {
		page, err := st.History(ctx, q)
		if err != nil {
			r := v.report()
			r.OK = false
			return r, fmt.Errorf("audit: verify: %w", err)
		}
		for _, ver := range page.Versions {
			v.check(ver)
		}
		if progress != nil {
			progress(v.checked)
		}
		if page.Next == "" {
			break
		}
		q.Cursor = page.Next
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

// position is the chain position of a record whose seq cannot be read:
// just below the newer record seen last.
func (v *verifier) position(id string) int64 {
	if s, ok := seqOf(id); ok {
		return s
	}
	if v.haveNext {
		return v.nextSeq - 1
	}
	return math.MaxInt64 - 1
}

func (v *verifier) check(ver *store.Version) {
	v.checked++
	if ver.Version != 1 || ver.Deleted {
		what := "updated"
		if ver.Deleted {
			what = "deleted"
		}
		v.mark(v.position(ver.ID), ver.ID, fmt.Sprintf("version %d exists: the record was %s (audit records are append-only)", ver.Version, what))
		return
	}
	rec, err := parseRecord(ver.Body)
	if err != nil {
		v.mark(v.position(ver.ID), ver.ID, "not an audit chain record: "+err.Error())
		return
	}
	s := rec.Seq
	if v.head == 0 {
		v.head = s
	}
	if rec.Purged != nil && rec.Purged.Seq < s && rec.Purged.Seq > v.anchorSeq {
		v.anchorSeq, v.anchorHash = rec.Purged.Seq, rec.Purged.Hash
	}
	if v.anchorSeq > 0 && s == v.anchorSeq && rec.Hash != v.anchorHash {
		v.mark(s, ver.ID, "hash does not match the retention checkpoint that names it")
	}
	switch {
	case ver.ID != idFor(s) || rec.ID != ver.ID:
		v.mark(min(s, v.position(ver.ID)), ver.ID, fmt.Sprintf("id does not match seq %d", s))
	case rec.Computed == "":
		v.mark(s, ver.ID, "hash element or prev malformed: the record was modified")
	case rec.Computed != rec.Hash:
		v.mark(s, ver.ID, "stored hash differs from the recomputed one: the record was modified")
	}
	if v.haveNext {
		switch {
		case s == v.nextSeq-1:
			if rec.Hash != v.nextPrev {
				v.mark(s, ver.ID, fmt.Sprintf("hash does not match the prev of %s: one of the two was modified", idFor(v.nextSeq)))
			}
		case s < v.nextSeq-1:
			v.mark(s+1, idFor(s+1), fmt.Sprintf("missing: records %s … %s are absent", idFor(s+1), idFor(v.nextSeq-1)))
		default:
			v.mark(s, ver.ID, fmt.Sprintf("out of order: found after %s (duplicate or forged seq)", idFor(v.nextSeq)))
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
