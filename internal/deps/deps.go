// Package deps pins modules while the packages that use them are written.
// Temporary: removed once every dependency is imported by real code.
package deps

import (
	_ "github.com/google/fhir/go/fhirversion"
	_ "github.com/google/fhir/go/jsonformat"
	_ "github.com/gorilla/mux"
	_ "github.com/ncruces/go-sqlite3/driver"
	_ "github.com/ncruces/go-sqlite3/embed"
)
