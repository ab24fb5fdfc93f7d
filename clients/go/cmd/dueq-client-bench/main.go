// Command dueq-client-bench measures the Go client's throughput against a cluster.
//
//	dueq-client-bench put   --seeds S --count N --inflight K --payload-bytes B --queue Q
//	dueq-client-bench cycle --seeds S --tasks N --concurrency C --seconds T --payload-bytes B --queue Q
//
// put stores N tasks (keys bench-put-<i>, due in an hour) with K requests in flight on
// one client. cycle preloads N tasks due now (keys bench-cycle-<i>), then runs a
// dueq.Worker whose handler acks each at once with time = now, so every task comes due
// again straight away; it counts the acks made in T seconds. Both print one JSON line:
// {"client":"go","mode":...,"ops":N,"seconds":S,"ops_per_s":X}. Flags and defaults follow
// clients/python/bench.py; measure/clients/throughput.py runs both.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"dueq.dev/dueq"
)

func main() {
	if len(os.Args) < 2 || (os.Args[1] != "put" && os.Args[1] != "cycle") {
		fmt.Fprintln(os.Stderr, "usage: dueq-client-bench put|cycle [flags] (-h for the flags)")
		os.Exit(2)
	}
	mode := os.Args[1]
	fs := flag.NewFlagSet(mode, flag.ExitOnError)
	seeds := fs.String("seeds", "127.0.0.1:7700", "the cluster's client addresses, comma-separated")
	cacert := fs.String("cacert", "", "the cluster's CA, when its client port speaks TLS")
	queue := fs.String("queue", "bench-go", "the queue")
	payloadBytes := fs.Int("payload-bytes", 100, "payload size (a string of this many bytes)")
	count := fs.Int("count", 20000, "put: tasks to put")
	inflight := fs.Int("inflight", 64, "put: requests in flight")
	tasks := fs.Int("tasks", 10000, "cycle: tasks to preload")
	concurrency := fs.Int("concurrency", 16, "cycle: worker concurrency")
	seconds := fs.Float64("seconds", 8, "cycle: how long to cycle")
	fs.Parse(os.Args[2:]) //nolint:errcheck // ExitOnError

	ctx := context.Background()
	opts := dueq.Options{}
	if *cacert != "" {
		pem, err := os.ReadFile(*cacert)
		check(err)
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			check(fmt.Errorf("%s: no certificate found", *cacert))
		}
		opts.TLS = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	cl, err := dueq.Dial(ctx, strings.Split(*seeds, ","), opts)
	check(err)
	defer cl.Close()
	_, err = cl.Declare(ctx, *queue, dueq.QueueSettings{})
	check(err)
	payload := strings.Repeat("x", *payloadBytes) // as clients/python/bench.py sends

	var ops int64
	var elapsed time.Duration
	switch mode {
	case "put":
		due := time.Now().Add(time.Hour)
		start := time.Now()
		check(putAll(ctx, cl, *queue, "bench-put-", *count, *inflight, payload, due))
		elapsed, ops = time.Since(start), int64(*count)
	case "cycle":
		check(putAll(ctx, cl, *queue, "bench-cycle-", *tasks, 64, payload, time.Now()))
		w := &dueq.Worker{Client: cl, Queue: *queue, Concurrency: *concurrency,
			TTR: 30 * time.Second, TakeTimeout: 200 * time.Millisecond, Grace: 5 * time.Second,
			Handler: func(context.Context, *dueq.Task) (dueq.Result, error) {
				return dueq.Result{Time: time.Now()}, nil // due again at once
			}}
		wctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		start := time.Now()
		go func() { done <- w.Run(wctx) }()
		time.Sleep(time.Duration(*seconds * float64(time.Second)))
		ops, elapsed = w.Stats().Acked, time.Since(start) // acks that land later are not counted
		cancel()
		check(<-done)
		if st := w.Stats(); st.Failed > 0 || st.Dropped > 0 {
			fmt.Fprintf(os.Stderr, "dueq-client-bench: worker %+v\n", st)
		}
	}
	s := elapsed.Seconds()
	line, _ := json.Marshal(struct {
		Client  string  `json:"client"`
		Mode    string  `json:"mode"`
		Ops     int64   `json:"ops"`
		Seconds float64 `json:"seconds"`
		OpsPerS float64 `json:"ops_per_s"`
	}{"go", mode, ops, math.Round(s*1000) / 1000, math.Round(float64(ops)/s*10) / 10})
	fmt.Println(string(line))
}

// putAll puts n tasks prefix<i> due at `due` with k calls in flight; the first error
// stops it.
func putAll(ctx context.Context, cl *dueq.Client, queue, prefix string, n, k int, payload string, due time.Time) error {
	if k < 1 {
		k = 1
	}
	var next atomic.Int64
	var failed atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan error, k)
	for g := 0; g < k; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !failed.Load() {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				key := fmt.Sprintf("%s%d", prefix, i)
				if _, err := cl.Put(ctx, queue, key, payload, dueq.PutOptions{Time: due}); err != nil {
					failed.Store(true)
					errs <- fmt.Errorf("put %s: %w", key, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs // nil when every put succeeded (the channel is closed)
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "dueq-client-bench:", err)
		os.Exit(1)
	}
}
