package ucum

import (
	"strconv"
	"testing"
)

// TestUnitCacheKeepsCaching: unit expressions come from data, so the cache
// is bounded; once full it still caches new expressions (least recently
// used out), where it used to stop caching.
func TestUnitCacheKeepsCaching(t *testing.T) {
	for i := range maxCache + 100 {
		lookupUnit("mg/" + strconv.Itoa(i) + ".L")
	}
	if n := cache.Len(); n > maxCache {
		t.Errorf("cache holds %d entries, above the limit %d", n, maxCache)
	}
	last := "mg/" + strconv.Itoa(maxCache+99) + ".L"
	if !cache.Contains(last) {
		t.Errorf("%s was not cached once the cache was full", last)
	}
	if u := lookupUnit(last); u == nil || u.canon != lookupUnit("mg/1.L").canon {
		t.Errorf("cached %s = %+v", last, u)
	}
}
