package search

import "github.com/kiln-fhir/kiln/fhirserver/search/internal/fold"

// FoldVersion names the definition of Normalize. Stored string index keys
// were built with the fold of the version that wrote them: a store whose
// keys carry an older version must be reindexed before they match queries
// folded with this one (the versions are listed in package fold).
const FoldVersion = fold.Version

// Normalize folds s for string search: case and accents are ignored
// ("family=muller" finds "Müller"), runs of white space become one space.
// Stored strings and query values are folded alike (package fold holds
// the definition).
func Normalize(s string) string { return fold.Normalize(s) }
