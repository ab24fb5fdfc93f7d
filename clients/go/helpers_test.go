package dueq

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// dueqdPath finds the server binary (env DUEQD, else the build tree) or skips the test.
func dueqdPath(t *testing.T) string {
	t.Helper()
	p := os.Getenv("DUEQD")
	if p == "" {
		p = "../../build/cmd/dueqd/dueqd"
	}
	abs, _ := filepath.Abs(p)
	if st, err := os.Stat(abs); err != nil || st.IsDir() {
		t.Skipf("dueqd not found at %s (set DUEQD)", abs)
	}
	return abs
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// node is one dueqd process; it is killed by its PID when the test ends.
type node struct {
	id, addr, conf string
	cmd            *exec.Cmd
}

func (n *node) kill() {
	if n.cmd != nil && n.cmd.Process != nil {
		_ = n.cmd.Process.Kill()
		_ = n.cmd.Wait()
		n.cmd = nil
	}
}

// start runs dueqd with conf and waits (at most 20 s) for "listening on port N".
func startNode(t *testing.T, bin, dir, id, conf string) *node {
	t.Helper()
	confPath := filepath.Join(dir, id+".toml")
	if err := os.WriteFile(confPath, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	n := &node{id: id, conf: confPath}
	n.restart(t, bin, dir)
	return n
}

func (n *node) restart(t *testing.T, bin, dir string) {
	t.Helper()
	logf, err := os.OpenFile(filepath.Join(dir, n.id+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config", n.conf)
	cmd.Stderr = logf
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	n.cmd = cmd
	t.Cleanup(func() { n.kill(); logf.Close() })
	port := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if f := strings.Fields(sc.Text()); len(f) > 0 && strings.Contains(sc.Text(), "listening on port") {
				port <- f[len(f)-1]
			}
		}
	}()
	select {
	case p := <-port:
		n.addr = "127.0.0.1:" + p
	case <-time.After(20 * time.Second):
		n.kill()
		t.Fatalf("dueqd %s did not start; see %s", n.id, filepath.Join(dir, n.id+".log"))
	}
}

const testLimits = `
[storage]
fsync = "never"

[sessions]
grace_ms = 2000
`

// startSingle runs a one-node dueqd; it returns its client address.
func startSingle(t *testing.T) string {
	bin := dueqdPath(t)
	dir := t.TempDir()
	conf := fmt.Sprintf("[node]\nid = \"n1\"\nclient_listen = \"127.0.0.1:0\"\ndata_dir = %q\n%s",
		filepath.Join(dir, "data"), testLimits)
	return startNode(t, bin, dir, "n1", conf).addr
}

// cluster is three dueqd nodes on loopback; nodes[i].addr are the client addresses.
type cluster struct {
	bin, dir string
	nodes    []*node
}

func startCluster(t *testing.T) *cluster {
	bin := dueqdPath(t)
	dir := t.TempDir()
	secret := filepath.Join(dir, "cluster-secret")
	if err := os.WriteFile(secret, []byte("0123456789abcdef0123456789abcdef0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ids := []string{"n1", "n2", "n3"}
	peer, client := map[string]int{}, map[string]int{}
	var members []string
	for _, id := range ids {
		peer[id], client[id] = freePort(t), freePort(t)
		members = append(members, fmt.Sprintf(`  { id = "%s", peer = "127.0.0.1:%d", client = "127.0.0.1:%d" }`,
			id, peer[id], client[id]))
	}
	c := &cluster{bin: bin, dir: dir}
	for _, id := range ids {
		conf := fmt.Sprintf(`[node]
id = "%s"
client_listen = "127.0.0.1:%d"
data_dir = %q

[cluster]
id = "gotest"
secret_file = %q
members = [
%s,
]

[tls]
peers = "off"

[raft]
tick_ms = 10
heartbeat_ms = 50
election_timeout_ms = 500
%s`, id, client[id], filepath.Join(dir, id), secret, strings.Join(members, ",\n"), testLimits)
		c.nodes = append(c.nodes, startNode(t, bin, dir, id, conf))
	}
	c.leader(t)
	return c
}

// leader waits (at most 15 s) until some node reports itself leader; its index.
func (c *cluster) leader(t *testing.T) int {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		for i, n := range c.nodes {
			if n.cmd == nil {
				continue
			}
			cl, err := Dial(context.Background(), []string{n.addr}, Options{CallTimeout: time.Second, IdlePing: -1})
			if err != nil {
				continue
			}
			st, err := cl.Status(context.Background())
			cl.Close()
			if err == nil && st["role"] == "leader" {
				return i
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatal("no leader within 15 s")
	return -1
}

func (c *cluster) seeds() []string {
	var s []string
	for _, n := range c.nodes {
		s = append(s, n.addr)
	}
	return s
}

func dial(t *testing.T, seeds []string) *Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, err := Dial(ctx, seeds, Options{CallTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}
