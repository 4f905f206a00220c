//go:build !linux

package main

// hideEnviron has nothing to do where /proc does not show a process's
// environment to its user's other processes.
func hideEnviron() error { return nil }
