//go:build unix

package main

import "syscall"

// privateFiles makes every file Kiln creates readable by its owner only.
// The data folder holds health data, and SQLite's WAL and shared-memory
// files (clinical.db-wal, -shm) would otherwise get 0644 from the usual
// umask: the WAL holds the most recent pages of the database.
func privateFiles() { syscall.Umask(0o077) }
