package tlsconf

import "net"

// netPipe is a connected TCP pair on loopback: net.Pipe is unbuffered,
// and a TLS alert written while the peer does not read would block.
func netPipe() (client, server net.Conn) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer ln.Close()
	ch := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		ch <- c
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		panic(err)
	}
	return client, <-ch
}
