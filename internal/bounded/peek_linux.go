package bounded

import (
	"bytes"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// peekSize is how much of what a client sent and the server has not read yet is looked at.
const peekSize = 8 << 10

// headersWaiting reports whether the kernel holds, among the first peekSize bytes c's client
// sent that the server has not read yet, the end of a request's headers (a blank line): a
// whole request waiting for a server too busy to read it. It reads nothing away.
func headersWaiting(c net.Conn) bool {
	if lc, ok := c.(*limitedConn); ok {
		c = lc.Conn
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	var buf [peekSize]byte
	n := 0
	_ = raw.Control(func(fd uintptr) {
		n, _, _ = unix.Recvfrom(int(fd), buf[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
	})
	return n > 0 && bytes.Contains(buf[:n], []byte("\r\n\r\n"))
}
