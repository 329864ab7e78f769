package store

import "time"

// LogEntry is one record of an append-only log, e.g. the audit chain: a
// sequence number (its key, increasing along the log), the time it was
// written and its bytes.
type LogEntry struct {
	Seq  int64
	Time time.Time
	Body []byte
}
