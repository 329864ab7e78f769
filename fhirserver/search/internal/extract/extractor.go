package extract

import (
	"context"
	"fmt"
	"reflect"
	"sync"

	"github.com/kiln-fhir/kiln/fhirserver/fhirpath"
	"github.com/kiln-fhir/kiln/fhirserver/search/internal/index"
)

// Extractor is the state of one extraction: the entries made so far and
// the memo of converted elements.
type Extractor struct {
	ctx      context.Context
	resource map[string]any
	cfg      Config
	out      []index.Entry
	// memo remembers the conversion of complex nodes: the same element is
	// often reached by several parameters (Observation.code feeds code,
	// combo-code and four composites; Observation.value feeds value-quantity,
	// combo-value-quantity and composites), and converting a Quantity
	// (big.Rat arithmetic, UCUM) costs more than evaluating the path.
	memo []memoEntry
	// memoIndex finds memo entries once there are more than memoScan: a
	// resource with thousands of repeated elements (100,000 names) made
	// the linear scan quadratic, 10 s of a 3.8 MB write. Built lazily, so
	// the common small resource allocates no map.
	memoIndex map[memoKey]int
	// sink, when set, receives the entries in batches (see MaybeFlush).
	sink *index.RowBuilder
}

// extractorPool recycles the scratch buffers of extractions.
var extractorPool = sync.Pool{New: func() any {
	return &Extractor{out: make([]index.Entry, 0, 64), memo: make([]memoEntry, 0, 32)}
}}

// Get returns a pooled extractor for resource; sink, when not nil,
// receives the entries in batches (MaybeFlush). Release it when done.
func Get(ctx context.Context, resource map[string]any, cfg Config, sink *index.RowBuilder) *Extractor {
	x := extractorPool.Get().(*Extractor)
	x.ctx, x.resource, x.cfg, x.sink = ctx, resource, cfg, sink
	return x
}

// Release clears the scratch (so the pool keeps no resource data alive)
// and returns it to the pool; oversized buffers are dropped.
func (x *Extractor) Release() {
	clear(x.out)
	clear(x.memo)
	if cap(x.out) > 4096 || x.memoIndex != nil {
		return
	}
	x.out, x.memo = x.out[:0], x.memo[:0]
	x.ctx, x.resource, x.sink, x.cfg = nil, nil, nil, Config{}
	extractorPool.Put(x)
}

// Entries are the entries made and not yet handed to the sink; they are
// the extractor's scratch, valid until Release.
func (x *Extractor) Entries() []index.Entry { return x.out }

// Len is len(Entries()).
func (x *Extractor) Len() int { return len(x.out) }

// Truncate drops the entries from n on (those of a parameter that failed).
func (x *Extractor) Truncate(n int) {
	clear(x.out[n:])
	x.out = x.out[:n]
}

// UnlinkForeign drops the Type/id of the entries' absolute references to
// other servers (see Config.Base); their URL stays searchable.
func (x *Extractor) UnlinkForeign() { x.cfg.unlinkForeign(x.out) }

// FlushAt is how many entries an extractor with a sink holds before it
// hands them over as rows.
const FlushAt = 512

// MaybeFlush hands the entries over to the sink once there are FlushAt,
// so extraction holds a bounded number of Entries whatever the resource's
// size. The memo points into the entries, so it starts again empty: it is
// only a cache.
func (x *Extractor) MaybeFlush() {
	if x.sink == nil || len(x.out) < FlushAt {
		return
	}
	x.cfg.unlinkForeign(x.out)
	x.sink.Add(x.out)
	clear(x.out)
	x.out = x.out[:0]
	clear(x.memo)
	x.memo, x.memoIndex = x.memo[:0], nil
}

// Entries returns the entries of one parameter on resource, outside any
// pool: the caller keeps them. On error the entries made are returned
// with it.
func Entries(ctx context.Context, p *Param, resource map[string]any, cfg Config) ([]index.Entry, error) {
	x := Extractor{ctx: ctx, resource: resource, cfg: cfg}
	err := x.Extract(p)
	x.UnlinkForeign()
	return x.out, err
}

type memoEntry struct {
	memoKey
	entries []index.Entry // Param is rewritten on reuse
}

type memoKey struct {
	node uintptr // identity of the JSON object
	kind index.Kind
	skip Parts
}

// memoScan is how many memo entries are searched linearly before the
// memo gets an index.
const memoScan = 32

// lookup returns the memo entry of key, if any.
func (x *Extractor) lookup(key memoKey) (*memoEntry, bool) {
	if x.memoIndex != nil {
		i, ok := x.memoIndex[key]
		if !ok {
			return nil, false
		}
		return &x.memo[i], true
	}
	for i := range x.memo {
		if x.memo[i].memoKey == key {
			return &x.memo[i], true
		}
	}
	return nil, false
}

// remember adds a memo entry, indexing the memo once it is long.
func (x *Extractor) remember(me memoEntry) {
	x.memo = append(x.memo, me)
	switch {
	case x.memoIndex != nil:
		x.memoIndex[me.memoKey] = len(x.memo) - 1
	case len(x.memo) > memoScan:
		x.memoIndex = make(map[memoKey]int, 2*len(x.memo))
		for i := range x.memo {
			x.memoIndex[x.memo[i].memoKey] = i
		}
	}
}

// Extract evaluates p on the resource and appends its entries. An error
// names the parameter whose expression failed.
func (x *Extractor) Extract(p *Param) error {
	coll, err := p.Expr.Evaluate(x.ctx, x.resource, resolveOpt)
	if err != nil {
		return fmt.Errorf("search: parameter %s: %w", p.Code, err)
	}
	if len(coll) == 0 {
		return nil
	}
	if p.Kind == index.KindComposite {
		return x.composite(p, coll)
	}
	for _, v := range coll {
		// Converting cannot fail, so the entries already handed over
		// never need taking back (see search's custom parameters).
		x.out = x.convert(p.Code, p.Kind, p.Skip, v, x.out)
		x.MaybeFlush()
	}
	return nil
}

// convert is convert with the memo for JSON objects, counting the items
// that give no entry.
func (x *Extractor) convert(code string, k index.Kind, skip Parts, v fhirpath.Value, out []index.Entry) []index.Entry {
	m, ok := v.Raw().(map[string]any)
	if !ok || len(m) == 0 {
		return x.counted(out, convert(code, k, skip, v, out))
	}
	key := memoKey{node: reflect.ValueOf(m).Pointer(), kind: k, skip: skip}
	if me, ok := x.lookup(key); ok {
		for _, e := range me.entries {
			e.Param = code
			out = append(out, e)
		}
		return out
	}
	n := len(out)
	out = x.counted(out, convert(code, k, skip, v, out))
	x.remember(memoEntry{memoKey: key, entries: out[n:len(out):len(out)]})
	return out
}

// counted returns after, counting in Config.Skipped when it holds no more
// entries than before.
func (x *Extractor) counted(before, after []index.Entry) []index.Entry {
	if len(after) == len(before) && x.cfg.Skipped != nil {
		x.cfg.Skipped.Add(1)
	}
	return after
}

// maxCombos bounds the composite entries of one item.
const maxCombos = 256

// composite pairs the components' values item by item: for Observation
// code-value-quantity, each Observation (or component) gives code × value
// combinations, never a code of one with a value of another. Components
// are evaluated last first: the value component (value.as(Quantity)) is
// the selective one, so most composites of a resource stop there.
func (x *Extractor) composite(p *Param, items fhirpath.Collection) error {
	rootID := reflect.ValueOf(x.resource).Pointer()
	naive := x.cfg.Naive
	for _, item := range items {
		m, ok := item.Raw().(map[string]any)
		if ok && !naive && !hasAllNeeds(m, p.Components) {
			continue
		}
		isRoot := ok && !naive && reflect.ValueOf(m).Pointer() == rootID
		parts := make([][]index.Entry, len(p.Components))
		empty := false
		for i := len(p.Components) - 1; i >= 0; i-- {
			c := &p.Components[i]
			var coll fhirpath.Collection
			var err error
			if isRoot {
				coll, err = c.Plain.Evaluate(x.ctx, x.resource, resolveOpt)
			} else {
				coll, err = c.Expr.Evaluate(x.ctx, x.resource, resolveOpt, fhirpath.WithVariable("item", fhirpath.Collection{item}))
			}
			if err != nil {
				return fmt.Errorf("search: parameter %s component %s: %w", p.Code, c.Code, err)
			}
			for _, v := range coll {
				parts[i] = x.convert(c.Code, c.Kind, 0, v, parts[i])
			}
			if len(parts[i]) == 0 {
				empty = true
				break
			}
		}
		if empty {
			continue
		}
		// Cartesian product of the components' entries, in one backing
		// array (mixed-radix counting over the parts).
		total := 1
		for _, part := range parts {
			total *= len(part)
		}
		if total > maxCombos {
			// Hostile input (thousands of codings times thousands of
			// values) must not explode the index; keep a bounded prefix.
			total = maxCombos
		}
		nc := len(parts)
		backing := make([]index.Entry, total*nc)
		for i := range total {
			combo := backing[i*nc : (i+1)*nc : (i+1)*nc]
			rem := i
			for j := nc - 1; j >= 0; j-- {
				combo[j] = parts[j][rem%len(parts[j])]
				rem /= len(parts[j])
			}
			x.out = append(x.out, index.Entry{Param: p.Code, Kind: index.KindComposite, Components: combo})
		}
	}
	return nil
}
