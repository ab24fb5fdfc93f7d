// Command refresher-go is a token refresher on dueq: every user's OAuth token is a task
// whose time is the token's expiry; the queue hands each to a worker `lead` seconds
// before that, and the worker acks it with the new token and its new expiry. The OAuth
// provider is a local fake (provider.go) that issues short-lived tokens and rate-limits.
//
//	go run . --seeds 127.0.0.1:7701,127.0.0.1:7702,127.0.0.1:7703 [--cacert data/tls/ca.pem]
//	         [--users 200] [--seconds 60] [--lead 5] [--json]
//
// It signs the users in, puts their tokens, refreshes until --seconds have passed, and
// prints a summary: refreshes, the share made before the old token expired, rate-limited
// calls. Flags, behaviour and summary are those of examples/refresher-python.
package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"dueq.dev/dueq"
)

const queue = "oauth-tokens"

// tokens is a task's payload: the user's current tokens.
type tokens struct {
	AccessToken  string `msgpack:"access_token" json:"access_token"`
	RefreshToken string `msgpack:"refresh_token" json:"refresh_token"`
}

// grant is the provider's answer to /login and /token.
type grant struct {
	tokens
	ExpiresIn float64 `json:"expires_in"` // seconds
}

// rateLimitedError is a 429; it carries the provider's Retry-After.
type rateLimitedError struct{ retryAfter time.Duration }

func (e *rateLimitedError) Error() string { return "rate limited (429)" }

var httpClient = &http.Client{
	Timeout:   5 * time.Second,
	Transport: &http.Transport{MaxIdleConnsPerHost: 32}, // one per worker slot: no churn
}

func post(ctx context.Context, url string, body any) (*grant, error) {
	data, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := httpClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusTooManyRequests:
		wait := time.Second
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s >= 0 {
			wait = time.Duration(s) * time.Second
		}
		return nil, &rateLimitedError{wait}
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("%s: HTTP %d", url, resp.StatusCode)
	}
	var g grant
	if err := json.NewDecoder(resp.Body).Decode(&g); err != nil {
		return nil, fmt.Errorf("%s: %v", url, err)
	}
	return &g, nil
}

func expiry(g *grant) time.Time {
	return time.Now().Add(time.Duration(g.ExpiresIn * float64(time.Second)))
}

// summary is the --json line; its keys are in the order the Python example prints them.
type summary struct {
	Users        int              `json:"users"`
	Seconds      float64          `json:"seconds"`
	Refreshed    int              `json:"refreshed"`
	OnTime       int              `json:"on_time"`
	Late         int              `json:"late"`
	OnTimeShare  *float64         `json:"on_time_share"` // null when nothing was refreshed
	RateLimited  int              `json:"rate_limited"`
	Unknown      int              `json:"unknown"`
	ExpiredAtEnd int              `json:"expired_at_end"`
	Worker       map[string]int64 `json:"worker"`
	TakenAtEnd   uint64           `json:"taken_at_end"` // tasks still leased, by the leader's count
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "refresher:", err)
		os.Exit(1)
	}
}

func run() error {
	seeds := flag.String("seeds", "127.0.0.1:7701,127.0.0.1:7702,127.0.0.1:7703", "the cluster's client addresses")
	cacert := flag.String("cacert", "", "the cluster's CA, when its client port speaks TLS")
	users := flag.Int("users", 200, "users to sign in")
	seconds := flag.Float64("seconds", 60, "how long to refresh")
	lead := flag.Float64("lead", 5, "refresh this long (seconds) before expiry")
	asJSON := flag.Bool("json", false, "the summary as one JSON line")
	flag.Parse()
	if flag.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", flag.Args())
	}

	opts := dueq.Options{}
	if *cacert != "" {
		pem, err := os.ReadFile(*cacert)
		if err != nil {
			return err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("%s: no certificate found", *cacert)
		}
		opts.TLS = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}

	prov, err := startProvider(math.Max(*lead*2, 8), math.Max(*lead*6, 30), 200)
	if err != nil {
		return err
	}
	defer prov.stop()

	ctx := context.Background()
	cl, err := dueq.Dial(ctx, strings.Split(*seeds, ","), opts)
	if err != nil {
		return err
	}
	defer cl.Close()

	leadD := time.Duration(*lead * float64(time.Second))
	ttr := 10 * time.Second
	share := 0.1
	if _, err := cl.Declare(ctx, queue, dueq.QueueSettings{Lead: &leadD, TTR: &ttr, LateShare: &share}); err != nil {
		return fmt.Errorf("declare %s: %w", queue, err)
	}
	for u := 0; u < *users; u++ {
		g, err := login(ctx, prov.URL, u)
		if err != nil {
			return fmt.Errorf("login user %d: %w", u, err)
		}
		key := fmt.Sprintf("user-%05d", u)
		if _, err := cl.Put(ctx, queue, key, g.tokens, dueq.PutOptions{Time: expiry(g)}); err != nil {
			return fmt.Errorf("put %s: %w", key, err)
		}
	}

	refresh := func(ctx context.Context, t *dueq.Task) (dueq.Result, error) {
		var cur tokens
		if err := t.DecodePayload(&cur); err != nil {
			return dueq.Result{}, dueq.Bury(err) // not a payload of ours: retrying won't help
		}
		g, err := post(ctx, prov.URL+"/token", map[string]string{"refresh_token": cur.RefreshToken})
		if err != nil {
			return dueq.Result{}, err // released, due again after ReleaseDelay
		}
		return dueq.Result{Payload: g.tokens, Time: expiry(g)}, nil
	}
	w := &dueq.Worker{Client: cl, Queue: queue, Handler: refresh, Concurrency: 8,
		TTR: 10 * time.Second, TakeTimeout: 500 * time.Millisecond, Grace: 5 * time.Second,
		ReleaseDelay: time.Second}

	// SIGTERM or Ctrl-C, or --seconds: stop taking, finish what is held (within the
	// worker's grace), release the rest.
	sctx, stopSignals := signal.NotifyContext(ctx, syscall.SIGTERM, os.Interrupt)
	defer stopSignals()
	wctx, cancel := context.WithTimeout(sctx, time.Duration(*seconds*float64(time.Second)))
	defer cancel()
	started := time.Now()
	if err := w.Run(wctx); err != nil {
		return err
	}
	elapsed := time.Since(started).Seconds()
	qs, err := cl.Stats(ctx, queue, "leader")
	if err != nil {
		return fmt.Errorf("stats %s: %w", queue, err)
	}

	sc := prov.Score()
	ws := w.Stats()
	s := summary{Users: *users, Seconds: math.Round(elapsed*10) / 10, Refreshed: sc.OnTime + sc.Late,
		OnTime: sc.OnTime, Late: sc.Late, RateLimited: sc.RateLimited, Unknown: sc.Unknown,
		ExpiredAtEnd: prov.expiredNow(),
		Worker: map[string]int64{"acked": ws.Acked, "released": ws.Released, "buried": ws.Buried,
			"dropped": ws.Dropped, "failed": ws.Failed},
		TakenAtEnd: qs.Taken}
	if s.Refreshed > 0 {
		v := math.Round(float64(sc.OnTime)/float64(s.Refreshed)*1e4) / 1e4
		s.OnTimeShare = &v
	}
	if *asJSON {
		line, _ := json.Marshal(s)
		fmt.Println(string(line))
		return nil
	}
	shareText := "None"
	if s.OnTimeShare != nil {
		shareText = strconv.FormatFloat(*s.OnTimeShare, 'f', -1, 64)
	}
	fmt.Printf("refresher: %d refreshes of %d users in %.1f s; %d before the old token expired (%s), "+
		"%d after; %d calls rate-limited; %d tokens expired at the end; worker acked=%d released=%d "+
		"buried=%d dropped=%d failed=%d; %d tasks taken at the end\n",
		s.Refreshed, s.Users, s.Seconds, s.OnTime, shareText, s.Late, s.RateLimited, s.ExpiredAtEnd,
		ws.Acked, ws.Released, ws.Buried, ws.Dropped, ws.Failed, s.TakenAtEnd)
	return nil
}

// login signs user u in; a 429 waits the provider's Retry-After and tries again (more
// than `rate` users would otherwise fail the start).
func login(ctx context.Context, url string, u int) (*grant, error) {
	for attempt := 0; ; attempt++ {
		g, err := post(ctx, url+"/login", map[string]int{"user": u})
		var rl *rateLimitedError
		if !errors.As(err, &rl) || attempt >= 10 {
			return g, err
		}
		time.Sleep(rl.retryAfter)
	}
}
