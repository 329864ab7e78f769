// Package gztest gzip-encodes request bodies for tests.
package gztest

import (
	"bytes"
	"compress/gzip"
	"testing"
)

// Encode returns b gzip-encoded.
func Encode(tb testing.TB, b []byte) []byte {
	tb.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		tb.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}
