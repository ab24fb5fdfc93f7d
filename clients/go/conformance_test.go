package dueq

import (
	"bufio"
	"context"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Builds cmd/dueq-conformance and runs testdata/scenarios.json against one node,
// answering its ACTION lines as run.py would.
func TestConformanceDriver(t *testing.T) {
	addr := startSingle(t)
	bin := filepath.Join(t.TempDir(), "dueq-conformance")
	if out, err := exec.Command("go", "build", "-o", bin, "./cmd/dueq-conformance").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(bg(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "testdata/scenarios.json")
	cmd.Env = append(cmd.Environ(), "DUEQ_SEEDS="+addr)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var lines []string
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "ACTION ") {
			io.WriteString(stdin, "DONE\n")
			continue
		}
		lines = append(lines, line)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("driver: %v (%v)", err, lines)
	}
	want := []string{"PASS put_take_ack", "PASS errors_and_outcomes", "FAIL meant_to_fail"}
	if len(lines) != len(want) {
		t.Fatalf("got %q", lines)
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Fatalf("line %d: %q, want %q", i, lines[i], w)
		}
	}
	t.Logf("%q", lines)
}
