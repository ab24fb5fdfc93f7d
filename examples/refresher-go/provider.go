package main

// A stand-in OAuth provider for the example: it issues access tokens that expire,
// refreshes them on POST /token {"refresh_token": ...}, and rate-limits like a real one
// (429 with Retry-After past `rate` requests a second). It keeps score: a refresh that
// came while the token it replaces was still valid is on time, one after it expired is
// late. It behaves like examples/refresher-python/fake_provider.py.

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"math/big"
	"net"
	"net/http"
	"sync"
	"time"
)

// Score is what the provider counted.
type Score struct {
	OnTime, Late, RateLimited, Unknown int
}

type provider struct {
	URL string

	minLife, maxLife float64 // seconds an access token lives: uniform in [min, max)
	rate             int     // calls a second before 429

	mu       sync.Mutex
	tokens   map[string]time.Time // refresh token -> expiry of its current access token
	score    Score
	window   int64 // the second being counted (unix seconds)
	inWindow int

	srv *http.Server
	ln  net.Listener
}

// startProvider listens on 127.0.0.1 on a free port and serves until stop.
func startProvider(minLife, maxLife float64, rate int) (*provider, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &provider{URL: "http://" + ln.Addr().String(), minLife: minLife, maxLife: maxLife,
		rate: rate, tokens: map[string]time.Time{}, ln: ln}
	p.srv = &http.Server{Handler: http.HandlerFunc(p.serveHTTP), ReadHeaderTimeout: 5 * time.Second}
	go p.srv.Serve(ln) //nolint:errcheck // ends with ErrServerClosed on stop
	return p, nil
}

func (p *provider) stop() { p.srv.Close() }

func (p *provider) serveHTTP(w http.ResponseWriter, r *http.Request) {
	var req map[string]any
	if r.Method != http.MethodPost {
		writeJSON(w, http.StatusMethodNotAllowed, map[string]any{"error": "method_not_allowed"})
		return
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&req); err != nil {
		req = map[string]any{}
	}
	code, answer := p.handle(r.URL.Path, req)
	if code == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, code, answer)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	data, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	w.Write(data) //nolint:errcheck
}

func (p *provider) handle(path string, req map[string]any) (int, map[string]any) {
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if sec := now.Unix(); sec != p.window {
		p.window, p.inWindow = sec, 0
	}
	p.inWindow++
	if p.inWindow > p.rate {
		p.score.RateLimited++
		return http.StatusTooManyRequests, map[string]any{"error": "slow_down"}
	}
	var rt string
	switch path {
	case "/login": // a user signs in: their first tokens
		rt = "rt-" + randomHex(8)
	case "/token":
		rt, _ = req["refresh_token"].(string)
		expiry, ok := p.tokens[rt]
		if !ok {
			p.score.Unknown++
			return http.StatusBadRequest, map[string]any{"error": "invalid_grant"}
		}
		if !now.After(expiry) {
			p.score.OnTime++
		} else {
			p.score.Late++
		}
	default:
		return http.StatusNotFound, map[string]any{"error": "not_found"}
	}
	life := p.lifetime()
	p.tokens[rt] = now.Add(time.Duration(life * float64(time.Second)))
	return http.StatusOK, map[string]any{"access_token": "at-" + randomHex(8),
		"refresh_token": rt, "expires_in": life}
}

// lifetime draws a token's life in seconds, in steps of a thousandth of the range.
func (p *provider) lifetime() float64 {
	n, err := rand.Int(rand.Reader, big.NewInt(1000))
	step := int64(500)
	if err == nil {
		step = n.Int64()
	}
	return p.minLife + (p.maxLife-p.minLife)*float64(step)/1000
}

// Score returns the counts so far.
func (p *provider) Score() Score {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.score
}

// expiredNow counts the users whose access token has expired.
func (p *provider) expiredNow() int {
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, exp := range p.tokens {
		if exp.Before(now) {
			n++
		}
	}
	return n
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}
