package fhirserver

import (
	"context"
	"net/http"

	"github.com/kiln-fhir/kiln/fhirserver/fhirjson"
	"github.com/kiln-fhir/kiln/fhirserver/outcome"
	"github.com/kiln-fhir/kiln/fhirserver/search"
)

// indexRows extracts the search index rows of a resource body as it will be
// stored (id and meta already written in, so _id and _lastUpdated are
// indexed too).
func (s *Server) indexRows(ctx context.Context, typ string, body []byte) (*search.Rows, error) {
	res, err := decodeResource(body)
	if err != nil {
		return nil, err
	}
	return s.extractRows(ctx, typ, res)
}

// checkedRows is the work a write does on its final body outside the
// store: the second validation layer, then the index rows. The body is
// decoded once for both.
func (s *Server) checkedRows(ctx context.Context, typ string, body []byte) (*search.Rows, error) {
	res, err := decodeResource(body)
	if err != nil {
		return nil, err
	}
	if err := s.cfg.Validation.CheckWrite(ctx, typ, res); err != nil {
		return nil, err
	}
	return s.extractRows(ctx, typ, res)
}

// decodeResource decodes a resource body as encoding/json with UseNumber
// would (fhirjson.Decode is a faster equivalent), each call into a fresh
// tree the caller may edit.
func decodeResource(body []byte) (map[string]any, error) {
	res, err := fhirjson.Decode(body)
	if err != nil {
		return nil, outcome.New(http.StatusBadRequest, "invalid", "the resource is not a JSON object: "+err.Error())
	}
	return res, nil
}

func (s *Server) extractRows(ctx context.Context, typ string, res map[string]any) (*search.Rows, error) {
	rows, err := s.registry.ExtractRows(ctx, typ, res)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, outcome.New(http.StatusBadRequest, "processing", "the resource could not be indexed for search: "+err.Error())
	}
	return &rows, nil
}
