package sqlite

import (
	"context"
	"fmt"
	"math/big"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/kiln-fhir/kiln/fhirserver/search"
	"github.com/kiln-fhir/kiln/fhirserver/store"
)

// The search benchmarks share one dataset per process: 10,000 Patients
// (KILN_BENCH_PATIENTS overrides) with 10 Observations each
// (KILN_BENCH_OBS), written through Put with rows built by search.MakeRows
// from hand-made entries shaped like the extractor's.

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v >= 0 {
		return v
	}
	return def
}

var syllables = []string{"ka", "lo", "mi", "sa", "to", "ber", "son", "ri", "an", "el", "vo", "dr", "ne", "gu", "pa", "sch", "mit", "ho", "we", "zi"}

// familyName is a deterministic surname: 2-3 syllables, so that 2-letter
// prefixes select a few percent of the patients and 4-letter ones far less.
func familyName(r *rand.Rand) string {
	n := 2 + r.IntN(2)
	s := ""
	for range n {
		s += syllables[r.IntN(len(syllables))]
	}
	return s
}

func loincCode(i int) string { return fmt.Sprintf("%d-%d", 1000+i, i%10) }

func rat(f float64) *big.Rat { return new(big.Rat).SetFloat64(f) }

func patientWrite(r *rand.Rand, i int) store.Write {
	id := "p" + strconv.Itoa(i)
	fam := familyName(r)
	birth := time.Date(1930+r.IntN(90), time.Month(1+r.IntN(12)), 1+r.IntN(28), 0, 0, 0, 0, time.UTC)
	entries := []search.Entry{
		{Param: "_id", Kind: search.KindToken, Code: id},
		{Param: "family", Kind: search.KindString, Str: fam, Exact: fam},
		{Param: "name", Kind: search.KindString, Str: fam, Exact: fam},
		{Param: "given", Kind: search.KindString, Str: "given" + strconv.Itoa(r.IntN(500)), Exact: "Given"},
		{Param: "gender", Kind: search.KindToken, System: "http://hl7.org/fhir/administrative-gender", Code: []string{"male", "female"}[r.IntN(2)]},
		{Param: "birthdate", Kind: search.KindDate, Low: birth, High: birth.AddDate(0, 0, 1)},
		{Param: "identifier", Kind: search.KindToken, System: "urn:oid:1.2.3", Code: "MRN" + strconv.Itoa(i)},
		{Param: "active", Kind: search.KindToken, Code: "true"},
	}
	rows := search.MakeRows(entries)
	w := store.Write{Type: "Patient", ID: id, Version: 1, LastUpdated: time.Now(), Method: store.MethodCreate,
		Body: fmt.Appendf(nil, `{"resourceType":"Patient","id":%q,"name":[{"family":%q}],"birthDate":%q}`, id, fam, birth.Format("2006-01-02")), Index: &rows}
	return w
}

func observationWrite(r *rand.Rand, patient, i int) store.Write {
	id := "o" + strconv.Itoa(i)
	code := loincCode(r.IntN(50))
	when := time.Date(2015+r.IntN(10), time.Month(1+r.IntN(12)), 1+r.IntN(28), r.IntN(24), 0, 0, 0, time.UTC)
	v := float64(r.IntN(2000)) / 10
	entries := []search.Entry{
		{Param: "_id", Kind: search.KindToken, Code: id},
		{Param: "subject", Kind: search.KindReference, RefType: "Patient", RefID: "p" + strconv.Itoa(patient)},
		{Param: "patient", Kind: search.KindReference, RefType: "Patient", RefID: "p" + strconv.Itoa(patient)},
		{Param: "code", Kind: search.KindToken, System: "http://loinc.org", Code: code, Text: "observation " + code},
		{Param: "status", Kind: search.KindToken, System: "http://hl7.org/fhir/observation-status", Code: "final"},
		{Param: "category", Kind: search.KindToken, System: "http://terminology.hl7.org/CodeSystem/observation-category", Code: "laboratory"},
		{Param: "date", Kind: search.KindDate, Low: when, High: when.Add(time.Second)},
		{Param: "value-quantity", Kind: search.KindQuantity, Value: rat(v), NumLow: rat(v - 0.05), NumHigh: rat(v + 0.05),
			System: "http://unitsofmeasure.org", Code: "mg/dL", Unit: "mg/dL"},
	}
	rows := search.MakeRows(entries)
	return store.Write{Type: "Observation", ID: id, Version: 1, LastUpdated: time.Now(), Method: store.MethodCreate,
		Body:  fmt.Appendf(nil, `{"resourceType":"Observation","id":%q,"subject":{"reference":"Patient/p%d"},"code":{"coding":[{"system":"http://loinc.org","code":%q}]},"valueQuantity":{"value":%g}}`, id, patient, code, v),
		Index: &rows}
}

var benchData struct {
	once     sync.Once
	s        *Store
	dir      string
	patients int
	err      error
}

// TestMain removes the shared benchmark database, which outlives any one
// benchmark and so cannot use b.TempDir.
func TestMain(m *testing.M) {
	code := m.Run()
	if benchData.s != nil {
		benchData.s.Close()
	}
	if benchData.dir != "" {
		os.RemoveAll(benchData.dir)
	}
	os.Exit(code)
}

// searchStore builds (once per process) and returns the benchmark store.
func searchStore(b *testing.B) *Store {
	b.Helper()
	benchData.once.Do(func() {
		n, obsPerPatient := max(envInt("KILN_BENCH_PATIENTS", 10000), 1), envInt("KILN_BENCH_OBS", 10)
		dir, err := os.MkdirTemp("", "kiln-search-bench")
		if err != nil {
			benchData.err = err
			return
		}
		benchData.dir = dir
		s, err := open(context.Background(), filepath.Join(dir, "bench.db"), options{synchronous: "NORMAL"})
		if err != nil {
			benchData.err = err
			return
		}
		start := time.Now()
		r := rand.New(rand.NewPCG(1, 2))
		const batch = 1000
		obs := 0
		for i := 0; i < n; i += batch / (obsPerPatient + 1) {
			err = s.Transact(context.Background(), func(tx store.Tx) error {
				for p := i; p < min(n, i+batch/(obsPerPatient+1)); p++ {
					if err := tx.Put(context.Background(), patientWrite(r, p)); err != nil {
						return err
					}
					for range obsPerPatient {
						if err := tx.Put(context.Background(), observationWrite(r, p, obs)); err != nil {
							return err
						}
						obs++
					}
				}
				return nil
			})
			if err != nil {
				benchData.err = err
				return
			}
		}
		fmt.Fprintf(os.Stderr, "search bench: %d patients, %d observations written in %v (%.0f resources/s)\n",
			n, obs, time.Since(start).Round(time.Millisecond), float64(n+obs)/time.Since(start).Seconds())
		benchData.s, benchData.patients = s, n
	})
	if benchData.err != nil {
		b.Fatal(benchData.err)
	}
	return benchData.s
}

func runSearchBench(b *testing.B, s *Store, mk func(r *rand.Rand) *search.Query) {
	b.Helper()
	r := rand.New(rand.NewPCG(7, 8))
	matches := 0
	var took []time.Duration
	for b.Loop() {
		q := mk(r)
		start := time.Now()
		page, err := s.Search(context.Background(), q)
		took = append(took, time.Since(start))
		if err != nil {
			b.Fatal(err)
		}
		matches += len(page.Matches)
	}
	b.ReportMetric(float64(matches)/float64(b.N), "matches/op")
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(took[len(took)*99/100].Microseconds()), "p99-µs")
}

func subjectCodeQuery(r *rand.Rand, patients int) *search.Query {
	p := r.IntN(patients)
	return &search.Query{Types: []string{"Observation"}, Count: 20, Where: []search.Clause{
		{Param: "subject", Any: []search.Match{{Op: search.OpKey, Keys: []string{"subject\x1fPatient/p" + strconv.Itoa(p)}}}},
		{Param: "code", Any: []search.Match{{Op: search.OpKey, Keys: []string{"code\x1fhttp://loinc.org|" + loincCode(r.IntN(50))}}}},
	}}
}

func familyBirthQuery(r *rand.Rand, prefixLen int) *search.Query {
	fam := familyName(r)
	lo := time.Date(1930+r.IntN(90), 1, 1, 0, 0, 0, 0, time.UTC)
	return &search.Query{Types: []string{"Patient"}, Count: 20, Where: []search.Clause{
		{Param: "family", Any: []search.Match{{Op: search.OpKeyPrefix, Prefix: "family\x1f" + fam[:prefixLen]}}},
		{Param: "birthdate", Any: []search.Match{{Op: search.OpDate, Param: "birthdate", Cmp: search.CmpGe, Low: lo.UnixMicro(), High: lo.AddDate(0, 0, 1).UnixMicro()}}},
	}}
}

// BenchmarkSearchSubjectCode: Observation?subject=Patient/X&code=loinc|Y.
func BenchmarkSearchSubjectCode(b *testing.B) {
	s := searchStore(b)
	runSearchBench(b, s, func(r *rand.Rand) *search.Query { return subjectCodeQuery(r, benchData.patients) })
}

// BenchmarkSearchSubject: Observation?subject=Patient/X (10 matches).
func BenchmarkSearchSubject(b *testing.B) {
	s := searchStore(b)
	runSearchBench(b, s, func(r *rand.Rand) *search.Query {
		q := subjectCodeQuery(r, benchData.patients)
		q.Where = q.Where[:1]
		return q
	})
}

// BenchmarkSearchCode: Observation?code=loinc|Y, first page of 20 among
// ~2% of the observations.
func BenchmarkSearchCode(b *testing.B) {
	s := searchStore(b)
	runSearchBench(b, s, func(r *rand.Rand) *search.Query {
		q := subjectCodeQuery(r, benchData.patients)
		q.Where = q.Where[1:]
		return q
	})
}

// BenchmarkSearchFamilyBirthdate: Patient?family=<prefix>&birthdate=ge<date>
// with 2-, 3- and 4-letter prefixes.
func BenchmarkSearchFamilyBirthdate(b *testing.B) {
	s := searchStore(b)
	for _, n := range []int{2, 3, 4} {
		b.Run("prefix="+strconv.Itoa(n), func(b *testing.B) {
			runSearchBench(b, s, func(r *rand.Rand) *search.Query { return familyBirthQuery(r, n) })
		})
	}
}

// BenchmarkSearchSortedPage: Observation?code=Y&_sort=-date, one page of 20.
func BenchmarkSearchSortedPage(b *testing.B) {
	s := searchStore(b)
	runSearchBench(b, s, func(r *rand.Rand) *search.Query {
		q := subjectCodeQuery(r, benchData.patients)
		q.Where = q.Where[1:]
		q.Sort = []search.Sort{{Param: "date", Desc: true, Type: "date"}}
		return q
	})
}

// BenchmarkSearchSortDate: Observation?code=X&_sort=-date&_count=5 where
// X is one code (~2% of the observations, about the estimate limit) or
// the status every observation has: a large first clause,
// whose every match the driver plan would read and sort.
func BenchmarkSearchSortDate(b *testing.B) {
	s := searchStore(b)
	for _, c := range []struct {
		name string
		key  func(r *rand.Rand) string
	}{
		{"code", func(r *rand.Rand) string { return "code\x1fhttp://loinc.org|" + loincCode(r.IntN(50)) }},
		{"common", func(*rand.Rand) string { return "status\x1ffinal" }},
	} {
		b.Run(c.name, func(b *testing.B) {
			runSearchBench(b, s, func(r *rand.Rand) *search.Query {
				return &search.Query{Types: []string{"Observation"}, Count: 5,
					Where: []search.Clause{{Param: "code", Any: []search.Match{{Op: search.OpKey, Keys: []string{c.key(r)}}}}},
					Sort:  []search.Sort{{Param: "date", Desc: true, Type: "date"}}}
			})
		})
	}
}

// BenchmarkPutWithRows: one Observation with its ~20 index rows per
// transaction, and 100 per transaction (a batch or transaction Bundle).
func BenchmarkPutWithRows(b *testing.B) {
	for _, per := range []int{1, 100} {
		for _, sync := range []string{"FULL", "NORMAL"} {
			b.Run(fmt.Sprintf("per_tx=%d/synchronous=%s", per, sync), func(b *testing.B) {
				s := benchOpen(b, sync)
				r := rand.New(rand.NewPCG(3, 4))
				ws := make([]store.Write, 0, per)
				i := 0
				for b.Loop() {
					ws = append(ws, observationWrite(r, i%1000, i))
					i++
					if len(ws) < per {
						continue
					}
					err := s.Transact(context.Background(), func(tx store.Tx) error {
						for _, w := range ws {
							if err := tx.Put(context.Background(), w); err != nil {
								return err
							}
						}
						return nil
					})
					if err != nil {
						b.Fatal(err)
					}
					ws = ws[:0]
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "resources/s")
			})
		}
	}
}
