package walbuf

import (
	"bytes"
	"errors"
	"testing"

	"github.com/ncruces/go-sqlite3/vfs"
)

// memFile is a vfs.File in memory that records the writes it receives.
type memFile struct {
	data   []byte
	writes int
	syncs  int
	fail   error // returned by the next WriteAt
}

func (m *memFile) ReadAt(p []byte, off int64) (int, error) {
	if off >= int64(len(m.data)) {
		return 0, nil
	}
	return copy(p, m.data[off:]), nil
}

func (m *memFile) WriteAt(p []byte, off int64) (int, error) {
	if err := m.fail; err != nil {
		m.fail = nil
		return 0, err
	}
	m.writes++
	if end := int(off) + len(p); end > len(m.data) {
		m.data = append(m.data, make([]byte, end-len(m.data))...)
	}
	return copy(m.data[off:], p), nil
}

func (m *memFile) Truncate(size int64) error                       { m.data = m.data[:size]; return nil }
func (m *memFile) Sync(vfs.SyncFlag) error                         { m.syncs++; return nil }
func (m *memFile) Size() (int64, error)                            { return int64(len(m.data)), nil }
func (m *memFile) Close() error                                    { return nil }
func (m *memFile) Lock(vfs.LockLevel) error                        { return nil }
func (m *memFile) Unlock(vfs.LockLevel) error                      { return nil }
func (m *memFile) CheckReservedLock() (bool, error)                { return false, nil }
func (m *memFile) SectorSize() int                                 { return 4096 }
func (m *memFile) DeviceCharacteristics() vfs.DeviceCharacteristic { return 0 }

// TestWALFileGathersWrites proves that consecutive WAL writes reach the
// file as one write, and that every operation that could observe the file
// (a read, its size, a truncation, a sync, closing it, a write elsewhere)
// finds each earlier write in place.
func TestWALFileGathersWrites(t *testing.T) {
	frames := func(f *walFile, from int64, n int) {
		t.Helper()
		for i := range n {
			hdr := bytes.Repeat([]byte{byte('a' + i)}, 24)
			page := bytes.Repeat([]byte{byte('A' + i)}, 100)
			off := from + int64(i)*124
			if _, err := f.WriteAt(hdr, off); err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteAt(page, off+24); err != nil {
				t.Fatal(err)
			}
		}
	}
	want := func(n int) []byte { // what frames(f, 32, n) writes after a 32-byte header
		w := bytes.Repeat([]byte{'h'}, 32)
		for i := range n {
			w = append(w, bytes.Repeat([]byte{byte('a' + i)}, 24)...)
			w = append(w, bytes.Repeat([]byte{byte('A' + i)}, 100)...)
		}
		return w
	}
	for _, tc := range []struct {
		name    string
		observe func(t *testing.T, f *walFile) []byte // what the caller sees
	}{
		{"sync", func(t *testing.T, f *walFile) []byte {
			if err := f.Sync(vfs.SYNC_NORMAL); err != nil {
				t.Fatal(err)
			}
			return nil
		}},
		{"read", func(t *testing.T, f *walFile) []byte {
			p := make([]byte, len(want(5)))
			if _, err := f.ReadAt(p, 0); err != nil {
				t.Fatal(err)
			}
			return p
		}},
		{"size", func(t *testing.T, f *walFile) []byte {
			if n, err := f.Size(); err != nil || n != int64(len(want(5))) {
				t.Fatalf("size %d, %v; want %d", n, err, len(want(5)))
			}
			return nil
		}},
		{"truncate", func(t *testing.T, f *walFile) []byte {
			if err := f.Truncate(int64(len(want(5)))); err != nil {
				t.Fatal(err)
			}
			return nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &memFile{}
			f := &walFile{File: m}
			if _, err := f.WriteAt(bytes.Repeat([]byte{'h'}, 32), 0); err != nil {
				t.Fatal(err)
			}
			frames(f, 32, 5)
			if m.writes != 0 {
				t.Fatalf("%d writes reached the file before anything observed it", m.writes)
			}
			if got := tc.observe(t, f); got != nil && !bytes.Equal(got, want(5)) {
				t.Errorf("read back %q, want %q", got, want(5))
			}
			if m.writes != 1 || !bytes.Equal(m.data, want(5)) {
				t.Errorf("file has %q after %d writes, want %q in one", m.data, m.writes, want(5))
			}
		})
	}

	t.Run("closing drops what no commit synced", func(t *testing.T) {
		m := &memFile{}
		f := &walFile{File: m}
		frames(f, 32, 3)
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		if m.writes != 0 || len(m.data) != 0 {
			t.Errorf("file has %q after %d writes, want nothing", m.data, m.writes)
		}
	})

	t.Run("a write elsewhere comes after the gathered ones", func(t *testing.T) {
		m := &memFile{}
		f := &walFile{File: m}
		frames(f, 32, 3)
		// SQLite rewrites a frame it wrote earlier in the same transaction.
		if _, err := f.WriteAt(bytes.Repeat([]byte{'z'}, 24), 32); err != nil {
			t.Fatal(err)
		}
		if err := f.Sync(vfs.SYNC_NORMAL); err != nil {
			t.Fatal(err)
		}
		w := want(3)
		copy(w[32:], bytes.Repeat([]byte{'z'}, 24))
		if !bytes.Equal(m.data[32:], w[32:]) || m.writes != 2 {
			t.Errorf("file has %q after %d writes, want %q in two", m.data[32:], m.writes, w[32:])
		}
	})

	t.Run("a large transaction is written out as it goes", func(t *testing.T) {
		m := &memFile{}
		f := &walFile{File: m}
		page := make([]byte, 4096)
		n := 2*Limit/len(page) + 1
		for i := range n {
			if _, err := f.WriteAt(page, int64(i*len(page))); err != nil {
				t.Fatal(err)
			}
		}
		if m.writes != 2 || cap(f.buf) > 2*Limit {
			t.Errorf("%d writes reached the file, buffer capacity %d; want 2 and at most %d", m.writes, cap(f.buf), 2*Limit)
		}
	})

	t.Run("a failed write fails the sync and leaves nothing buffered", func(t *testing.T) {
		m := &memFile{fail: errors.New("disk full")}
		f := &walFile{File: m}
		frames(f, 32, 2)
		if err := f.Sync(vfs.SYNC_NORMAL); err == nil || m.syncs != 0 {
			t.Fatalf("sync: %v after %d syncs; want the write's error, and no sync", err, m.syncs)
		}
		if len(f.buf) != 0 {
			t.Errorf("%d bytes still buffered", len(f.buf))
		}
	})
}
