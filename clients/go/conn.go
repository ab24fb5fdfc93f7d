package dueq

import (
	"bufio"
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// conn is one TCP connection to one node: requests are written whole under wmu (so
// goroutines can pipeline), and a reader goroutine hands each answer to the caller
// waiting on its id, in whatever order the server answers.
type conn struct {
	addr     string
	nc       net.Conn
	maxFrame int

	wmu sync.Mutex // one frame at a time on the socket

	mu       sync.Mutex
	pending  map[uint64]chan *response
	nextID   uint64
	closed   bool
	closeErr error
	retiring bool   // no new requests; close once the in-flight ones are answered
	answered int    // answers received, to tell "refused before reading anything"
	refused  *Error // an id-0 error frame (over a connection cap, a frame too large, ...)
	session  uint64 // what hello returned on this connection

	lastRead  atomic.Int64 // unix nanos of the last frame read: tells silent from slow
	lastWrite atomic.Int64 // for idle pings
	done      chan struct{}
}

func newConn(addr string, nc net.Conn, maxFrame int) *conn {
	c := &conn{addr: addr, nc: nc, maxFrame: maxFrame, pending: map[uint64]chan *response{},
		done: make(chan struct{})}
	now := time.Now().UnixNano()
	c.lastRead.Store(now)
	c.lastWrite.Store(now)
	go c.readLoop()
	return c
}

func (c *conn) readLoop() {
	br := bufio.NewReaderSize(c.nc, 64<<10)
	for {
		body, err := readFrame(br, c.maxFrame)
		if err != nil {
			c.fail(err)
			return
		}
		c.lastRead.Store(time.Now().UnixNano())
		resp, err := decodeResponse(body)
		if err != nil { // cannot tell which request it answered: the connection is useless
			c.fail(err)
			return
		}
		c.mu.Lock()
		if resp.ID == 0 { // not attributable; the server usually closes right after
			if resp.Err != nil && c.refused == nil {
				c.refused = resp.Err
				if resp.Err.Code != "unavailable" || c.answered > 0 {
					c.refused.Outcome = Unknown
				}
			}
			c.mu.Unlock()
			continue
		}
		ch := c.pending[resp.ID]
		delete(c.pending, resp.ID)
		c.answered++
		drained := c.retiring && len(c.pending) == 0
		c.mu.Unlock()
		if ch != nil {
			ch <- resp
		}
		if drained {
			c.fail(errors.New("retired"))
			return
		}
	}
}

// fail closes the connection once and wakes every waiting caller (a closed channel).
func (c *conn) fail(err error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed, c.closeErr = true, err
	pend := c.pending
	c.pending = nil
	c.mu.Unlock()
	c.nc.Close()
	for _, ch := range pend {
		close(ch)
	}
	close(c.done)
}

// retire stops new requests and closes the connection once nothing is in flight: a
// redirect must not cut off the answers still due on the old connection (§6).
func (c *conn) retire() {
	c.mu.Lock()
	c.retiring = true
	idle := len(c.pending) == 0
	c.mu.Unlock()
	if idle {
		c.fail(errors.New("retired"))
	}
}

func (c *conn) usable() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.closed && !c.retiring
}

func (c *conn) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// brokenError builds the error for requests whose connection closed under them.
func (c *conn) brokenError(written bool) *Error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.refused != nil && c.refused.Outcome == NotApplied {
		e := *c.refused // e.g. over the server's connection cap: nothing was read
		return &e
	}
	msg := "connection to " + c.addr + " broke"
	if c.refused != nil {
		msg += " (" + c.refused.Code + ": " + c.refused.Message + ")"
	}
	if !written {
		return notApplied("unavailable", c.closeErr, "%s before the request was sent", msg)
	}
	return unknown("unavailable", c.closeErr, "%s after the request was written; outcome unknown", msg)
}

// roundTrip sends one request and waits for its answer. written says whether any of
// its bytes may have reached the server (then a failure leaves the outcome unknown).
// silent is true when the deadline passed without a single frame read since the
// request was sent: the connection is then closed, as §6 asks.
func (c *conn) roundTrip(ctx context.Context, op string, fields map[string]any, maxFrame int) (resp *response, written, silent bool, err *Error) {
	c.mu.Lock()
	if c.closed || c.retiring {
		c.mu.Unlock()
		return nil, false, false, notApplied("unavailable", nil, "connection to %s closed", c.addr)
	}
	c.nextID++
	id := c.nextID
	ch := make(chan *response, 1)
	c.pending[id] = ch
	c.mu.Unlock()
	forget := func() {
		c.mu.Lock()
		if c.pending != nil {
			delete(c.pending, id)
		}
		c.mu.Unlock()
	}

	frame, encErr := encodeRequest(op, id, fields)
	if encErr != nil {
		forget()
		return nil, false, false, notApplied("bad_request", encErr, "cannot encode %s: %v", op, encErr)
	}
	if len(frame)-4 > maxFrame {
		forget()
		return nil, false, false, notApplied("too_large", nil, "%s request of %d bytes over the frame limit %d", op, len(frame)-4, maxFrame)
	}
	c.wmu.Lock()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.nc.SetWriteDeadline(dl)
	} else {
		_ = c.nc.SetWriteDeadline(time.Time{})
	}
	n, werr := c.nc.Write(frame)
	c.wmu.Unlock()
	sent := time.Now().UnixNano()
	c.lastWrite.Store(sent)
	if werr != nil {
		// A partial frame desynchronises the stream: nothing more can go on it.
		c.fail(werr)
		forget()
		return nil, n > 0, false, c.brokenError(n > 0)
	}

	select {
	case r, ok := <-ch:
		if !ok {
			return nil, true, false, c.brokenError(true)
		}
		return r, true, false, nil
	case <-ctx.Done():
		forget()
		// Only a deadline says the node is silent; a caller's cancel says nothing of it.
		if errors.Is(ctx.Err(), context.DeadlineExceeded) && c.lastRead.Load() < sent {
			c.fail(errors.New("silent past a request's deadline"))
			silent = true
		}
		return nil, true, silent, unknown("timeout", ctx.Err(), "no answer to %s from %s before the deadline; outcome unknown", op, c.addr)
	}
}
