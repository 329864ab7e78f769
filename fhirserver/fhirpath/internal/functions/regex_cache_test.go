package functions

import (
	"strconv"
	"testing"
)

// TestRegexCacheKeepsCaching: patterns can come from data, so the cache is
// bounded; once full it still caches new patterns (least recently used
// out), where it used to stop caching. Bad patterns are cached with their
// error.
func TestRegexCacheKeepsCaching(t *testing.T) {
	for i := range maxRegexCache + 100 {
		if _, err := compileRegex("^a" + strconv.Itoa(i) + "$"); err != nil {
			t.Fatal(err)
		}
	}
	if n := regexCache.Len(); n > maxRegexCache {
		t.Errorf("cache holds %d entries, above the limit %d", n, maxRegexCache)
	}
	last := "^a" + strconv.Itoa(maxRegexCache+99) + "$"
	if !regexCache.Contains(last) {
		t.Errorf("%s was not cached once the cache was full", last)
	}
	for range 2 {
		if re, err := compileRegex("a(b"); re != nil || err == nil {
			t.Errorf("bad pattern: %v, %v", re, err)
		}
	}
}
