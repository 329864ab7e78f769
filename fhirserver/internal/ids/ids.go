// Package ids makes the ids the server assigns to new resources.
package ids

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"time"
)

// New returns a server-assigned resource id: a UUID in the version 7 layout
// (48-bit millisecond time, then random bits). Ids that grow with time keep
// B-tree inserts local in every backend, and 74 random bits make collisions
// practically impossible.
func New(now time.Time) string {
	var u [16]byte
	if _, err := rand.Read(u[6:]); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	var ms [8]byte
	binary.BigEndian.PutUint64(ms[:], uint64(now.UnixMilli()))
	copy(u[:6], ms[2:])
	u[6] = u[6]&0x0f | 0x70 // version 7
	u[8] = u[8]&0x3f | 0x80 // RFC 4122 variant
	var s [36]byte
	hex.Encode(s[0:8], u[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], u[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], u[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], u[8:10])
	s[23] = '-'
	hex.Encode(s[24:], u[10:])
	return string(s[:])
}
