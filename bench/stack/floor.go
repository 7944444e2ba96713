package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// fanOutFloor measures what any Go server pays to send one event to n clients on their own loopback
// connections, with nothing of the service's: a bare TCP server in a process of its own (this program
// again, with -floor-serve), one goroutine per connection that waits for the event (a channel closed,
// as the service's streams wait for a change) and writes it in one write, and n clients here that read
// as the benchmark's followers do. It sends rounds events, spaced apart, each of the size of a real
// MODIFIED event (frame), and returns the times from each event to its read at every client.
func fanOutFloor(n, rounds int, frame []byte) ([]time.Duration, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, "-floor-serve", strconv.Itoa(n), "-floor-frame", strconv.Quote(string(frame)))
	cmd.Stderr = os.Stderr
	trigger, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	defer func() {
		_ = trigger.Close() // the server ends when its input does
		_ = cmd.Wait()
	}()
	addr, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		return nil, fmt.Errorf("the floor's server: %w", err)
	}
	addr = strings.TrimSpace(addr)

	var sentAt atomic.Int64
	var mu sync.Mutex
	var lat []time.Duration
	clients := make([]net.Conn, 0, n)
	defer func() {
		for _, c := range clients {
			_ = c.Close()
		}
	}()
	for range n {
		conn, err := net.Dial("tcp", addr)
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
					mu.Lock()
					lat = append(lat, d)
					mu.Unlock()
				}
			}
		}()
	}
	time.Sleep(2 * time.Second) // every connection accepted, every writer waiting
	for range rounds {
		sentAt.Store(time.Now().UnixNano())
		if _, err := trigger.Write([]byte{'\n'}); err != nil {
			return nil, err
		}
		time.Sleep(300 * time.Millisecond) // as the changes of the service's figure
	}
	time.Sleep(time.Second)
	mu.Lock()
	defer mu.Unlock()
	if len(lat) < n*rounds {
		return nil, fmt.Errorf("the floor's clients read %d of %d events", len(lat), n*rounds)
	}
	slices.Sort(lat)
	return slices.Clone(lat), nil
}

// serveFloor is the floor's server (-floor-serve): it prints its address, accepts n connections, and at
// each line of its input sends frame to every one, each from the goroutine of its connection, until
// its input ends.
func serveFloor(n int, frame []byte) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer ln.Close()
	fmt.Println(ln.Addr().String())
	// Each event is a generation, and a channel closed at it; a writer that falls behind sends every one
	// it missed at once.
	var mu sync.Mutex
	next, gen := make(chan struct{}), 0
	go func() {
		for range n {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				sent := 0
				for {
					mu.Lock()
					now, wait := gen, next
					mu.Unlock()
					if now == sent {
						<-wait
						continue
					}
					out := frame
					if now-sent > 1 {
						out = bytes.Repeat(frame, now-sent)
					}
					if _, err := conn.Write(out); err != nil {
						return
					}
					sent = now
				}
			}()
		}
	}()
	in := bufio.NewReader(os.Stdin)
	for {
		if _, err := in.ReadString('\n'); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		mu.Lock()
		gen++
		close(next)
		next = make(chan struct{})
		mu.Unlock()
	}
}
