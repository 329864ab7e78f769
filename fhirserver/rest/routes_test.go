package rest

import (
	"context"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gorilla/mux"

	"github.com/kiln-fhir/kiln/fhirserver"
	"github.com/kiln-fhir/kiln/fhirserver/store/sqlite"
)

// A Bundle's entries are routed by fhirserver.MatchRoute, the REST API by
// the router Register mounts: both find the same route for every method
// and path, the same 405 (with the same Allow) and the same 404.
func TestEntriesAreRoutedAsRequests(t *testing.T) {
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "routes.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	svc, err := fhirserver.New(fhirserver.Config{BaseURL: "https://routes.example/fhir", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, st)
	if err != nil {
		t.Fatal(err)
	}
	r := mux.NewRouter().SkipClean(true)
	Register(r, "/fhir", svc)
	segments := []string{"", "metadata", "_search", "_history", "$reindex", "$validate", "$everything", "Patient", "patient",
		"Observation", "1", "a.b", "P1", "_history"}
	paths := []string{""}
	for _, a := range segments {
		paths = append(paths, "/"+a)
		for _, b := range segments {
			paths = append(paths, "/"+a+"/"+b)
			for _, c := range segments {
				paths = append(paths, "/"+a+"/"+b+"/"+c)
			}
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		var p strings.Builder
		for range 1 + rng.IntN(5) {
			p.WriteString("/" + segments[rng.IntN(len(segments))])
		}
		paths = append(paths, p.String())
	}
	for _, method := range []string{"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH"} {
		for _, path := range paths {
			req := httptest.NewRequest(method, "/fhir"+path, nil)
			var m mux.RouteMatch
			if !r.Match(req, &m) {
				t.Fatalf("%s %s: the router has no answer", method, path)
			}
			got := fhirserver.MatchRoute(method, path)
			switch {
			case m.MatchErr == mux.ErrNotFound:
				if got.Route != nil || got.Allow != "" {
					t.Errorf("%s %s: router 404, MatchRoute %+v", method, path, got)
				}
			case len(methodsOf(m.Route)) == 0: // the 405 of a known path
				if got.Route != nil || got.Allow == "" {
					t.Errorf("%s %s: router 405, MatchRoute %+v", method, path, got)
				}
				rec := httptest.NewRecorder()
				r.ServeHTTP(rec, req)
				if allow := rec.Header().Get("Allow"); allow != got.Allow {
					t.Errorf("%s %s: router allows %q, MatchRoute %q", method, path, allow, got.Allow)
				}
			default:
				tpl, _ := m.Route.GetPathTemplate()
				if got.Route == nil || "/fhir"+template(got.Route.Path) != tpl || got.Route.Method != method {
					t.Errorf("%s %s: router %s, MatchRoute %+v", method, path, tpl, got)
					continue
				}
				v := m.Vars
				if got.Type != v["type"] || got.ID != v["id"] || got.VID != v["vid"] || got.CType != v["ctype"] {
					t.Errorf("%s %s: router vars %v, MatchRoute %+v", method, path, v, got)
				}
			}
		}
	}
}

func methodsOf(rt *mux.Route) []string {
	ms, _ := rt.GetMethods()
	return ms
}
