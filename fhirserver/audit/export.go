package audit

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"
)

// ExportQuery selects the records of an export.
type ExportQuery struct {
	// Since keeps the records recorded at or after it (zero: all).
	Since time.Time
	// Partition keeps the records of one partition's FHIR service (the
	// source.type coding of SystemPartition; "": every record).
	Partition string
}

// exportPage is how many records an export reads at once.
const exportPage = 1000

// Export writes the records q selects as NDJSON, oldest first, one stored
// record (the chained AuditEvent, as hashed) a line, and returns how many
// it wrote. It reads the log in pages: memory stays bounded whatever its
// length. Records are in seq order, and their times follow it, so the
// first pass walks back from the newest record only until Since.
func Export(ctx context.Context, l Log, q ExportQuery, w io.Writer) (int, error) {
	newest, err := l.Newest(ctx, 0, 1)
	if err != nil || len(newest) == 0 {
		return 0, err
	}
	last := newest[0].Seq
	// The first seq to export: the oldest record at or after Since.
	first := int64(0)
	for before := int64(0); ; {
		page, err := l.Newest(ctx, before, exportPage)
		if err != nil {
			return 0, err
		}
		if len(page) == 0 {
			break
		}
		stop := false
		for _, e := range page {
			if !q.Since.IsZero() && e.Time.Before(q.Since) {
				stop = true
				break
			}
			first = e.Seq
		}
		if stop {
			break
		}
		before = page[len(page)-1].Seq
	}
	if first == 0 {
		return 0, nil
	}
	n := 0
	for lo := first; lo <= last; lo += exportPage {
		page, err := l.Newest(ctx, lo+exportPage, exportPage)
		if err != nil {
			return n, err
		}
		for i := len(page) - 1; i >= 0; i-- {
			e := page[i]
			if e.Seq < lo {
				continue
			}
			if q.Partition != "" {
				p, err := partitionOf(e.Body)
				if err != nil {
					return n, fmt.Errorf("audit record %d: %w", e.Seq, err)
				}
				if p != q.Partition {
					continue
				}
			}
			if _, err := w.Write(e.Body); err != nil {
				return n, err
			}
			if _, err := io.WriteString(w, "\n"); err != nil {
				return n, err
			}
			n++
		}
	}
	return n, nil
}

// partitionOf reads the partition coding of a stored record.
func partitionOf(body []byte) (string, error) {
	var r struct {
		Source struct {
			Type []jsonCoding `json:"type"`
		} `json:"source"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return "", err
	}
	for _, c := range r.Source.Type {
		if c.System == SystemPartition {
			return c.Code, nil
		}
	}
	return "", nil
}
