package dueq

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"
)

func putN(t *testing.T, cl *Client, queue string, n int) {
	t.Helper()
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			if _, err := cl.Put(bg(), queue, fmt.Sprintf("t%03d", i), i, PutOptions{}); err != nil {
				t.Error(err)
			}
		}(i)
	}
	wg.Wait()
}

// runUntil runs w until its queue's stats satisfy done (or fails the test after limit),
// then cancels it and waits for Run to return.
func runUntil(t *testing.T, w *Worker, done func(*QueueStats) bool, limit time.Duration) {
	t.Helper()
	ctx, cancel := context.WithCancel(bg())
	errc := make(chan error, 1)
	go func() { errc <- w.Run(ctx) }()
	deadline := time.Now().Add(limit)
	for {
		st, err := w.Client.Stats(bg(), w.Queue, "")
		if err == nil && done(st) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not finished: %+v %v; worker %+v", st, err, w.Stats())
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

// 500 tasks: every 7th fails once (released, then retaken), every 50th runs past its
// ttr (kept alive by touches), every 100th is buried. All others end acked, none lost.
func TestWorker(t *testing.T) {
	cl := dial(t, []string{startSingle(t)})
	putN(t, cl, "w", 500)
	var mu sync.Mutex
	attempts := map[string]int{}
	done := map[string]bool{}
	ttr := 600 * time.Millisecond
	w := &Worker{Client: cl, Queue: "w", Concurrency: 32, Batch: 16, TTR: ttr,
		ReleaseDelay: 10 * time.Millisecond, TakeTimeout: 200 * time.Millisecond,
		Handler: func(ctx context.Context, tk *Task) (Result, error) {
			var i int
			if err := tk.DecodePayload(&i); err != nil {
				return Result{}, Bury(err)
			}
			mu.Lock()
			attempts[tk.Key]++
			n := attempts[tk.Key]
			mu.Unlock()
			switch {
			case i%100 == 0:
				return Result{}, Bury(errors.New("poison"))
			case i%7 == 0 && n == 1:
				return Result{}, errors.New("flaky")
			case i%50 == 0:
				time.Sleep(ttr * 3 / 2) // past the ttr: only touches keep the lease
			}
			mu.Lock()
			done[tk.Key] = true
			mu.Unlock()
			return Result{Payload: map[string]int{"done": i}}, nil
		}}
	runUntil(t, w, func(st *QueueStats) bool { return st.Done+st.Buried == 500 }, 20*time.Second)
	s := w.Stats()
	t.Logf("worker: %+v", s)
	// 5 buried (0,100,..400); 500-5 acked; failed once: multiples of 7 not of 100.
	flaky := 0
	for i := 0; i < 500; i++ {
		if i%7 == 0 && i%100 != 0 {
			flaky++
		}
	}
	if s.Acked != 495 || s.Buried != 5 || s.Released != int64(flaky) || s.Dropped != 0 || s.Failed != 0 {
		t.Fatalf("counters %+v, want 495 acked, 5 buried, %d released", s, flaky)
	}
	st, _ := cl.Stats(bg(), "w", "")
	if st.Done != 495 || st.Buried != 5 || st.Taken != 0 || st.Ready != 0 {
		t.Fatalf("stats %+v", st)
	}
	got, err := cl.Get(bg(), "w", "t050", "")
	var res map[string]int
	if err != nil || got.DecodePayload(&res) != nil || res["done"] != 50 {
		t.Fatalf("slow task's ack payload: %v %+v", err, got)
	}
}

// Cancelled mid-run, the worker stops taking, lets handlers finish within the grace,
// releases the rest, and leaves nothing taken.
func TestWorkerCancel(t *testing.T) {
	cl := dial(t, []string{startSingle(t)})
	putN(t, cl, "wc", 200)
	var mu sync.Mutex
	started := 0
	w := &Worker{Client: cl, Queue: "wc", Concurrency: 20, Batch: 10, TTR: 30 * time.Second,
		Grace: 300 * time.Millisecond, TakeTimeout: 200 * time.Millisecond,
		Handler: func(ctx context.Context, tk *Task) (Result, error) {
			mu.Lock()
			started++
			n := started
			mu.Unlock()
			if n%2 == 0 { // ignores its context and outlives the grace
				time.Sleep(2 * time.Second)
			} else {
				time.Sleep(100 * time.Millisecond)
			}
			return Result{}, nil
		}}
	ctx, cancel := context.WithCancel(bg())
	errc := make(chan error, 1)
	go func() { errc <- w.Run(ctx) }()
	time.Sleep(400 * time.Millisecond)
	cancel()
	stopped := time.Now()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if d := time.Since(stopped); d > 2*time.Second {
		t.Fatalf("Run took %v to return after cancel", d)
	}
	st, err := cl.Stats(bg(), "wc", "")
	if err != nil || st.Taken != 0 {
		t.Fatalf("after cancel: %v %+v", err, st)
	}
	s := w.Stats()
	t.Logf("worker %+v, queue %+v", s, st)
	if s.Released == 0 || s.Acked == 0 || st.Done != uint64(s.Acked) || st.Ready != 200-st.Done {
		t.Fatalf("worker %+v, queue %+v", s, st)
	}
}

// DUEQ_WORKER_TASKS tasks (default 300): some fail once, some outlive half their ttr, and
// some hang past it ignoring their context (given up on after HandlerTimeout, released,
// handed out again; their late results dropped). Each is acked exactly once, none lost.
func TestWorkerHandlerTimeout(t *testing.T) {
	n := 300
	if v, err := strconv.Atoi(os.Getenv("DUEQ_WORKER_TASKS")); err == nil && v > 0 {
		n = v
	}
	cl := dial(t, []string{startSingle(t)})
	putN(t, cl, "wh", n)
	ttr := 600 * time.Millisecond
	var mu sync.Mutex
	attempts, acks := map[string]int{}, map[string]int{}
	hung, flaky := 0, 0
	for i := 0; i < n; i++ {
		switch {
		case i%10 == 3:
			flaky++
		case i%31 == 5:
			hung++
		}
	}
	w := &Worker{Client: cl, Queue: "wh", Concurrency: 32, Batch: 16, TTR: ttr,
		TakeTimeout: 200 * time.Millisecond, HandlerTimeout: 2 * ttr,
		Handler: func(ctx context.Context, tk *Task) (Result, error) {
			var i int
			_ = tk.DecodePayload(&i)
			mu.Lock()
			attempts[tk.Key]++
			first := attempts[tk.Key] == 1
			mu.Unlock()
			switch {
			case first && i%10 == 3:
				return Result{}, errors.New("flaky")
			case first && i%31 == 5:
				time.Sleep(3 * ttr) // ignores ctx
				return Result{Payload: "hung"}, nil
			case i%97 == 7:
				time.Sleep(ttr * 3 / 4)
			}
			mu.Lock()
			acks[tk.Key]++
			mu.Unlock()
			return Result{Payload: map[string]int{"done": i}}, nil
		}}
	runUntil(t, w, func(st *QueueStats) bool { return st.Done == uint64(n) }, 120*time.Second)
	s := w.Stats()
	t.Logf("worker, %d tasks: %+v", n, s)
	if s.Acked != int64(n) || s.TimedOut != int64(hung) || s.Released != int64(flaky+hung) {
		t.Fatalf("counters %+v, want %d acked, %d timed out, %d released", s, n, hung, flaky+hung)
	}
	for k, c := range acks {
		if c != 1 {
			t.Fatalf("%s acked %d times", k, c)
		}
	}
	time.Sleep(3 * ttr) // the hung handlers return: their results must not land
	for i := 0; i < n; i++ {
		if i%31 != 5 || i%10 == 3 {
			continue
		}
		got, err := cl.Get(bg(), "wh", fmt.Sprintf("t%03d", i), "")
		var res map[string]int
		if err != nil || got.DecodePayload(&res) != nil || res["done"] != i {
			t.Fatalf("t%03d: %v %+v", i, err, got)
		}
	}
}
