package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// fanOutFloor measures what any Go server pays to send one event to n clients on their own loopback
// connections, with nothing of the service's: a bare TCP server in this process, one goroutine per
// connection that waits for the event (a channel closed, as the service's streams wait for a change)
// and writes it in one write, and n clients that read as the benchmark's followers do. It sends rounds
// events, spaced apart, each of the size of a real MODIFIED event (frame), and returns the times from
// each event to its read at every client.
func fanOutFloor(n, rounds int, frame []byte) ([]time.Duration, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	defer ln.Close()
	var mu sync.Mutex
	next := make(chan struct{})
	current := func() chan struct{} {
		mu.Lock()
		defer mu.Unlock()
		return next
	}
	var sentAt atomic.Int64
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	accepted := make(chan error, 1)
	go func() {
		for range n {
			conn, err := ln.Accept()
			if err != nil {
				accepted <- err
				return
			}
			mu.Lock()
			conns = append(conns, conn)
			mu.Unlock()
			go func() {
				for {
					<-current()
					if _, err := conn.Write(frame); err != nil {
						return
					}
				}
			}()
		}
		accepted <- nil
	}()

	var lmu sync.Mutex
	var lat []time.Duration
	clients := make([]net.Conn, 0, n)
	defer func() {
		for _, c := range clients {
			_ = c.Close()
		}
	}()
	for range n {
		conn, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			return nil, err
		}
		clients = append(clients, conn)
		go func() {
			lines := bufio.NewReaderSize(conn, 64<<10)
			for {
				line, err := lines.ReadSlice('\n')
				if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
					return
				}
				if bytes.HasPrefix(line, []byte("data: ")) {
					d := time.Duration(time.Now().UnixNano() - sentAt.Load())
					lmu.Lock()
					lat = append(lat, d)
					lmu.Unlock()
				}
			}
		}()
	}
	if err := <-accepted; err != nil {
		return nil, err
	}
	time.Sleep(time.Second) // every writer waiting
	for range rounds {
		mu.Lock()
		fire := next
		next = make(chan struct{})
		mu.Unlock()
		sentAt.Store(time.Now().UnixNano())
		close(fire)
		time.Sleep(300 * time.Millisecond)
	}
	time.Sleep(time.Second)
	lmu.Lock()
	defer lmu.Unlock()
	if len(lat) < n*rounds {
		return nil, fmt.Errorf("the floor's clients read %d of %d events", len(lat), n*rounds)
	}
	slices.Sort(lat)
	return slices.Clone(lat), nil
}
