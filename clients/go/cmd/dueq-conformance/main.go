// Command dueq-conformance runs clients/conformance scenarios with the Go client:
//
//	DUEQ_SEEDS=host:port,... dueq-conformance scenarios.json
//
// It prints PASS/FAIL/SKIP per scenario, and ACTION lines that the runner answers on
// stdin (clients/conformance/README.md).
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"dueq.dev/dueq"
)

type scenario struct {
	Name  string            `json:"name"`
	Steps []json.RawMessage `json:"steps"`
}

type step struct {
	Op      string            `json:"op"`
	Action  string            `json:"action"`
	Fields  map[string]any    `json:"fields"`
	Expect  map[string]any    `json:"expect"`
	Save    map[string]string `json:"save"`
	Repeat  *int              `json:"repeat"`
	SleepMS *int64            `json:"sleep_ms"`
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: DUEQ_SEEDS=host:port,... dueq-conformance SCENARIOS.json")
		os.Exit(2)
	}
	scenarios, err := load(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "dueq-conformance:", err)
		os.Exit(2)
	}
	var seeds []string
	for _, s := range strings.Split(os.Getenv("DUEQ_SEEDS"), ",") {
		if s = strings.TrimSpace(s); s != "" {
			seeds = append(seeds, s)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	client, err := dueq.Dial(ctx, seeds, dueq.Options{CallTimeout: 10 * time.Second})
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "dueq-conformance: dial:", err)
		os.Exit(2)
	}
	defer client.Close()
	r := &runner{client: client, in: bufio.NewReader(os.Stdin), out: bufio.NewWriter(os.Stdout)}
	for _, sc := range scenarios {
		r.vars = map[string]any{}
		if why := r.run(sc); why != "" {
			r.say("FAIL %s: %s", sc.Name, why)
		} else {
			r.say("PASS %s", sc.Name)
		}
	}
}

// load accepts the file as a list of scenarios or as {"scenarios": [...]}.
func load(path string) ([]scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var list []scenario
	if bytes.HasPrefix(bytes.TrimSpace(data), []byte("[")) {
		err = json.Unmarshal(data, &list)
	} else {
		var doc struct {
			Scenarios []scenario `json:"scenarios"`
		}
		err = json.Unmarshal(data, &doc)
		list = doc.Scenarios
	}
	return list, err
}

type runner struct {
	client *dueq.Client
	in     *bufio.Reader
	out    *bufio.Writer
	vars   map[string]any
}

func (r *runner) say(format string, args ...any) {
	fmt.Fprintf(r.out, format+"\n", args...)
	r.out.Flush()
}

// run runs a scenario's steps in order; it returns "" or why the scenario failed.
func (r *runner) run(sc scenario) string {
	for n, raw := range sc.Steps {
		var st step
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		if err := dec.Decode(&st); err != nil {
			return fmt.Sprintf("step %d: %v", n, err)
		}
		if why := r.step(st); why != "" {
			return fmt.Sprintf("step %d (%s%s): %s", n, st.Op, st.Action, why)
		}
	}
	return ""
}

func (r *runner) step(st step) string {
	switch {
	case st.Action != "":
		r.say("ACTION %s", st.Action)
		line, err := r.in.ReadString('\n')
		if line = strings.TrimSpace(line); line == "DONE" {
			return ""
		} else if err != nil && line == "" {
			return "no answer to the action on stdin"
		}
		return "action: " + line
	case st.Op == "" && st.SleepMS != nil:
		time.Sleep(time.Duration(*st.SleepMS) * time.Millisecond)
		return ""
	case st.Op == "":
		return "a step with neither op nor action"
	}
	times := 1
	if st.Repeat != nil {
		times = *st.Repeat
	}
	for i := 0; i < times; i++ {
		fields, _ := r.subst(st.Fields, i).(map[string]any)
		if why := r.send(st, fields); why != "" {
			if times > 1 {
				return fmt.Sprintf("repeat %d: %s", i, why)
			}
			return why
		}
	}
	return ""
}

// send makes one request with a 10 s deadline (plus a take's own wait) and judges it.
func (r *runner) send(st step, fields map[string]any) string {
	limit := 10 * time.Second
	if t, ok := fields["timeout_ms"].(int64); ok && st.Op == "take" {
		limit += time.Duration(t) * time.Millisecond
	}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	res, err := r.client.Call(ctx, st.Op, fields)
	cancel()
	exp := st.Expect
	if exp == nil {
		exp = map[string]any{"ok": true}
	}
	if want, ok := exp["outcome"].(string); ok {
		got := "applied"
		if err != nil {
			got = "unknown"
			if dueq.IsNotApplied(err) {
				got = "not_applied"
			}
		}
		if got != want {
			return fmt.Sprintf("outcome %s, want %s (err: %v)", got, want, err)
		}
		return r.save(st, res, err)
	}
	if ok, given := exp["ok"].(bool); given && !ok {
		if err == nil {
			return fmt.Sprintf("ok, want error %v", exp["code"])
		}
		var e *dueq.Error
		code := ""
		if asErr(err, &e) {
			code = e.Code
		}
		switch want := exp["code"].(type) {
		case string:
			if code != want {
				return fmt.Sprintf("error %v, want code %s", err, want)
			}
		case []any:
			for _, w := range want {
				if w == code {
					return ""
				}
			}
			return fmt.Sprintf("error %v, want one of %v", err, want)
		}
		return ""
	}
	if err != nil {
		return fmt.Sprintf("error %v, want ok", err)
	}
	if want, ok := exp["result"]; ok {
		if why := match(want, map[string]any(res), "result"); why != "" {
			return why
		}
	}
	if lens, ok := exp["result_len"].(map[string]any); ok {
		for k, n := range lens {
			arr, _ := res[k].([]any)
			if want := toInt(n); int64(len(arr)) != want {
				return fmt.Sprintf("result %s has %d elements, want %d", k, len(arr), want)
			}
		}
	}
	return r.save(st, res, nil)
}

func (r *runner) save(st step, res map[string]any, err error) string {
	if err != nil || len(st.Save) == 0 {
		return ""
	}
	for name, path := range st.Save {
		var cur any = res
		for _, part := range strings.Split(path, ".") {
			switch c := cur.(type) {
			case map[string]any:
				cur = c[part]
			case []any:
				var i int
				if _, e := fmt.Sscan(part, &i); e != nil || i < 0 || i >= len(c) {
					return fmt.Sprintf("save %s: no %s in the result", name, path)
				}
				cur = c[i]
			default:
				return fmt.Sprintf("save %s: no %s in the result", name, path)
			}
		}
		r.vars[name] = cur
	}
	return ""
}
