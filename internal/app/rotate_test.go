package app

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	mdriver "go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/kiln-fhir/kiln/fhirserver/crypt"
	"github.com/kiln-fhir/kiln/fhirserver/store"
	"github.com/kiln-fhir/kiln/fhirserver/store/mongo"
	"github.com/kiln-fhir/kiln/fhirserver/store/mongo/mongotest"
	"github.com/kiln-fhir/kiln/fhirserver/store/sealed"
	"github.com/kiln-fhir/kiln/fhirserver/store/sqlite"
	"github.com/kiln-fhir/kiln/internal/syncbuf"
)

// Short bounds for tests: servers reload their keys every 50 ms and
// rotations wait 200 ms per change plus 50 ms for writes to land.
const (
	testKeyViewTTL  = 150 * time.Millisecond
	testKeyWriteTTL = 50 * time.Millisecond
)

// server is an app serving over loopback TLS, as one of several servers
// sharing a storage; its log is kept.
type server struct {
	a      *App
	url    string
	client *http.Client
	token  string
	log    *syncbuf.Buffer
}

func startServer(t testing.TB, storage Storage) *server {
	t.Helper()
	srv := httptest.NewUnstartedServer(nil)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	log := &syncbuf.Buffer{}
	a, err := Open(t.Context(), Config{Storage: storage, BaseURL: srv.URL, ProfileURL: "https://fhir.health.example/StructureDefinition", KeyViewTTL: testKeyViewTTL, KeyWriteTTL: testKeyWriteTTL,
		Logger: slog.New(slog.NewJSONHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	srv.Config.Handler = a.Handler
	tok, err := a.AdminToken(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return &server{a: a, url: srv.URL, client: srv.Client(), token: tok, log: log}
}

func (s *server) do(method, path string, body []byte) (int, map[string]any, error) {
	req, err := http.NewRequest(method, s.url+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+s.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/fhir+json")
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, err
	}
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	return resp.StatusCode, m, nil
}

// createWorker creates a workforce Patient with identifier emp and
// returns its id.
func (s *server) createWorker(emp string) (string, error) {
	body := fmt.Sprintf(`{"resourceType":"Patient","identifier":[{"system":"https://example.org/sid/employee-id","value":%q}],"name":[{"family":"Rotated"}]}`, emp)
	status, m, err := s.do("POST", "/workforce/fhir/Patient", []byte(body))
	if err != nil {
		return "", err
	}
	id, _ := m["id"].(string)
	if status != http.StatusCreated || id == "" {
		return "", fmt.Errorf("create %s: %d %v", emp, status, m)
	}
	return id, nil
}

// checkWorker reads the worker and finds it by its identifier.
func (s *server) checkWorker(id, emp string) error {
	status, m, err := s.do("GET", "/workforce/fhir/Patient/"+id, nil)
	if err != nil {
		return err
	}
	if status != http.StatusOK || m["id"] != id {
		return fmt.Errorf("read %s: %d %v", id, status, m)
	}
	status, m, err = s.do("GET", "/workforce/fhir/Patient?identifier="+url.QueryEscape(emp), nil)
	if err != nil {
		return err
	}
	entries, _ := m["entry"].([]any)
	if status != http.StatusOK || len(entries) != 1 {
		return fmt.Errorf("search %s: %d, %d matches: %v", emp, status, len(entries), m)
	}
	if res, _ := entries[0].(map[string]any)["resource"].(map[string]any); res["id"] != id {
		return fmt.Errorf("search %s found %v, want %s", emp, res["id"], id)
	}
	return nil
}

// workers are the resources a test wrote, by identifier.
type workers struct {
	mu  sync.Mutex
	ids map[string]string
}

func (w *workers) add(emp, id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ids[emp] = id
}

func (w *workers) all() map[string]string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]string, len(w.ids))
	for k, v := range w.ids {
		out[k] = v
	}
	return out
}

// seed writes n workers (each updated once, for history), a deleted one,
// and a registration of the platform API with an Idempotency-Key (claim
// and idempotency records in the partition).
func seed(t *testing.T, s *server, n int) *workers {
	t.Helper()
	w := &workers{ids: map[string]string{}}
	for i := range n {
		emp := fmt.Sprintf("EMP-%d", 1000+i)
		id, err := s.createWorker(emp)
		if err != nil {
			t.Fatal(err)
		}
		body := fmt.Sprintf(`{"resourceType":"Patient","id":%q,"identifier":[{"system":"https://example.org/sid/employee-id","value":%q}],"name":[{"family":"Updated"}]}`, id, emp)
		if status, m, err := s.do("PUT", "/workforce/fhir/Patient/"+id, []byte(body)); err != nil || status != http.StatusOK {
			t.Fatalf("update %s: %d %v %v", id, status, m, err)
		}
		w.add(emp, id)
	}
	gone, err := s.createWorker("EMP-999")
	if err != nil {
		t.Fatal(err)
	}
	if status, _, err := s.do("DELETE", "/workforce/fhir/Patient/"+gone, nil); err != nil || status != http.StatusNoContent && status != http.StatusOK {
		t.Fatalf("delete: %d %v", status, err)
	}
	req, _ := http.NewRequest("POST", s.url+"/workforce", strings.NewReader(`{"name":"Ada Rotate","employee_id":"EMP-77","company":"Rig Co","role":"Roughneck","department":"Drilling","contact_phone":"555 123"}`))
	req.Header.Set("Authorization", "Bearer "+s.token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", "rotate-seed-1")
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST /workforce: %d", resp.StatusCode)
	}
	return w
}

// traffic reads and searches every known worker, and creates new ones,
// from several goroutines until stop; errs collects every failure.
type traffic struct {
	stop  chan struct{}
	wg    sync.WaitGroup
	reads atomic.Int64
	mu    sync.Mutex
	errs  []error
}

func startTraffic(s *server, w *workers) *traffic {
	tr := &traffic{stop: make(chan struct{})}
	fail := func(err error) {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		tr.errs = append(tr.errs, err)
	}
	for r := range 3 {
		tr.wg.Add(1)
		go func() {
			defer tr.wg.Done()
			for i := r; ; i++ {
				select {
				case <-tr.stop:
					return
				default:
				}
				all := w.all()
				emps := slices.Sorted(func(yield func(string) bool) {
					for k := range all {
						if !yield(k) {
							return
						}
					}
				})
				emp := emps[i%len(emps)]
				if err := s.checkWorker(all[emp], emp); err != nil {
					fail(err)
				}
				tr.reads.Add(1)
			}
		}()
	}
	tr.wg.Add(1)
	go func() {
		defer tr.wg.Done()
		for i := range 100 { // bounded: a document store's scans grow with it
			select {
			case <-tr.stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
			emp := fmt.Sprintf("EMP-5%04d", i)
			id, err := s.createWorker(emp)
			if err != nil {
				fail(err)
				continue
			}
			w.add(emp, id)
		}
	}()
	return tr
}

func (tr *traffic) end(t *testing.T) {
	t.Helper()
	close(tr.stop)
	tr.wg.Wait()
	for _, err := range tr.errs {
		t.Errorf("during the rotation: %v", err)
	}
	if tr.reads.Load() == 0 {
		t.Error("no read ran during the rotation")
	}
}

// storedValues scans the store under the seal: the key id of every
// sealed body and record value, and of every blind tag of the index.
type storedValues struct {
	data, blind map[uint32]int
	plain       int // plain index keys (references to opaque ids)
}

func scanSQLite(t *testing.T, dir string) storedValues {
	t.Helper()
	path := filepath.Join(dir, PartitionWorkforce+".db")
	st, err := sqlite.Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	out := scanValues(t, st)
	db, err := sql.Open("sqlite3", "file:"+filepath.ToSlash(path)+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT key FROM search_keys`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			t.Fatal(err)
		}
		out.tag(k)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func (v *storedValues) tag(k string) {
	if kid, ok := sealed.TagKeyID(k); ok {
		v.blind[kid]++
	} else {
		v.plain++
	}
}

// scanValues reads every version's body and every sealed record value
// of inner.
func scanValues(t *testing.T, inner Store) storedValues {
	t.Helper()
	out := storedValues{data: map[uint32]int{}, blind: map[uint32]int{}}
	count := func(what string, b []byte) {
		kid, err := crypt.SealedKeyID(b)
		if err != nil {
			t.Fatalf("%s is not sealed: %v", what, err)
		}
		out.data[kid]++
	}
	cursor := ""
	for {
		page, err := inner.History(t.Context(), store.HistoryQuery{Count: 200, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range page.Versions {
			if !v.Deleted {
				count(v.Type+"/"+v.ID, v.Body)
			}
		}
		if cursor = page.Next; cursor == "" {
			break
		}
	}
	kinds, err := inner.(store.BodyRewriter).RecordKinds(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range kinds {
		if notSealedHere(kind) {
			continue
		}
		list, err := inner.ListRecords(t.Context(), kind)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range list {
			count("record "+kind+"/"+r.ID, r.Value)
		}
	}
	return out
}

// keyNeedles are the partition's keys, as they would appear in a log:
// raw, base64 (both alphabets, padded or not) and hex.
func keyNeedles(t *testing.T, s *server) [][]byte {
	t.Helper()
	svc, err := s.a.sealedService(PartitionWorkforce)
	if err != nil {
		t.Fatal(err)
	}
	keys, _, err := readPartitionKeys(t.Context(), svc.inner, s.a.master, PartitionWorkforce)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, k := range append(slices.Collect(mapsValues(keys.Data)), append(slices.Collect(mapsValues(keys.Blind)), keys.Claim)...) {
		out = append(out, bytes.Clone(k), []byte(hex.EncodeToString(k)))
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
			out = append(out, []byte(enc.EncodeToString(k)))
		}
	}
	return out
}

func mapsValues(m map[uint32][]byte) func(func([]byte) bool) {
	return func(yield func([]byte) bool) {
		for _, v := range m {
			if !yield(v) {
				return
			}
		}
	}
}

func noKeysIn(t *testing.T, what string, text []byte, needles [][]byte) {
	t.Helper()
	for _, n := range needles {
		if bytes.Contains(text, n) {
			t.Fatalf("%s holds a partition key", what)
		}
	}
}

// TestRotateDataKeys: a data-key rotation run by one app (the command)
// beside another that serves reads, searches and writes the whole time;
// the rotation is killed half way through its re-wrap, a second command
// is refused while the lease runs, and a later one carries the job on
// from its cursor. Every request succeeded, every value ends under the
// new key, the old key leaves the ring, nothing was lost, and no log
// holds a key.
func TestRotateDataKeys(t *testing.T) {
	storage := Storage{DataDir: t.TempDir()}
	rotateUnderTraffic(t, storage, RingData, func() storedValues { return scanSQLite(t, storage.DataDir) })
}

// TestRotateBlindKeys: the same for the blind-index key: the rebuild is
// killed and carried on, and at the end every index row is tagged under
// the new key.
func TestRotateBlindKeys(t *testing.T) {
	storage := Storage{DataDir: t.TempDir()}
	rotateUnderTraffic(t, storage, RingBlind, func() storedValues { return scanSQLite(t, storage.DataDir) })
}

// The same on MongoDB (make test-mongo).
func TestRotateDataKeysOnMongoDB(t *testing.T) {
	storage := mongoStorage(t)
	rotateUnderTraffic(t, storage, RingData, func() storedValues { return scanMongo(t, storage) })
}

func TestRotateBlindKeysOnMongoDB(t *testing.T) {
	storage := mongoStorage(t)
	rotateUnderTraffic(t, storage, RingBlind, func() storedValues { return scanMongo(t, storage) })
}

func mongoStorage(t *testing.T) Storage {
	t.Helper()
	uri := mongotest.URI(t)
	prefix := mongotest.NewName()
	t.Cleanup(func() {
		for _, p := range []string{PartitionClinical, PartitionWorkforce, PartitionAudit} {
			mongotest.Drop(t, prefix+"_"+p)
		}
	})
	return Storage{DataDir: t.TempDir(), MongoURI: uri, MongoDatabase: prefix, MongoWriteConcern: "majority"}
}

func scanMongo(t *testing.T, storage Storage) storedValues {
	t.Helper()
	name := storage.MongoDatabase + "_" + PartitionWorkforce
	st, err := mongo.Open(t.Context(), mongo.Config{URI: storage.MongoURI, Database: name, WriteConcern: "majority"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	out := scanValues(t, st)
	// The index keys: the k array of each resource document.
	c, err := mdriver.Connect(options.Client().ApplyURI(storage.MongoURI))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Disconnect(context.WithoutCancel(t.Context()))
	cur, err := c.Database(name).Collection("resources").Find(t.Context(), bson.D{}, options.Find().SetProjection(bson.D{{Key: "k", Value: 1}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close(t.Context())
	for cur.Next(t.Context()) {
		var d struct {
			K []string `bson:"k"`
		}
		if err := cur.Decode(&d); err != nil {
			t.Fatal(err)
		}
		for _, k := range d.K {
			out.tag(k)
		}
	}
	if err := cur.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func rotateUnderTraffic(t *testing.T, storage Storage, ring string, scan func() storedValues) {
	serving := startServer(t, storage)
	w := seed(t, serving, 40)
	command := startServer(t, storage)
	oldNeedles := keyNeedles(t, command)
	before := scan()
	if ring == RingData && (len(before.data) != 1 || before.data[1] == 0) || ring == RingBlind && (len(before.blind) != 1 || before.blind[1] == 0) {
		t.Fatalf("before the rotation: %+v", before)
	}

	tr := startTraffic(serving, w)
	work := PhaseRewrap
	if ring == RingBlind {
		work = PhaseRebuild
	}
	var seen []string
	killed := false
	job, err := command.a.RotateKeys(t.Context(), RotateOptions{Partition: PartitionWorkforce, Ring: ring, Page: 4,
		Progress: func(p RotationProgress) {
			if len(seen) == 0 || seen[len(seen)-1] != p.Phase {
				seen = append(seen, p.Phase)
			}
		},
		killAt: func(p RotationProgress) bool {
			killed = p.Phase == work && p.Done >= 20
			return killed
		}})
	if !errors.Is(err, errKilled) || !killed {
		t.Fatalf("the first command: %v (job %+v), want it killed during %s", err, job, work)
	}
	if !slices.Equal(seen, []string{PhaseStaged, PhasePromoted, work}) {
		t.Fatalf("phases seen: %v", seen)
	}
	var busy *RotationBusyError
	if _, err := command.a.RotateKeys(t.Context(), RotateOptions{Partition: PartitionWorkforce}); !errors.As(err, &busy) {
		t.Fatalf("a second command while the lease runs: %v, want a RotationBusyError", err)
	}
	if _, err := command.a.RotateKeys(t.Context(), RotateOptions{Partition: PartitionWorkforce, Ring: otherRing(ring),
		Now: func() time.Time { return time.Now().Add(time.Minute) }}); err == nil || !strings.Contains(err.Error(), "under way") {
		t.Fatalf("a rotation of the other ring while this one is under way: %v", err)
	}
	status, err := command.a.RotationStatus(t.Context(), PartitionWorkforce)
	if err != nil || status.Phase != work || status.Done < 20 || status.Cursor == "" && status.CursorType == "" {
		t.Fatalf("the job after the kill: %+v, %v", status, err)
	}

	// The lease lapsed: a later command carries the job on.
	later := func() time.Time { return time.Now().Add(time.Minute) }
	var resumedAt int64 = -1
	job, err = command.a.RotateKeys(t.Context(), RotateOptions{Partition: PartitionWorkforce, Page: 4, Now: later,
		Progress: func(p RotationProgress) {
			if resumedAt < 0 {
				resumedAt = p.Done
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	tr.end(t)
	t.Logf("%d reads and searches and %d workers written during the rotation; job %+v", tr.reads.Load(), len(w.all()), job)
	if resumedAt < 20 {
		t.Errorf("the second command started its pass at %d, not where the first stopped", resumedAt)
	}
	if job.Phase != PhaseDone || !slices.Equal(job.Retired, []uint32{1}) || len(job.Kept) != 0 || job.Target != 2 {
		t.Fatalf("the job: %+v", job)
	}

	after := scan()
	switch ring {
	case RingData:
		if len(after.data) != 1 || after.data[2] == 0 {
			t.Errorf("values by data key after the rotation: %v, want all under key 2", after.data)
		}
	case RingBlind:
		if len(after.blind) != 1 || after.blind[2] == 0 {
			t.Errorf("index tags by blind key after the rotation: %v, want all under key 2", after.blind)
		}
	}
	keys, _, err := readPartitionKeys(t.Context(), command.a.Services[1].inner, command.a.master, PartitionWorkforce)
	if err != nil {
		t.Fatal(err)
	}
	if ids, cur := ringOf(keys, ring); !slices.Equal(ringIDs(ids), []uint32{2}) || cur != 2 {
		t.Errorf("the %s ring after the rotation: %v, current %d", ring, ringIDs(ids), cur)
	}
	// Nothing lost, everything found, on both servers (the serving one
	// has loaded the ring without key 1 by now, or loads it on demand).
	for _, s := range []*server{serving, command} {
		for emp, id := range w.all() {
			if err := s.checkWorker(id, emp); err != nil {
				t.Error(err)
			}
		}
	}
	if !strings.Contains(serving.log.String(), "keys changed") {
		t.Error("the serving app did not log the key changes it loaded")
	}
	needles := append(oldNeedles, keyNeedles(t, command)...)
	noKeysIn(t, "the serving app's log", []byte(serving.log.String()), needles)
	noKeysIn(t, "the command's log", []byte(command.log.String()), needles)
	noKeysIn(t, "the job record", mustJSON(t, job), needles)
}

func otherRing(ring string) string {
	if ring == RingData {
		return RingBlind
	}
	return RingData
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRotationCancelReleasesTheLease: a command stopped by its context
// (Ctrl-C) records where it is and releases its lease: the next one
// carries on at once.
func TestRotationCancelReleasesTheLease(t *testing.T) {
	s := startServer(t, Storage{DataDir: t.TempDir()})
	seed(t, s, 5)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	_, err := s.a.RotateKeys(ctx, RotateOptions{Partition: PartitionWorkforce, Progress: func(p RotationProgress) {
		if p.Phase == PhaseStaged {
			cancel()
		}
	}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled rotation: %v", err)
	}
	job, err := s.a.RotationStatus(t.Context(), PartitionWorkforce)
	if err != nil || job.Owner != "" || job.Phase != PhaseStaged {
		t.Fatalf("after the cancel: %+v, %v; want the lease released in phase staged", job, err)
	}
	if job, err = s.a.RotateKeys(t.Context(), RotateOptions{Partition: PartitionWorkforce}); err != nil || job.Phase != PhaseDone {
		t.Fatalf("the next command: %+v, %v", job, err)
	}
	// A new rotation after a finished one adds key 3.
	if job, err = s.a.RotateKeys(t.Context(), RotateOptions{Partition: PartitionWorkforce, Ring: RingData}); err != nil || job.Target != 3 || !slices.Equal(job.Retired, []uint32{2}) {
		t.Fatalf("a second rotation: %+v, %v", job, err)
	}
}

// TestServersLoadKeyChanges: a key staged in the record reaches a
// running server by its reload, without any request.
func TestServersLoadKeyChanges(t *testing.T) {
	s := startServer(t, Storage{DataDir: t.TempDir()})
	svc, err := s.a.sealedService(PartitionWorkforce)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := updatePartitionKeys(t.Context(), svc.inner, s.a.master, PartitionWorkforce, func(k *partitionKeys) error {
		k.Blind[7] = randomKey()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !slices.Contains(svc.keys.Rings().Blind.IDs(), 7) {
		if time.Now().After(deadline) {
			t.Fatal("the server did not load the staged key within 10 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if cur := svc.keys.Rings().Blind.CurrentID(); cur != 1 {
		t.Fatalf("a staged key became current on load: %d", cur)
	}
}

// TestKeysRecordVersion1: a keys record written before rotations (no
// version, no current ids: the highest id current) is read as it was,
// and a rotation staging a key over it keeps the old current key.
func TestKeysRecordVersion1(t *testing.T) {
	dir := t.TempDir()
	master, err := crypt.LoadKeyring(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.Open(t.Context(), filepath.Join(dir, PartitionWorkforce+".db"))
	if err != nil {
		t.Fatal(err)
	}
	v1 := map[string]any{"data": map[string][]byte{"1": randomKey(), "2": randomKey()}, "blind": map[string][]byte{"1": randomKey()}, "claim": randomKey()}
	plain, _ := json.Marshal(v1)
	sealedValue, err := master.Seal(plain, keysAD(PartitionWorkforce))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.PutRecord(t.Context(), store.Record{Kind: partitionKeysKind, ID: PartitionWorkforce, Version: 1, Value: sealedValue}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	s := startServer(t, Storage{DataDir: dir})
	svc, _ := s.a.sealedService(PartitionWorkforce)
	if cur := svc.keys.Rings().Data.CurrentID(); cur != 2 {
		t.Fatalf("a version 1 record: current data key %d, want the highest, 2", cur)
	}
	if got := svc.keys.Rings().MaxAge; got != defaultKeyViewTTL {
		t.Fatalf("a version 1 record: view TTL %v, want the default", got)
	}
	r := &rotation{a: s.a, s: svc, opts: RotateOptions{Partition: PartitionWorkforce, Now: time.Now, Lease: time.Minute}, owner: "test",
		job: &RotationJob{Partition: PartitionWorkforce, Ring: RingData, Target: 3, Phase: PhaseStage}}
	if err := r.stage(t.Context()); err != nil {
		t.Fatal(err)
	}
	keys, _, err := readPartitionKeys(t.Context(), svc.inner, s.a.master, PartitionWorkforce)
	if err != nil {
		t.Fatal(err)
	}
	if keys.Format != partitionKeysFormat || keys.DataCurrent != 2 || keys.BlindCurrent != 1 || len(keys.Data) != 3 {
		t.Fatalf("after staging key 3 over a version 1 record: %s", keys)
	}
	if strings.Contains(fmt.Sprintf("%v %+v %#v %s", keys, keys, keys, keys), base64.StdEncoding.EncodeToString(keys.Claim)) {
		t.Fatal("the keys' text holds a key")
	}
}
