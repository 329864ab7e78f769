//go:build !unix

package main

// privateFiles: on systems without a umask the data folder's ACLs apply.
func privateFiles() {}
