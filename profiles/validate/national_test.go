package validate

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kiln-fhir/kiln/profiles"
	"github.com/kiln-fhir/kiln/profiles/national"
)

const nationalProfileURL = "https://fhir.health.example/StructureDefinition"

// nationalPatient reads the pack's example Patient with the placeholders
// filled in: a typical national Patient of about 2 KB.
func nationalPatient(tb testing.TB) []byte {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("..", "national", "examples", "Patient-PT-1001.json"))
	if err != nil {
		tb.Fatal(err)
	}
	return []byte(strings.NewReplacer("{{profile_url}}", nationalProfileURL,
		"{{canonical}}", strings.TrimSuffix(nationalProfileURL, "/StructureDefinition")).Replace(string(b)))
}

func nationalValidator(tb testing.TB) *Validator {
	tb.Helper()
	set, err := profiles.NewSet(profiles.SetOptions{ProfileURL: nationalProfileURL, National: national.Files})
	if err != nil {
		tb.Fatal(err)
	}
	return New(set, Options{})
}

// BenchmarkValidateNationalPatient validates a typical Patient against the
// national Patient profile (and the base definition under it), from its
// JSON bytes as a write receives them, and from decoded JSON as the server
// holds it (the decoding is shared with search indexing).
func BenchmarkValidateNationalPatient(b *testing.B) {
	v := nationalValidator(b)
	url := nationalProfileURL + "/Patient"
	if err := v.Prepare(url); err != nil {
		b.Fatal(err)
	}
	body := nationalPatient(b)
	r, err := v.ValidateJSON(b.Context(), body, url)
	if err != nil || r.HasErrors() {
		b.Fatalf("the example is not valid: %v%s", err, dump(r.Issues))
	}
	b.Run("json", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			if _, err := v.ValidateJSON(b.Context(), body, url); err != nil {
				b.Fatal(err)
			}
		}
	})
	res := decode(b, string(body))
	b.Run("decoded", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := v.Validate(b.Context(), res, url); err != nil {
				b.Fatal(err)
			}
		}
	})
}
