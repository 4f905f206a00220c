//go:build linux

package main

import "syscall"

// hideEnviron makes the gateway's /proc entries that hold secrets (its
// environment, its memory) readable by root only, and the gateway
// untraceable: a child runs as the gateway's user and must not read
// GATEWAY_SECRET, GATEWAY_AUTH_TOKENS or any other setting from
// /proc/<gateway pid>/environ. A child the gateway
// starts is dumpable again: exec resets the flag.
func hideEnviron() error {
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_DUMPABLE, 0, 0); errno != 0 {
		return errno
	}
	return nil
}
