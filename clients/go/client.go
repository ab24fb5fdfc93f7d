// Package dueq is the Go client of dueq, a replicated store of tasks that come due.
// It speaks the protocol of docs/protocol.md: one connection at a time to the current
// node, pipelined requests, redirects to the leader, sessions resumed on reconnect.
package dueq

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"sync"
	"time"
)

// Options tune a Client; zero values take the defaults noted.
type Options struct {
	Token          string        // hello token, for nodes with an auth_token
	TLS            *tls.Config   // nil: plain TCP
	CallTimeout    time.Duration // per call when ctx has no deadline (default 10 s)
	ConnectTimeout time.Duration // per dial and hello (default 5 s)
	IdlePing       time.Duration // ping a quiet connection this often (default 30 s; < 0: never)
	MaxFrameBytes  int           // largest frame sent or accepted (default 64 MiB)
}

// Client is safe for concurrent use; calls from many goroutines are pipelined on one
// connection.
type Client struct {
	opts  Options
	seeds []string

	dialMu sync.Mutex // one dial at a time; the others wait for its connection

	mu      sync.Mutex
	cur     *conn
	target  string // the leader named by the last redirect: dialled first
	next    int    // the seed to dial first when there is no target
	session uint64 // what hello last returned, offered to every node (§5)
	closed  bool
	stop    chan struct{}
}

// Ops that are harmless to repeat: resent on their own after a broken connection (§6).
var safeOps = map[string]bool{"ping": true, "hello": true, "get": true, "stats": true,
	"status": true, "declare": true, "list": true, "members": true, "shards": true}

const maxRedirects = 5

// Dial makes a client for the cluster that seeds (host:port client addresses) belong
// to, and connects to the first seed that answers.
func Dial(ctx context.Context, seeds []string, opts Options) (*Client, error) {
	if len(seeds) == 0 {
		return nil, errors.New("dueq: no seed addresses")
	}
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = 10 * time.Second
	}
	if opts.ConnectTimeout <= 0 {
		opts.ConnectTimeout = 5 * time.Second
	}
	if opts.IdlePing == 0 {
		opts.IdlePing = 30 * time.Second
	}
	if opts.MaxFrameBytes <= 0 {
		opts.MaxFrameBytes = 64 << 20
	}
	c := &Client{opts: opts, seeds: append([]string(nil), seeds...),
		stop: make(chan struct{})}
	if _, err := c.getConn(ctx); err != nil {
		return nil, err
	}
	if opts.IdlePing > 0 {
		go c.pingLoop()
	}
	return c, nil
}

// Close closes the connection; calls in flight fail (with an unknown outcome if written).
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	cur := c.cur
	c.cur = nil
	close(c.stop)
	c.mu.Unlock()
	if cur != nil {
		cur.fail(errors.New("client closed"))
	}
	return nil
}

// Addr is the node of the current connection ("" when not connected).
func (c *Client) Addr() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cur == nil {
		return ""
	}
	return c.cur.addr
}

// getConn returns the current connection, dialling the target (the known leader) and
// then the seeds in turn when there is none.
func (c *Client) getConn(ctx context.Context) (*conn, error) {
	if cn := c.current(); cn != nil {
		return cn, nil
	}
	c.dialMu.Lock()
	defer c.dialMu.Unlock()
	if cn := c.current(); cn != nil { // dialled meanwhile by another caller
		return cn, nil
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, notApplied("unavailable", nil, "client closed")
	}
	var addrs []string
	if c.target != "" {
		addrs = append(addrs, c.target)
	}
	for i := range c.seeds {
		addrs = append(addrs, c.seeds[(c.next+i)%len(c.seeds)])
	}
	start, target := c.next, c.target
	c.mu.Unlock()

	var last error
	for i, addr := range addrs {
		if ctx.Err() != nil {
			break
		}
		cn, err := c.dial(ctx, addr)
		if err != nil {
			last = err
			if IsCode(err, "unauthorized") {
				return nil, err // every node has the same token: no use going on
			}
			continue
		}
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			cn.fail(errors.New("client closed"))
			return nil, notApplied("unavailable", nil, "client closed")
		}
		c.cur = cn
		if target == "" || i > 0 {
			c.target = ""
			seedIdx := i
			if target != "" {
				seedIdx--
			}
			c.next = (start + seedIdx) % len(c.seeds)
		}
		c.mu.Unlock()
		return cn, nil
	}
	return nil, notApplied("unavailable", last, "no node could be reached (last: %v)", last)
}

func (c *Client) current() *conn {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cur != nil && c.cur.usable() {
		return c.cur
	}
	c.cur = nil
	return nil
}

// dial connects to addr and says hello, offering the session this client last had, on
// whichever node addr is: a new leader knows the sessions that hold leases (§5). Hello is
// sent on every new connection: it authenticates, and it is how a session id is learnt.
func (c *Client) dial(ctx context.Context, addr string) (*conn, error) {
	cn, leader, err := c.dialOne(ctx, addr)
	// The leader keeps sessions (§5): a session resumed on a follower would run out there
	// while its tasks wait on the leader. So on to the leader the hello named, once.
	if err == nil && leader != "" && leader != addr {
		if lc, _, lerr := c.dialOne(ctx, leader); lerr == nil {
			cn.retire()
			return lc, nil
		}
	}
	return cn, err
}

// dialOne connects to addr and says hello; it returns the leader the hello named when it
// resumed this client's session there ("" otherwise).
func (c *Client) dialOne(ctx context.Context, addr string) (*conn, string, error) {
	dctx, cancel := context.WithTimeout(ctx, c.opts.ConnectTimeout)
	defer cancel()
	var d net.Dialer
	nc, err := d.DialContext(dctx, "tcp", addr)
	if err != nil {
		return nil, "", notApplied("unavailable", err, "dial %s: %v", addr, err)
	}
	if c.opts.TLS != nil {
		cfg := c.opts.TLS.Clone()
		if cfg.ServerName == "" {
			if host, _, err := net.SplitHostPort(addr); err == nil {
				cfg.ServerName = host
			}
		}
		tc := tls.Client(nc, cfg)
		if err := tc.HandshakeContext(dctx); err != nil {
			nc.Close()
			return nil, "", notApplied("unavailable", err, "tls with %s: %v", addr, err)
		}
		nc = tc
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	cn := newConn(addr, nc, c.opts.MaxFrameBytes)
	c.mu.Lock()
	old := c.session
	c.mu.Unlock()
	fields := map[string]any{}
	if c.opts.Token != "" {
		fields["token"] = c.opts.Token
	}
	if old != 0 {
		fields["session"] = old
	}
	resp, _, _, rerr := cn.roundTrip(dctx, "hello", fields, c.opts.MaxFrameBytes)
	if rerr == nil && !resp.OK {
		rerr = resp.Err
	}
	if rerr != nil {
		cn.fail(rerr)
		return nil, "", rerr
	}
	var sess uint64
	var leader string
	_ = resp.result("session", &sess)
	_ = resp.result("leader", &leader)
	cn.session = sess
	c.mu.Lock()
	c.session = sess
	c.mu.Unlock()
	if old == 0 || sess != old {
		leader = ""
	}
	return cn, leader, nil
}

// drop forgets cn as the current connection. moveOn makes the next dial start at the
// next seed (after a redirect without a leader, or a silent node); otherwise the same
// node is tried first, where the session can be resumed.
func (c *Client) drop(cn *conn, moveOn bool) {
	c.mu.Lock()
	if c.cur == cn {
		c.cur = nil
	}
	if moveOn {
		if c.target == "" || c.target == cn.addr {
			if c.target == "" {
				c.next = (c.next + 1) % len(c.seeds)
			}
			c.target = ""
		}
	}
	c.mu.Unlock()
	cn.retire()
}

// redirect makes leader the node to talk to; the old connection closes once its
// other requests are answered.
func (c *Client) redirect(cn *conn, leader string) {
	c.mu.Lock()
	c.target = leader
	if c.cur == cn {
		c.cur = nil
	}
	c.mu.Unlock()
	cn.retire()
}

// do sends one request, following §6: redirects to the leader a refusal names (at most
// 5), back-off (50 ms doubling to 1 s) and the next seed when no leader is named, until
// the deadline, and a resend after a broken connection only for safe ops or requests that
// were never written. extra lengthens the default deadline (a blocking take's wait).
func (c *Client) do(ctx context.Context, op string, fields map[string]any, extra time.Duration) (*response, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.opts.CallTimeout+extra)
		defer cancel()
	}
	backoff := 50 * time.Millisecond
	wait := func() bool {
		t := time.NewTimer(backoff)
		defer t.Stop()
		if backoff *= 2; backoff > time.Second {
			backoff = time.Second
		}
		select {
		case <-t.C:
			return true
		case <-ctx.Done():
			return false
		}
	}
	redirects := 0
	var last error
	for {
		if ctx.Err() != nil {
			if last != nil {
				return nil, last
			}
			return nil, notApplied("timeout", ctx.Err(), "deadline passed before %s was sent", op)
		}
		cn, err := c.getConn(ctx)
		if err != nil {
			if IsCode(err, "unauthorized") || c.isClosed() {
				return nil, err
			}
			last = err
			wait()
			continue
		}
		resp, _, silent, rerr := cn.roundTrip(ctx, op, fields, c.opts.MaxFrameBytes)
		if rerr != nil {
			if cn.isClosed() {
				c.drop(cn, silent)
			}
			if rerr.Outcome == Unknown && !safeOps[op] {
				return nil, rerr
			}
			if rerr.Code == "too_large" || rerr.Code == "bad_request" {
				return nil, rerr
			}
			last = rerr
			wait()
			continue
		}
		if resp.OK {
			return resp, nil
		}
		e := resp.Err
		switch e.Code {
		case "not_leader", "wrong_shard", "no_quorum", "unavailable":
			// A named leader is followed at most maxRedirects times (two nodes could name
			// each other); without one (an election, a cut-off node), the next seed is
			// tried, backing off, until the deadline.
			last = e
			if e.Leader != "" && e.Leader != cn.addr {
				if redirects++; redirects > maxRedirects {
					return nil, e
				}
				c.redirect(cn, e.Leader)
				continue
			}
			if e.Code == "no_quorum" && len(c.seeds) < 2 {
				return nil, e // a cut-off node, and no other seed to try
			}
			c.drop(cn, true)
			wait()
		case "moving":
			// The key's bucket is moving between shards (not applied): the same node
			// again, backing off, until the deadline.
			last = e
			wait()
		default:
			return nil, e
		}
	}
}

func (c *Client) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// pingLoop keeps a quiet connection open: the server closes one with nothing in flight
// that sent nothing for its idle_timeout_ms.
func (c *Client) pingLoop() {
	t := time.NewTicker(c.opts.IdlePing / 4)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
		}
		cn := c.current()
		if cn == nil || time.Since(time.Unix(0, cn.lastWrite.Load())) < c.opts.IdlePing {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), c.opts.CallTimeout)
		_, _, silent, err := cn.roundTrip(ctx, "ping", nil, c.opts.MaxFrameBytes)
		cancel()
		if err != nil && cn.isClosed() {
			c.drop(cn, silent)
		}
	}
}
