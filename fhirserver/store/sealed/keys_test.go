package sealed

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/crypt"
	"github.com/kiln-fhir/kiln/fhirserver/search"
	"github.com/kiln-fhir/kiln/fhirserver/store"
)

// keySource stands for the record several servers load their rings
// from: tests change it, and count the loads.
type keySource struct {
	mu                        sync.Mutex
	data                      map[uint32][]byte
	blind                     map[uint32][]byte
	dataCurrent, blindCurrent uint32
	maxAge                    time.Duration
	fail                      error
	loads                     int
}

func newKeySource() *keySource {
	return &keySource{data: map[uint32][]byte{1: randomKey()}, blind: map[uint32][]byte{1: randomKey()}, dataCurrent: 1, blindCurrent: 1}
}

func (s *keySource) load(context.Context) (Rings, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.loads++
	if s.fail != nil {
		return Rings{}, s.fail
	}
	data, err := crypt.NewKeyringWithCurrent(s.data, s.dataCurrent)
	if err != nil {
		return Rings{}, err
	}
	blind, err := NewBlindKeysWithCurrent(s.blind, s.blindCurrent)
	if err != nil {
		return Rings{}, err
	}
	return Rings{Data: data, Blind: blind, MaxAge: s.maxAge}, nil
}

func (s *keySource) change(f func(s *keySource)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(s)
}

func (s *keySource) loadCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.loads
}

// fakeClock is a clock tests move by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// loadedStore is a sealed store whose keys come from src, on the clock
// c, over inner.
func loadedStore(t *testing.T, inner store.Store, src *keySource, c *fakeClock) (store.Store, *Keys) {
	t.Helper()
	keys, err := LoadKeys(t.Context(), src.load)
	if err != nil {
		t.Fatal(err)
	}
	keys.now = c.now
	if err := keys.Reload(t.Context()); err != nil { // dated by c
		t.Fatal(err)
	}
	return wrap(t, inner, Config{Partition: "workforce", Keys: keys, OpaqueID: anyID}), keys
}

func storedKeyID(t *testing.T, inner store.Reader, typ, id string, version int64) uint32 {
	t.Helper()
	v, err := inner.VRead(t.Context(), typ, id, version)
	if err != nil {
		t.Fatal(err)
	}
	kid, err := crypt.SealedKeyID(v.Body)
	if err != nil {
		t.Fatal(err)
	}
	return kid
}

func identified(typ, id, value string) store.Write {
	w := plainWrite(typ, id, 1, `{"resourceType":"`+typ+`","id":"`+id+`"}`)
	w.Index = &search.Rows{Keys: []string{"identifier" + keySep + value}}
	return w
}

// TestKeysSwapWhileServing: rings reloaded while the store serves seal
// under their current key from then on, and values sealed under the old
// one still open; a staged key (not current) opens and is looked up but
// seals and tags nothing.
func TestKeysSwapWhileServing(t *testing.T) {
	inner := openSQLite(t, filepath.Join(t.TempDir(), "w.db"))
	src, clock := newKeySource(), &fakeClock{t: t0}
	s, keys := loadedStore(t, inner, src, clock)
	defer s.Close()
	mustPut(t, s, identified("Patient", "a", "A"))

	src.change(func(s *keySource) { s.data[2], s.blind[2] = randomKey(), randomKey() }) // staged
	if err := keys.Reload(t.Context()); err != nil {
		t.Fatal(err)
	}
	mustPut(t, s, identified("Patient", "b", "B"))
	if kid := storedKeyID(t, inner, "Patient", "b", 1); kid != 1 {
		t.Fatalf("a staged data key sealed: key %d", kid)
	}
	if got := find(t, inner, keys.Rings().Blind.tag(1, "identifier"+keySep+"B")); len(got) != 1 {
		t.Fatalf("a staged blind key tagged: key 1's tag finds %v", got)
	}

	src.change(func(s *keySource) { s.dataCurrent, s.blindCurrent = 2, 2 }) // promoted
	if err := keys.Reload(t.Context()); err != nil {
		t.Fatal(err)
	}
	mustPut(t, s, identified("Patient", "c", "C"))
	if kid := storedKeyID(t, inner, "Patient", "c", 1); kid != 2 {
		t.Fatalf("after the promotion a value is sealed under key %d, want 2", kid)
	}
	for _, c := range []struct{ id, value string }{{"a", "A"}, {"b", "B"}, {"c", "C"}} {
		if _, err := s.Read(t.Context(), "Patient", c.id); err != nil {
			t.Errorf("Read %s: %v", c.id, err)
		}
		if got := find(t, s, "identifier"+keySep+c.value); strings.Join(got, ",") != "Patient/"+c.id {
			t.Errorf("search by %s finds %v", c.value, got)
		}
	}
}

// TestStaleKeysReloadBeforeSealing: rings older than their MaxAge are
// loaded again before the store seals, tags or searches with them; when
// that load fails the write fails (nothing sealed under keys that may be
// stale), while reads go on.
func TestStaleKeysReloadBeforeSealing(t *testing.T) {
	inner := openSQLite(t, filepath.Join(t.TempDir(), "w.db"))
	src, clock := newKeySource(), &fakeClock{t: t0}
	src.maxAge = 15 * time.Second
	s, _ := loadedStore(t, inner, src, clock)
	defer s.Close()
	mustPut(t, s, identified("Patient", "a", "A"))

	// Another server promoted key 2; this one has not reloaded.
	src.change(func(s *keySource) { s.data[2], s.dataCurrent = randomKey(), 2 })
	clock.add(10 * time.Second)
	mustPut(t, s, identified("Patient", "b", "B"))
	if kid := storedKeyID(t, inner, "Patient", "b", 1); kid != 1 {
		t.Fatalf("a copy younger than MaxAge sealed under key %d, want its own current key 1", kid)
	}
	clock.add(6 * time.Second)
	loads := src.loadCount()
	mustPut(t, s, identified("Patient", "c", "C"))
	if kid := storedKeyID(t, inner, "Patient", "c", 1); kid != 2 {
		t.Fatalf("a copy older than MaxAge sealed under key %d: it was not loaded again first", kid)
	}
	if src.loadCount() != loads+1 {
		t.Fatalf("%d loads for one stale write, want 1", src.loadCount()-loads)
	}

	clock.add(16 * time.Second)
	src.change(func(s *keySource) { s.fail = errors.New("the store is down") })
	err := s.Put(t.Context(), identified("Patient", "d", "D"))
	if err == nil || !strings.Contains(err.Error(), "loading the partition's keys") {
		t.Fatalf("a write with stale keys that cannot be loaded: %v, want an error", err)
	}
	if _, err := s.Search(t.Context(), &search.Query{Types: []string{"Patient"}, Where: []search.Clause{{Any: []search.Match{{Op: search.OpKey, Keys: []string{"identifier" + keySep + "A"}}}}}}); err == nil {
		t.Fatal("a search with stale keys that cannot be loaded ran")
	}
	if _, err := s.Read(t.Context(), "Patient", "c"); err != nil {
		t.Fatalf("a read with stale keys: %v", err)
	}
}

// TestUnknownKeyLoadsAgain: a value sealed by another server under a key
// this one has not loaded makes it load its keys again and open the
// value; a value under a key that exists nowhere fails, and loads the
// keys at most once a second.
func TestUnknownKeyLoadsAgain(t *testing.T) {
	dir := t.TempDir()
	innerA := openSQLite(t, filepath.Join(dir, "w.db"))
	innerB := openSQLite(t, filepath.Join(dir, "w.db"))
	src, clock := newKeySource(), &fakeClock{t: t0}
	a, keysA := loadedStore(t, innerA, src, clock)
	defer a.Close()
	b, _ := loadedStore(t, innerB, src, clock)
	defer b.Close()

	src.change(func(s *keySource) { s.data[2], s.dataCurrent = randomKey(), 2 })
	if err := keysA.Reload(t.Context()); err != nil {
		t.Fatal(err)
	}
	mustPut(t, a, identified("Patient", "x", "X"))
	if _, err := b.Read(t.Context(), "Patient", "x"); err != nil {
		t.Fatalf("server B reading a value sealed under a key it has not loaded: %v", err)
	}

	// A value under key 9, which no ring holds.
	stray, err := crypt.NewKeyring(map[uint32][]byte{9: randomKey()})
	if err != nil {
		t.Fatal(err)
	}
	p := &params{partition: "workforce"}
	body, err := stray.Seal([]byte(`{"resourceType":"Patient","id":"y"}`), p.bodyAD("Patient", "y", 1))
	if err != nil {
		t.Fatal(err)
	}
	w := plainWrite("Patient", "y", 1, "")
	w.Body = body
	mustPut(t, innerB, w)
	clock.add(unknownKeyReloadEvery) // past the load the read of x caused
	loads := src.loadCount()
	for range 3 {
		if _, err := b.Read(t.Context(), "Patient", "y"); !errors.Is(err, crypt.ErrUnknownKey) {
			t.Fatalf("a value under a key that exists nowhere: %v, want ErrUnknownKey", err)
		}
	}
	if n := src.loadCount() - loads; n != 1 {
		t.Fatalf("three reads of a value under an unknown key loaded the keys %d times, want 1", n)
	}
	clock.add(unknownKeyReloadEvery)
	if _, err := b.Read(t.Context(), "Patient", "y"); !errors.Is(err, crypt.ErrUnknownKey) {
		t.Fatal(err)
	}
	if n := src.loadCount() - loads; n != 2 {
		t.Fatalf("a second later the keys were loaded %d times in all, want 2", n)
	}
}

// TestKeysConfig: Keys go instead of Keyring and Blind, not beside them;
// rings without a data or blind ring are refused.
func TestKeysConfig(t *testing.T) {
	k := newTestKeys(t)
	fixed, err := FixedKeys(Rings{Data: k.ring, Blind: k.blind})
	if err != nil {
		t.Fatal(err)
	}
	inner := openSQLite(t, filepath.Join(t.TempDir(), "w.db"))
	defer inner.Close()
	if _, err := New(inner, Config{Partition: "workforce", Keys: fixed, Keyring: k.ring}); err == nil {
		t.Error("Keys beside Keyring were accepted")
	}
	if _, err := New(inner, Config{Partition: "workforce"}); err == nil {
		t.Error("a store without keys was accepted")
	}
	if _, err := FixedKeys(Rings{Data: k.ring}); err == nil {
		t.Error("rings without a blind ring were accepted")
	}
	if _, err := LoadKeys(t.Context(), func(context.Context) (Rings, error) { return Rings{Blind: k.blind}, nil }); err == nil {
		t.Error("loaded rings without a data ring were accepted")
	}
	if _, err := NewBlindKeysWithCurrent(map[uint32][]byte{1: randomKey()}, 2); err == nil {
		t.Error("a current blind key outside the ring was accepted")
	}
}
