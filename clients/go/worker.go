package dueq

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Result is what a handler returns on success: the ack's new payload (nil keeps the
// old one) and, when not zero, when the task comes due again (else it is done).
type Result struct {
	Payload any
	Time    time.Time
}

// Worker takes tasks of one queue and runs Handler on each, touching leases while
// handlers run. Fields are read when Run starts.
type Worker struct {
	Client       *Client
	Queue        string
	Concurrency  int           // handlers at once (default 1)
	Batch        int           // tasks per take at most (default Concurrency)
	TTR          time.Duration // lease per take (0: the queue's ttr_ms)
	Handler      func(ctx context.Context, t *Task) (Result, error)
	Grace        time.Duration // after ctx ends, how long running handlers may finish (default 10 s)
	ReleaseDelay time.Duration // a failed task is ready again after this
	TakeTimeout  time.Duration // how long one take waits for a task (default 1 s)
	// A handler that runs longer is given up on (0: never): its context is cancelled, its
	// task released for another worker, and whatever it returns later is dropped.
	HandlerTimeout time.Duration

	acked, released, buried, dropped, failed, timedOut atomic.Int64
}

// WorkerStats are the worker's counters. Dropped counts tasks whose lease was no longer
// theirs (lease_mismatch on touch, ack, release or bury); Failed counts acks, releases
// and buries that failed otherwise (the lease then runs out on the server).
// TimedOut counts handlers given up on after HandlerTimeout (their tasks released).
type WorkerStats struct{ Acked, Released, Buried, Dropped, Failed, TimedOut int64 }

// Stats reads the counters (during or after Run).
func (w *Worker) Stats() WorkerStats {
	return WorkerStats{w.acked.Load(), w.released.Load(), w.buried.Load(), w.dropped.Load(),
		w.failed.Load(), w.timedOut.Load()}
}

// held is one task this worker holds; finish is taken once, by whoever ends it first:
// the handler's goroutine, or Run releasing what is left after the grace.
type held struct {
	t    *Task
	ttr  time.Duration
	once sync.Once
}

// Run takes and handles tasks until ctx ends; then it stops taking, gives running
// handlers Grace to finish, releases whatever it still holds, and returns nil.
func (w *Worker) Run(ctx context.Context) error {
	conc := w.Concurrency
	if conc <= 0 {
		conc = 1
	}
	batch := w.Batch
	if batch <= 0 || batch > conc {
		batch = conc
	}
	grace := w.Grace
	if grace <= 0 {
		grace = 10 * time.Second
	}
	takeWait := w.TakeTimeout
	if takeWait <= 0 {
		takeWait = time.Second
	}
	// Handlers outlive ctx by up to the grace: they get their own context.
	hctx, cancelHandlers := context.WithCancel(context.Background())
	defer cancelHandlers()
	slots := make(chan struct{}, conc)
	var mu sync.Mutex
	holding := map[*held]struct{}{}
	var wg sync.WaitGroup

	for ctx.Err() == nil {
		select { // at least one free slot before taking
		case slots <- struct{}{}:
		case <-ctx.Done():
			continue
		}
		n := 1
		for n < batch {
			select {
			case slots <- struct{}{}:
				n++
				continue
			default:
			}
			break
		}
		// The take must not be cut short by ctx: tasks leased by an answer nobody reads
		// would stay taken. Its own deadline covers the server's wait.
		tctx, cancel := context.WithTimeout(context.Background(), w.Client.opts.CallTimeout+takeWait)
		tasks, err := w.Client.Take(tctx, w.Queue, TakeOptions{Count: n, TTR: w.TTR, Timeout: takeWait})
		cancel()
		for i := len(tasks); i < n; i++ {
			<-slots
		}
		if err != nil {
			select { // the cluster is unwell: do not spin
			case <-time.After(100 * time.Millisecond):
			case <-ctx.Done():
			}
			continue
		}
		for _, t := range tasks {
			h := &held{t: t, ttr: w.TTR}
			if h.ttr <= 0 {
				h.ttr = time.Until(time.UnixMilli(t.LeaseUntil))
			}
			mu.Lock()
			holding[h] = struct{}{}
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				w.handle(hctx, h)
				mu.Lock()
				delete(holding, h)
				mu.Unlock()
				<-slots
			}()
		}
	}

	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	select {
	case <-finished:
		return nil
	case <-time.After(grace):
	}
	cancelHandlers() // past the grace: handlers are told to stop, their results ignored
	mu.Lock()
	left := make([]*held, 0, len(holding))
	for h := range holding {
		left = append(left, h)
	}
	mu.Unlock()
	var rel sync.WaitGroup
	for _, h := range left {
		rel.Add(1)
		go func(h *held) {
			defer rel.Done()
			h.once.Do(func() {
				w.finish(h, func(ctx context.Context) error {
					return w.Client.Release(ctx, w.Queue, h.t.Key, h.t.Lease, 0)
				}, &w.released)
			})
		}(h)
	}
	rel.Wait()
	return nil
}

// handle runs the handler with a touch every half ttr, then acks, releases or buries.
func (w *Worker) handle(hctx context.Context, h *held) {
	ctx, cancel := context.WithCancel(hctx)
	var lost atomic.Bool
	touched := make(chan struct{})
	go func() {
		defer close(touched)
		w.touchLoop(ctx, h, &lost, cancel)
	}()
	if w.HandlerTimeout > 0 {
		// A handler may ignore its context: the task is released when the time is up,
		// whether the handler returns or not.
		timer := time.AfterFunc(w.HandlerTimeout, func() {
			cancel()
			h.once.Do(func() {
				w.timedOut.Add(1)
				w.finish(h, func(ctx context.Context) error {
					return w.Client.Release(ctx, w.Queue, h.t.Key, h.t.Lease, w.ReleaseDelay)
				}, &w.released)
			})
		})
		defer timer.Stop()
	}
	res, err := w.Handler(ctx, h.t)
	cancel()
	<-touched // no touch may race the ack
	if lost.Load() {
		h.once.Do(func() { w.dropped.Add(1) })
		return
	}
	h.once.Do(func() {
		q, key, lease := w.Queue, h.t.Key, h.t.Lease
		switch {
		case err == nil:
			w.finish(h, func(ctx context.Context) error {
				_, e := w.Client.Ack(ctx, q, key, lease, AckOptions{Payload: res.Payload, Time: res.Time})
				return e
			}, &w.acked)
		case isBury(err):
			w.finish(h, func(ctx context.Context) error { return w.Client.Bury(ctx, q, key, lease) }, &w.buried)
		default:
			w.finish(h, func(ctx context.Context) error {
				return w.Client.Release(ctx, q, key, lease, w.ReleaseDelay)
			}, &w.released)
		}
	})
}

// finish sends the last op on a lease with its own deadline (ctx may be over) and counts.
func (w *Worker) finish(h *held, op func(context.Context) error, counter *atomic.Int64) {
	ctx, cancel := context.WithTimeout(context.Background(), w.Client.opts.CallTimeout)
	defer cancel()
	switch err := op(ctx); {
	case err == nil:
		counter.Add(1)
	case IsCode(err, "lease_mismatch"):
		w.dropped.Add(1) // another worker may hold it now: nothing to do
	default:
		w.failed.Add(1)
	}
}

// touchLoop extends the lease at half its ttr while the handler runs. A lease_mismatch
// means the task is no longer ours: the handler's context is cancelled.
func (w *Worker) touchLoop(ctx context.Context, h *held, lost *atomic.Bool, cancel func()) {
	every := h.ttr / 2
	if every < 10*time.Millisecond {
		every = 10 * time.Millisecond
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		tctx, c := context.WithTimeout(context.Background(), every)
		_, err := w.Client.Touch(tctx, w.Queue, h.t.Key, h.t.Lease, w.TTR)
		c()
		if IsCode(err, "lease_mismatch") {
			lost.Store(true)
			cancel()
			return
		}
	}
}
