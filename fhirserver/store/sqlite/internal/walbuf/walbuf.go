// Package walbuf is a SQLite VFS whose WAL files gather consecutive
// writes in memory and hand them to the OS in one call: the buffered WAL
// of the SQLite store's writer connection.
package walbuf

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
// What makes that safe is that every frame in the buffer belongs to a
// commit still in progress, and that commit syncs the WAL before anyone
// can see its frames:
//
//   - With synchronous FULL or EXTRA, SQLite syncs the WAL at the end of
//     writing a commit's frames, before it publishes them in the WAL index
//     (the shared memory, which this VFS cannot see). The store's dsn
//     uses this VFS only then: with NORMAL a commit is published without
//     a sync.
//   - Cache spill is off on these connections (the store's dsn), so no
//     frame is written before the commit: a transaction that outgrows the
//     page cache would otherwise write frames, roll back, and leave them
//     in the buffer after it released the write lock, to be written later
//     over frames another connection committed in the meantime. A
//     transaction larger than the cache holds its pages in memory
//     instead; schema migrations, which rewrite whole tables, run on a
//     connection of their own without the buffer (the store's
//     migratorRole), free to spill.
//   - The database must allow power-safe overwrite (SQLite's default):
//     without it SQLite pads the last frame of a commit and writes part of
//     the padding after the sync, yet publishes it (walFile is only used
//     when the database file says so).
//   - Closing the file drops what is buffered: only a transaction that
//     never committed can leave anything there.
//
// A crash loses what is buffered, as it would lose writes not yet synced.
const VFSName = "kiln-walbuf"

// Limit bounds the memory a buffer holds before it is written out:
// large transactions flush as they go.
const Limit = 4 << 20

// Register registers the VFS under VFSName, once however often it is
// called.
var Register = sync.OnceFunc(func() {
	vfs.Register(VFSName, walBufferVFS{vfs.Find("")})
})

// IsBuffered reports whether f, a file SQLite holds open, is a WAL file
// this VFS buffers.
func IsBuffered(f any) bool {
	_, ok := f.(*walFile)
	return ok
}

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
	if err != nil || flags&vfs.OPEN_WAL == 0 || !powersafe(name) {
		return f, flags, err
	}
	return &walFile{File: f}, flags, nil
}

// powersafe reports whether the database of a WAL file allows power-safe
// overwrite: SQLite then writes a commit's last frame whole before its
// sync (see above).
func powersafe(wal *vfs.Filename) bool {
	db := wal.DatabaseFile()
	return db != nil && db.DeviceCharacteristics()&vfs.IOCAP_POWERSAFE_OVERWRITE != 0
}

// walFile is a WAL file whose consecutive writes are gathered in buf,
// which starts at offset off. Every other operation but Close writes buf
// out first, so the file is as if each write had been made when it was.
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
	if len(f.buf) >= Limit {
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
	// The frames are in the file now; the buffer's array is reused, so
	// its old bytes (pages of erased patients among them) are zeroed
	// rather than left in memory until overwritten.
	clear(f.buf)
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

// Close drops the buffer: frames still there belong to a transaction that
// never committed (a committed one was synced, which flushed them).
func (f *walFile) Close() error {
	clear(f.buf)
	f.buf = nil
	return f.File.Close()
}
