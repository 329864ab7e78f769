package fhirpath

// Sibling returns the "_name" sibling object of a primitive taken from the
// input JSON (the object that holds its id and extension), or nil when the
// value is a System value, a complex node, or a primitive without one. The
// map is the decoded input itself, not a copy: its identity tells where the
// primitive lives in the document (package patch relies on that).
func (v Value) Sibling() map[string]any {
	if v.k != kNode {
		return nil
	}
	if _, ok := v.node.(map[string]any); ok {
		return nil
	}
	return v.ext
}
