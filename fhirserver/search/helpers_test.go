package search

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

var (
	registryOnce sync.Once
	registry     *Registry
	registryErr  error
)

// testRegistry shares one core registry between tests (tests that add
// custom parameters build their own).
func testRegistry(tb testing.TB) *Registry {
	tb.Helper()
	registryOnce.Do(func() { registry, registryErr = NewRegistry() })
	if registryErr != nil {
		tb.Fatal(registryErr)
	}
	return registry
}

func decode(tb testing.TB, s string) map[string]any {
	tb.Helper()
	d := json.NewDecoder(bytes.NewReader([]byte(s)))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		tb.Fatal(err)
	}
	return m
}

func loadFixture(tb testing.TB, name string) map[string]any {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		tb.Fatal(err)
	}
	return decode(tb, string(b))
}
