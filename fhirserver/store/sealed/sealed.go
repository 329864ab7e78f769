package sealed

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net/http"

	"github.com/kiln-fhir/kiln/fhirserver/crypt"
	"github.com/kiln-fhir/kiln/fhirserver/outcome"
	"github.com/kiln-fhir/kiln/fhirserver/search"
	"github.com/kiln-fhir/kiln/fhirserver/store"
)

// Config is what New needs besides the inner store.
type Config struct {
	// Partition is the partition's name ("workforce"); it is bound into
	// every sealed value, so a value never opens in another partition.
	Partition string
	// Keyring seals and opens the resource bodies and record values: the
	// partition's own data-key ring, which the caller derives or loads.
	Keyring *crypt.Keyring
	// Blind keys the blind index. Its keys must be other keys than
	// Keyring's.
	Blind *BlindKeys
	// Keys, instead of Keyring and Blind, are rings that change while the
	// store serves (a key rotation; see Keys).
	Keys *Keys
	// OpaqueID reports whether a resource id is opaque (random, assigned
	// by the server). Only references to such ids stay plain in the index
	// (see the package documentation). Nil: IsUUID, the server's own ids.
	OpaqueID func(id string) bool
	// OnlyOpaqueIDs makes Put refuse, with a 400, a resource whose id
	// OpaqueID rejects: ids are stored in plain, so an id a client chose
	// (an update that creates Patient/EMP-1) would put its text on disk.
	OnlyOpaqueIDs bool
}

// New wraps inner so that what it stores of the partition is sealed and
// blinded. The result implements exactly the optional capabilities of
// store.Capabilities that inner implements, and its transactions' views
// those of store.TxCapabilities that inner's have. inner must not be
// used beside it (what it returns is sealed, and what it is given must
// be).
func New(inner store.Store, cfg Config) (store.Store, error) {
	switch {
	case inner == nil:
		return nil, errors.New("sealed: no inner store")
	case cfg.Partition == "":
		return nil, errors.New("sealed: the partition needs a name")
	case cfg.Keys != nil && (cfg.Keyring != nil || cfg.Blind != nil):
		return nil, errors.New("sealed: give either Keys or Keyring and Blind")
	}
	keys := cfg.Keys
	if keys == nil {
		var err error
		if keys, err = FixedKeys(Rings{Data: cfg.Keyring, Blind: cfg.Blind}); err != nil {
			return nil, err
		}
	}
	p := &params{partition: cfg.Partition, keys: keys, opaque: cfg.OpaqueID, onlyOpaque: cfg.OnlyOpaqueIDs}
	if p.opaque == nil {
		p.opaque = IsUUID
	}
	c := &core{view: view{p: p, in: inner}, inner: inner}
	return combos[capabilityMask(inner)](c), nil
}

// params are the settings every view of the store shares; keys are the
// one part that changes.
type params struct {
	partition  string
	keys       *Keys
	opaque     func(string) bool
	onlyOpaque bool
}

// Additional data of the sealed values: length-prefixed parts (a 4-byte
// big-endian length, then the bytes), then for a version or record
// version 8 bytes big-endian. The first part says what the value is, so
// a record's value never opens as a resource body.
const (
	adResource = "resource"
	adRecord   = "record"
)

func appendPart(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
	return append(b, s...)
}

// additionalData is what binds a sealed value to its place: what,
// partition, a, b, version.
func (p *params) additionalData(what, a, b string, version int64) []byte {
	ad := make([]byte, 0, 4*4+len(what)+len(p.partition)+len(a)+len(b)+8)
	ad = appendPart(ad, what)
	ad = appendPart(ad, p.partition)
	ad = appendPart(ad, a)
	ad = appendPart(ad, b)
	return binary.BigEndian.AppendUint64(ad, uint64(version))
}

// bodyAD is the additional data of version of typ/id.
func (p *params) bodyAD(typ, id string, version int64) []byte {
	return p.additionalData(adResource, typ, id, version)
}

// sealWrite returns w with its body sealed and its rows blinded; w
// itself is left as it was. A write no backend would store is refused
// here, before its body is sealed (a sealed empty body is not empty).
func (p *params) sealWrite(ctx context.Context, w store.Write, check func() error) (store.Write, error) {
	if err := check(); err != nil {
		return store.Write{}, fmt.Errorf("sealed store: %w", err)
	}
	keys, err := p.keys.fresh(ctx)
	if err != nil {
		return store.Write{}, err
	}
	if !w.Deleted {
		sealed, err := keys.Data.Seal(w.Body, p.bodyAD(w.Type, w.ID, w.Version))
		if err != nil {
			return store.Write{}, fmt.Errorf("sealed store: seal %s/%s version %d: %w", w.Type, w.ID, w.Version, err)
		}
		w.Body = sealed
	}
	w.Index = p.blindRows(keys.Blind, w.Index)
	return w, nil
}

// open returns v with its body opened (a copy: v is left as it was). A
// body that does not open is an error, never returned as it is.
func (p *params) open(ctx context.Context, v *store.Version) (*store.Version, error) {
	if v == nil || v.Deleted && len(v.Body) == 0 {
		return v, nil
	}
	plain, err := p.keys.openWith(ctx, v.Body, p.bodyAD(v.Type, v.ID, v.Version))
	if err != nil {
		return nil, fmt.Errorf("sealed store: %s/%s version %d does not open: %w", v.Type, v.ID, v.Version, err)
	}
	out := *v
	out.Body = plain
	return &out, nil
}

// openAll opens vs into a new slice.
func (p *params) openAll(ctx context.Context, vs []*store.Version) ([]*store.Version, error) {
	if vs == nil {
		return nil, nil
	}
	out := make([]*store.Version, len(vs))
	for i, v := range vs {
		o, err := p.open(ctx, v)
		if err != nil {
			return nil, err
		}
		out[i] = o
	}
	return out, nil
}

// view is the sealing side of a store.Tx: the store itself, or the view
// of a transaction.
type view struct {
	p  *params
	in store.Tx
}

func (v view) Read(ctx context.Context, typ, id string) (*store.Version, error) {
	got, err := v.in.Read(ctx, typ, id)
	if err != nil {
		return nil, err
	}
	return v.p.open(ctx, got)
}

func (v view) VRead(ctx context.Context, typ, id string, version int64) (*store.Version, error) {
	got, err := v.in.VRead(ctx, typ, id, version)
	if err != nil {
		return nil, err
	}
	return v.p.open(ctx, got)
}

// History pages as the inner store does. MaxBytes counts the opened
// bodies, as the contract says: the inner store is asked for a page
// bounded by MaxBytes plus the sealing overhead of a whole page, which
// ends no earlier than the page wanted, and cut where the opened bodies
// reach MaxBytes; a cut page asks again for exactly that many versions,
// for the cursor that follows them.
func (v view) History(ctx context.Context, q store.HistoryQuery) (*store.HistoryPage, error) {
	if q.MaxBytes <= 0 {
		page, err := v.in.History(ctx, q)
		if err != nil {
			return nil, err
		}
		return v.openPage(ctx, page)
	}
	wide := q
	if q.Count > 0 && q.Count <= (math.MaxInt-q.MaxBytes)/crypt.Overhead {
		wide.MaxBytes += crypt.Overhead * q.Count
	} else {
		wide.MaxBytes = math.MaxInt
	}
	page, err := v.in.History(ctx, wide)
	if err != nil {
		return nil, err
	}
	opened, err := v.openPage(ctx, page)
	if err != nil {
		return nil, err
	}
	n, size := 0, 0
	for n < len(opened.Versions) && size < q.MaxBytes {
		size += len(opened.Versions[n].Body)
		n++
	}
	if n == len(opened.Versions) {
		return opened, nil
	}
	exact := q
	exact.Count, exact.MaxBytes = n, 0
	again, err := v.in.History(ctx, exact)
	if err != nil {
		return nil, err
	}
	if sameVersions(again.Versions, page.Versions[:n]) {
		return &store.HistoryPage{Versions: opened.Versions[:n], Next: again.Next}, nil
	}
	// A first page that a concurrent write changed between the two
	// calls: the second is a page of its own, with its own cursor.
	return v.openPage(ctx, again)
}

func (v view) openPage(ctx context.Context, page *store.HistoryPage) (*store.HistoryPage, error) {
	vs, err := v.p.openAll(ctx, page.Versions)
	if err != nil {
		return nil, err
	}
	return &store.HistoryPage{Versions: vs, Next: page.Next}, nil
}

// sameVersions reports whether a and b name the same versions in order.
func sameVersions(a, b []*store.Version) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Type != b[i].Type || a[i].ID != b[i].ID || a[i].Version != b[i].Version {
			return false
		}
	}
	return true
}

// Search refuses what the blind index cannot answer (an *outcome.Error,
// 400), runs the rest with its keys blinded, and opens what it found.
func (v view) Search(ctx context.Context, q *search.Query) (*store.SearchPage, error) {
	bq, err := v.p.blindQuery(ctx, q)
	if err != nil {
		return nil, err
	}
	page, err := v.in.Search(ctx, bq)
	if err != nil {
		return nil, err
	}
	out := *page
	if out.Matches, err = v.p.openAll(ctx, page.Matches); err != nil {
		return nil, err
	}
	if out.Included, err = v.p.openAll(ctx, page.Included); err != nil {
		return nil, err
	}
	return &out, nil
}

func (v view) Put(ctx context.Context, w store.Write) error {
	if v.p.onlyOpaque && w.ID != "" && !v.p.opaque(w.ID) {
		return outcome.New(http.StatusBadRequest, "not-supported",
			"the encrypted partition stores resources under ids the server assigns only: create the resource with POST")
	}
	sw, err := v.p.sealWrite(ctx, w, w.Check)
	if err != nil {
		return err
	}
	return v.in.Put(ctx, sw)
}

// rewrite is Rewriter.Rewrite on rw, the inner store or transaction.
func (p *params) rewrite(ctx context.Context, rw store.Rewriter, w store.Write) error {
	sw, err := p.sealWrite(ctx, w, w.CheckRewrite)
	if err != nil {
		return err
	}
	return rw.Rewrite(ctx, sw)
}

// core is the sealed store without its optional capabilities; combos
// adds those of the inner store.
type core struct {
	view
	inner store.Store
}

// Transact runs fn with a sealing view of the inner transaction, which
// has the optional capabilities of that transaction.
func (c *core) Transact(ctx context.Context, fn func(tx store.Tx) error) error {
	return c.inner.Transact(ctx, func(tx store.Tx) error {
		v := view{p: c.p, in: tx}
		if rw, ok := tx.(store.Rewriter); ok {
			return fn(rewriterTx{view: v, rw: rw})
		}
		return fn(v)
	})
}

func (c *core) Ping(ctx context.Context) error { return c.inner.Ping(ctx) }
func (c *core) Close() error                   { return c.inner.Close() }

// rewriterTx is the view of a transaction that rewrites in place.
type rewriterTx struct {
	view
	rw store.Rewriter
}

func (t rewriterTx) Rewrite(ctx context.Context, w store.Write) error {
	return t.p.rewrite(ctx, t.rw, w)
}

// IsUUID reports whether id is a UUID in its canonical text form
// (8-4-4-4-12 hexadecimal digits), the form of the ids the FHIR service
// assigns.
func IsUUID(id string) bool {
	if len(id) != 36 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
				return false
			}
		}
	}
	return true
}
