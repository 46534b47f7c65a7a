package bounded

import (
	"io"
	"net"
	"testing"
	"time"
)

// headersWaiting sees a whole request's headers the server has not read, and reads nothing
// away; partial headers, or none, are not a request waiting.
func TestHeadersWaiting(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	server, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	conn := &limitedConn{Conn: server, release: func() {}}
	eventually := func(want bool, what string) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for headersWaiting(conn) != want {
			if time.Now().After(deadline) {
				t.Fatalf("%s: headersWaiting is %v", what, !want)
			}
			time.Sleep(time.Millisecond)
		}
	}
	eventually(false, "nothing sent")
	io.WriteString(client, "GET / HTTP/1.1\r\nHost: x\r\n")
	time.Sleep(50 * time.Millisecond) // the bytes are in; they are not the end of the headers
	eventually(false, "partial headers")
	io.WriteString(client, "\r\n")
	eventually(true, "whole headers")
	b := make([]byte, 64)
	if n, _ := server.Read(b); string(b[:n]) != "GET / HTTP/1.1\r\nHost: x\r\n\r\n" {
		t.Errorf("read %q after the peeks, want the whole request", b[:n])
	}
	eventually(false, "read")
}
