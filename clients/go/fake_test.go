package dueq

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

// fake is a scripted server: handle gets each request (with the connection's number)
// and returns a result map to answer, "close" to drop the connection, or "silent".
type fake struct {
	l      net.Listener
	mu     sync.Mutex
	conns  int
	seen   []map[string]any
	handle func(conn int, req map[string]any) any
}

func newFake(t *testing.T, handle func(conn int, req map[string]any) any) *fake {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fake{l: l, handle: handle}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			nc, err := l.Accept()
			if err != nil {
				return
			}
			f.mu.Lock()
			f.conns++
			n := f.conns
			f.mu.Unlock()
			go f.serve(n, nc)
		}
	}()
	return f
}

func (f *fake) addr() string { return f.l.Addr().String() }

func (f *fake) requests() []map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]map[string]any(nil), f.seen...)
}

func (f *fake) serve(n int, nc net.Conn) {
	defer nc.Close()
	br := bufio.NewReader(nc)
	for {
		body, err := readFrame(br, 1<<20)
		if err != nil {
			return
		}
		var req map[string]any
		if msgpack.Unmarshal(body, &req) != nil {
			return
		}
		f.mu.Lock()
		f.seen = append(f.seen, req)
		f.mu.Unlock()
		switch r := f.handle(n, req).(type) {
		case string:
			if r == "close" {
				return
			}
			continue // silent
		case map[string]any:
			r["id"] = req["id"]
			if _, ok := r["ok"]; !ok {
				r["ok"] = true
			}
			b, _ := msgpack.Marshal(r)
			hdr := make([]byte, 4)
			binary.BigEndian.PutUint32(hdr, uint32(len(b)))
			nc.Write(append(hdr, b...))
		}
	}
}

func notLeader(leader string) map[string]any {
	e := map[string]any{"code": "not_leader", "message": "follower"}
	if leader != "" {
		e["leader"] = leader
	}
	return map[string]any{"ok": false, "error": e}
}

func quick(t *testing.T, seeds ...string) *Client {
	cl, err := Dial(context.Background(), seeds, Options{CallTimeout: 400 * time.Millisecond, IdlePing: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

// A put whose connection breaks after it was written is unknown and not resent; a get
// is resent on its own, and the new connection resumes the session on the same node.
func TestBrokenConnection(t *testing.T) {
	var mu sync.Mutex
	gets := 0
	f := newFake(t, func(conn int, req map[string]any) any {
		mu.Lock()
		defer mu.Unlock()
		switch req["op"] {
		case "hello":
			return map[string]any{"session": 40 + conn}
		case "get":
			if gets++; gets == 1 {
				return "close"
			}
			return map[string]any{"task": map[string]any{"key": "k", "payload": 1, "status": "ready"}}
		}
		return "close"
	})
	cl := quick(t, f.addr())
	_, err := cl.Put(context.Background(), "q", "k", 1, PutOptions{})
	if !IsUnknown(err) || !IsCode(err, "unavailable") {
		t.Fatalf("put: %v", err)
	}
	task, err := cl.Get(context.Background(), "q", "k", "")
	if err != nil || task.Status != "ready" {
		t.Fatalf("get: %v %+v", err, task)
	}
	puts, resumed := 0, false
	for _, r := range f.requests() {
		if r["op"] == "put" {
			puts++
		}
		if r["op"] == "hello" && r["session"] != nil {
			resumed = true
		}
	}
	if puts != 1 || !resumed {
		t.Fatalf("puts %d, session resumed %v: %v", puts, resumed, f.requests())
	}
}

// A node silent past the deadline is dropped; the next call goes to the next seed.
func TestSilentNode(t *testing.T) {
	a := newFake(t, func(_ int, req map[string]any) any {
		if req["op"] == "hello" {
			return map[string]any{"session": 1}
		}
		return "silent"
	})
	b := newFake(t, func(_ int, req map[string]any) any { return map[string]any{"session": 2} })
	cl := quick(t, a.addr(), b.addr())
	_, err := cl.Put(context.Background(), "q", "k", 1, PutOptions{})
	if !IsUnknown(err) || !IsCode(err, "timeout") {
		t.Fatalf("put: %v", err)
	}
	if err := cl.Ping(context.Background()); err != nil || cl.Addr() != b.addr() {
		t.Fatalf("ping: %v via %s", err, cl.Addr())
	}
	// Sessions are the cluster's, not a node's (§5): node b is asked to resume a's.
	offered := false
	for _, r := range b.requests() {
		if r["op"] == "hello" && r["session"] != nil {
			offered = fmt.Sprint(r["session"]) == "1"
		}
	}
	if !offered {
		t.Fatalf("node b was not offered the session node a gave: %v", b.requests())
	}
}

// not_leader with a leader moves to it; without one, the client backs off and tries
// the next seed.
func TestRedirects(t *testing.T) {
	leader := newFake(t, func(_ int, req map[string]any) any { return map[string]any{"version": 3} })
	follower := newFake(t, func(_ int, req map[string]any) any {
		if req["op"] == "hello" {
			return map[string]any{}
		}
		return notLeader(leader.addr())
	})
	electing := newFake(t, func(_ int, req map[string]any) any {
		if req["op"] == "hello" {
			return map[string]any{}
		}
		return notLeader("")
	})
	cl := quick(t, electing.addr(), follower.addr())
	v, err := cl.Put(context.Background(), "q", "k", "x", PutOptions{Mode: "insert"})
	if err != nil || v != 3 || cl.Addr() != leader.addr() {
		t.Fatalf("put: %v %d via %s", err, v, cl.Addr())
	}
	// A node cut off from the others (no_quorum) that knows the leader sends the client
	// there; one that does not, to the next seed.
	cutOff := func(leader string) *fake {
		return newFake(t, func(_ int, req map[string]any) any {
			if req["op"] == "hello" {
				return map[string]any{}
			}
			e := map[string]any{"code": "no_quorum", "message": "cut off"}
			if leader != "" {
				e["leader"] = leader
			}
			return map[string]any{"ok": false, "error": e}
		})
	}
	cl = quick(t, cutOff(leader.addr()).addr())
	if v, err = cl.Put(context.Background(), "q", "k", "x", PutOptions{}); err != nil || cl.Addr() != leader.addr() {
		t.Fatalf("put after no_quorum naming the leader: %v %d via %s", err, v, cl.Addr())
	}
	cl = quick(t, cutOff("").addr(), leader.addr())
	if v, err = cl.Put(context.Background(), "q", "k", "x", PutOptions{}); err != nil || cl.Addr() != leader.addr() {
		t.Fatalf("put after no_quorum: %v %d via %s", err, v, cl.Addr())
	}
	// Two nodes that name each other as leader: at most 5 redirects, then the error.
	var p1, p2 *fake
	pingPong := func(other **fake) func(int, map[string]any) any {
		return func(_ int, req map[string]any) any {
			if req["op"] == "hello" {
				return map[string]any{}
			}
			return notLeader((*other).addr())
		}
	}
	p1, p2 = newFake(t, pingPong(&p2)), newFake(t, pingPong(&p1))
	_, err = quick(t, p1.addr()).Put(context.Background(), "q", "k", "x", PutOptions{})
	if !IsCode(err, "not_leader") || !IsNotApplied(err) {
		t.Fatalf("redirect loop: %v", err)
	}
	if n := len(p1.requests()) + len(p2.requests()); n > 2*(maxRedirects+1)+1 {
		t.Fatalf("%d requests for one put", n)
	}
}

// moving (a bucket between shards) is retried on the same node until it is served, and is
// the answer, not applied, when the deadline comes first.
func TestMovingIsRetriedOnTheSameNode(t *testing.T) {
	var refusals atomic.Int32
	refusals.Store(3)
	node := newFake(t, func(_ int, req map[string]any) any {
		if req["op"] == "hello" {
			return map[string]any{}
		}
		if refusals.Add(-1) >= 0 {
			return map[string]any{"ok": false, "error": map[string]any{"code": "moving", "message": "bucket 3 is sending"}}
		}
		return map[string]any{"version": 7}
	})
	other := newFake(t, func(_ int, req map[string]any) any { return notLeader("") })
	cl := quick(t, node.addr(), other.addr())
	if v, err := cl.Put(context.Background(), "q", "k", "x", PutOptions{}); err != nil || v != 7 {
		t.Fatalf("put through moving: %v %d", err, v)
	}
	if n := len(other.requests()); n != 0 {
		t.Fatalf("%d requests went to another seed", n)
	}
	refusals.Store(1000)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	_, err := cl.Put(ctx, "q", "k", "x", PutOptions{})
	if !IsCode(err, "moving") || !IsNotApplied(err) {
		t.Fatalf("still moving at the deadline: %v", err)
	}
}

// A quiet connection gets pings, so the server's idle timeout never closes it.
func TestIdlePing(t *testing.T) {
	f := newFake(t, func(_ int, req map[string]any) any { return map[string]any{} })
	cl, err := Dial(bg(), []string{f.addr()}, Options{IdlePing: 80 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	time.Sleep(400 * time.Millisecond)
	pings := 0
	for _, r := range f.requests() {
		if r["op"] == "ping" {
			pings++
		}
	}
	if pings < 2 || pings > 6 {
		t.Fatalf("%d pings in 400 ms at an 80 ms idle interval", pings)
	}
}
