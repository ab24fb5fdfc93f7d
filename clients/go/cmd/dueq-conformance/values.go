package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

func asErr(err error, target any) bool { return errors.As(err, target) }

// subst applies the README's substitutions to a step's fields and turns JSON numbers
// into int64 (or float64) so they are sent as msgpack integers.
func (r *runner) subst(v any, i int) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = r.subst(e, i)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for k, e := range x {
			out[k] = r.subst(e, i)
		}
		return out
	case json.Number:
		return number(x)
	case string:
		s := strings.ReplaceAll(x, "${i}", strconv.Itoa(i))
		if strings.HasPrefix(s, "$now") {
			now := time.Now().UnixMilli()
			rest := s[4:]
			if rest == "" {
				return now
			}
			if n, err := strconv.ParseInt(rest, 10, 64); err == nil && (rest[0] == '+' || rest[0] == '-') {
				return now + n
			}
		}
		if strings.HasPrefix(x, "$") && !strings.HasPrefix(x, "${") {
			if val, ok := r.vars[x[1:]]; ok {
				return val
			}
		}
		return s
	}
	return v
}

func number(n json.Number) any {
	if i, err := n.Int64(); err == nil {
		return i
	}
	if u, err := strconv.ParseUint(string(n), 10, 64); err == nil {
		return u
	}
	f, _ := n.Float64()
	return f
}

func toInt(v any) int64 {
	if n, ok := v.(json.Number); ok {
		if i, err := n.Int64(); err == nil {
			return i
		}
	}
	return -1
}

// match checks that got contains want: maps by the keys want gives, arrays element by
// element (same length), numbers by value, strings by bytes (bin arrives as string).
func match(want, got any, at string) string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return fmt.Sprintf("%s: got %v, want a map", at, got)
		}
		for k, wv := range w {
			gv, present := g[k]
			if !present {
				return fmt.Sprintf("%s.%s missing", at, k)
			}
			if why := match(wv, gv, at+"."+k); why != "" {
				return why
			}
		}
		return ""
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return fmt.Sprintf("%s: got %v, want %d elements", at, got, len(w))
		}
		for k := range w {
			if why := match(w[k], g[k], fmt.Sprintf("%s.%d", at, k)); why != "" {
				return why
			}
		}
		return ""
	case json.Number:
		if numEqual(number(w), got) {
			return ""
		}
	case int64, uint64, float64:
		if numEqual(w, got) {
			return ""
		}
	case string:
		if g, ok := got.(string); ok && g == w {
			return ""
		}
	default:
		if want == got {
			return ""
		}
	}
	return fmt.Sprintf("%s: got %v (%T), want %v", at, got, got, want)
}

func numEqual(a, b any) bool {
	fa, oka := asFloat(a)
	fb, okb := asFloat(b)
	if !oka || !okb {
		return false
	}
	// Integers compare exactly (float64 would round ids and leases past 2^53).
	if ia, ok := toUint(a); ok {
		if ib, ok := toUint(b); ok {
			return ia == ib
		}
	}
	if ia, ea := a.(int64); ea {
		if ib, eb := b.(int64); eb {
			return ia == ib
		}
	}
	return fa == fb || math.Abs(fa-fb) < 1e-9*math.Max(1, math.Abs(fa))
}

func asFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case int64:
		return float64(x), true
	case uint64:
		return float64(x), true
	case float64:
		return x, true
	case int:
		return float64(x), true
	}
	return 0, false
}

func toUint(v any) (uint64, bool) {
	switch x := v.(type) {
	case uint64:
		return x, true
	case int64:
		return uint64(x), x >= 0
	}
	return 0, false
}
