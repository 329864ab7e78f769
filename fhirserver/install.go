package fhirserver

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	"github.com/kiln-fhir/kiln/fhirserver/store"
)

// Install stores a conformance resource the server loaded (from the
// national pack or a FHIR package), so that it is read and searched like
// any other: GET [base]/StructureDefinition?url=… finds it. It writes a
// new version only when the stored one differs (meta aside), and never
// replaces a resource of the same id with another canonical URL: that id
// belongs to someone else. The resource passed structural validation
// where it was published; the second validation layer is not applied to
// it. A concurrent Install by another server sharing the store wins.
func (s *Server) Install(ctx context.Context, body []byte) (changed bool, err error) {
	info, err := s.validator.Check(body)
	if err != nil {
		return false, err
	}
	typ, id := info.ResourceType, info.ID
	if id == "" {
		return false, fmt.Errorf("install %s: the resource has no id", typ)
	}
	res, err := decodeResource(body)
	if err != nil {
		return false, err
	}
	prev, err := s.store.Read(ctx, typ, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		prev = nil
	case err != nil:
		return false, err
	case !prev.Deleted:
		old, err := decodeResource(prev.Body)
		if err != nil {
			return false, err
		}
		if old["url"] != res["url"] {
			return false, fmt.Errorf("install %s/%s: the stored %s/%s has another url (%v), so %v is not installed", typ, id, typ, id, old["url"], res["url"])
		}
		delete(old, "meta")
		delete(res, "meta")
		if reflect.DeepEqual(old, res) {
			return false, nil
		}
	}
	w, err := s.stamp(ctx, typ, id, prev, body, store.MethodUpdate)
	if err != nil {
		return false, err
	}
	if prev == nil {
		w.Method = store.MethodCreate
	}
	if w.Index, err = s.indexRows(ctx, typ, w.Body); err != nil {
		return false, err
	}
	if err := s.store.Put(ctx, w); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return false, nil
		}
		return false, err
	}
	return true, nil
}
