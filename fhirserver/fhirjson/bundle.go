package fhirjson

import (
	"encoding/json"
	"runtime"
	"strconv"
	"sync"

	"github.com/kiln-fhir/kiln/fhirserver/outcome"
)

// structuralBundle is the structural check of a Bundle, split so that it
// uses every CPU: google/fhir checks the Bundle without its entries'
// resources, and each resource on its own, concurrently. google/fhir is the
// bulk of the cost of accepting a transaction, and one large Bundle would
// otherwise keep a single core busy while the others idle. The issues are
// those of one whole check: an entry's expressions are rooted at
// Bundle.entry[i].resource.
func (v *Validator) structuralBundle(body []byte) []outcome.Issue {
	shell, resources, ok := splitBundle(body)
	if !ok || len(resources) < 2 {
		return v.structural(body, "")
	}
	body = shell

	perEntry := make([][]outcome.Issue, len(resources))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(resources)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				perEntry[i] = v.structural(resources[i], "Bundle.entry["+strconv.Itoa(i)+"].resource")
			}
		}()
	}
	for i, r := range resources {
		if len(r) > 0 {
			next <- i
		}
	}
	close(next)
	wg.Wait()

	issues := v.structural(body, "")
	for _, is := range perEntry {
		issues = append(issues, is...)
	}
	return issues
}

// splitBundle returns the Bundle without its entries' resources, and the
// resources by entry index (nil where an entry has none).
func splitBundle(body []byte) (shell []byte, resources []json.RawMessage, ok bool) {
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, nil, false
	}
	if _, has := doc["entry"]; !has {
		return body, nil, true
	}
	var entries []map[string]json.RawMessage
	if err := json.Unmarshal(doc["entry"], &entries); err != nil {
		return nil, nil, false
	}
	resources = make([]json.RawMessage, len(entries))
	for i, e := range entries {
		resources[i] = e["resource"]
		delete(e, "resource")
	}
	entryJSON, err := json.Marshal(entries)
	if err != nil {
		return nil, nil, false
	}
	doc["entry"] = entryJSON
	if shell, err = json.Marshal(doc); err != nil {
		return nil, nil, false
	}
	return shell, resources, true
}
