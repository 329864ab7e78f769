package sqlite

import (
	"sync"

	"github.com/ncruces/go-sqlite3/vfs"
)

// A commit writes every page it changed to the WAL as a frame, and SQLite
// writes each frame as two pwrite(2)s, its 24-byte header and its page:
// ~1,100 system calls for a transaction Bundle of 100 resources, about a
// tenth of the writer's time. walBufferVFS gathers a WAL's consecutive
// writes in memory and hands them to the OS in one call, at the latest
// when SQLite syncs the WAL.
//
// That is safe only because SQLite syncs the WAL on every commit, before
// it publishes the new frames to other connections in the WAL index (the
// shared memory, which this VFS cannot see), when synchronous is FULL or
// EXTRA: frames still in the buffer are never visible to anyone. With
// synchronous=NORMAL a commit publishes frames without a sync, so dsn
// uses this VFS only when the WAL is synced on commit.
//
// Frames of a transaction that has not committed may stay buffered: no
// other connection reads them, and this connection's own reads of the
// WAL (a page evicted from its cache, a checkpoint) flush first. A crash
// loses what is buffered, as it would lose writes not yet synced.
const walBufferVFSName = "kiln-walbuf"

// walBufferLimit bounds the memory a buffer holds before it is written
// out: large transactions flush as they go.
const walBufferLimit = 4 << 20

var registerWALBuffer = sync.OnceFunc(func() {
	vfs.Register(walBufferVFSName, walBufferVFS{vfs.Find("")})
})

// walBufferVFS is the default VFS with buffered WAL files; every other
// file (the database, journals) is the default VFS's own.
type walBufferVFS struct{ vfs.VFS }

func (v walBufferVFS) OpenFilename(name *vfs.Filename, flags vfs.OpenFlag) (vfs.File, vfs.OpenFlag, error) {
	var f vfs.File
	var err error
	if fn, ok := v.VFS.(vfs.VFSFilename); ok {
		f, flags, err = fn.OpenFilename(name, flags)
	} else {
		f, flags, err = v.VFS.Open(name.String(), flags)
	}
	if err != nil || flags&vfs.OPEN_WAL == 0 {
		return f, flags, err
	}
	return &walFile{File: f}, flags, nil
}

// walFile is a WAL file whose consecutive writes are gathered in buf,
// which starts at offset off. Every other operation writes buf out
// first, so the file is as if each write had been made when it was.
// SQLite uses a file from one connection at a time.
type walFile struct {
	vfs.File
	buf []byte
	off int64
}

func (f *walFile) WriteAt(p []byte, off int64) (int, error) {
	if len(f.buf) > 0 && off != f.off+int64(len(f.buf)) {
		if err := f.flush(); err != nil {
			return 0, err
		}
	}
	if len(f.buf) == 0 {
		f.off = off
	}
	f.buf = append(f.buf, p...)
	if len(f.buf) >= walBufferLimit {
		if err := f.flush(); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// flush writes the buffer out. On failure the buffer is dropped: SQLite
// then fails the write or sync that asked, and rolls the transaction
// back; its frames were never published.
func (f *walFile) flush() error {
	if len(f.buf) == 0 {
		return nil
	}
	_, err := f.File.WriteAt(f.buf, f.off)
	f.buf = f.buf[:0]
	return err
}

func (f *walFile) ReadAt(p []byte, off int64) (int, error) {
	if err := f.flush(); err != nil {
		return 0, err
	}
	return f.File.ReadAt(p, off)
}

func (f *walFile) Sync(flags vfs.SyncFlag) error {
	if err := f.flush(); err != nil {
		return err
	}
	return f.File.Sync(flags)
}

func (f *walFile) Truncate(size int64) error {
	if err := f.flush(); err != nil {
		return err
	}
	return f.File.Truncate(size)
}

func (f *walFile) Size() (int64, error) {
	if err := f.flush(); err != nil {
		return 0, err
	}
	return f.File.Size()
}

func (f *walFile) Close() error {
	err := f.flush()
	if cerr := f.File.Close(); err == nil {
		err = cerr
	}
	return err
}
