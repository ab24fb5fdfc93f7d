package dueq

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

func unhex(t *testing.T, s string) []byte {
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The byte-level example of protocol.md §1.
func TestEncodePingAsDocumented(t *testing.T) {
	got, err := encodeRequest("ping", 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := unhex(t, "0000000d 82 a26f70 a470696e67 a26964 01")
	if !bytes.Equal(got, want) {
		t.Fatalf("got % x\nwant % x", got, want)
	}
}

func TestDecodeNotLeaderAsDocumented(t *testing.T) {
	body := unhex(t, "83 a26964 02 a26f6b c2 a56572726f72 83 a4636f6465 aa6e6f745f6c6561646572"+
		"a76d657373616765 a8666f6c6c6f776572 a66c6561646572 ad31302e302e302e313a37373030")
	r, err := decodeResponse(body)
	if err != nil {
		t.Fatal(err)
	}
	if r.ID != 2 || r.OK || r.Err.Code != "not_leader" || r.Err.Leader != "10.0.0.1:7700" ||
		r.Err.Message != "follower" || r.Err.Outcome != NotApplied {
		t.Fatalf("%+v %+v", r, r.Err)
	}
	// Any integer encoding of the id is accepted (§1).
	r, err = decodeResponse(unhex(t, "82 a26964 cf0000000000000001 a26f6b c3"))
	if err != nil || r.ID != 1 || !r.OK {
		t.Fatalf("%+v %v", r, err)
	}
}

func TestDecodeRefusesMalformed(t *testing.T) {
	for name, b := range map[string]string{
		"empty":         "",
		"not a map":     "93 01 02 03",
		"trailing":      "81 a26964 01 00",
		"truncated str": "81 a26964 db 7fffffff 41",
		"huge array":    "81 a26964 dd ffffffff",
		"bad byte":      "81 a26964 c1",
		"short key":     "81 a5 6964",
	} {
		if _, err := decodeResponse(unhex(t, b)); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
	deep := strings.Repeat("91", 40) + "c0"
	if _, err := decodeResponse(unhex(t, "81 a178 "+deep)); err == nil {
		t.Error("nesting past 32 decoded")
	}
}

func TestPayloadsAndKeys(t *testing.T) {
	raw, _ := msgpack.Marshal(map[string]any{"a": []any{int64(1), "x"}})
	frame, err := encodeRequest("put", 7, map[string]any{"key": keyValue("k\xff"), "payload": RawPayload(raw)})
	if err != nil {
		t.Fatal(err)
	}
	// The raw payload goes out verbatim; the invalid-UTF-8 key as bin (c4).
	if !bytes.Contains(frame, raw) || !bytes.Contains(frame, []byte{0xa3, 'k', 'e', 'y', 0xc4, 2, 'k', 0xff}) {
		t.Fatalf("% x", frame)
	}
	// A task's payload comes back as the same bytes, and a bin key reads as a string.
	task, _ := msgpack.Marshal(map[string]any{"key": []byte("k\xff"), "payload": RawPayload(raw), "lease": 9})
	body := append([]byte{0x83, 0xa2, 'i', 'd', 7, 0xa2, 'o', 'k', 0xc3, 0xa4, 't', 'a', 's', 'k'}, task...)
	r, err := decodeResponse(body)
	if err != nil {
		t.Fatal(err)
	}
	var got Task
	if err := r.result("task", &got); err != nil {
		t.Fatal(err)
	}
	if got.Key != "k\xff" || !bytes.Equal(got.Payload, raw) || got.Lease != 9 {
		t.Fatalf("%+v", got)
	}
	var v map[string]any
	if err := got.DecodePayload(&v); err != nil || v["a"] == nil {
		t.Fatal(v, err)
	}
	g, err := r.generic()
	if err != nil || g["task"].(map[string]any)["lease"] != int64(9) {
		t.Fatalf("%#v %v", g, err)
	}
}

func TestErrorClassification(t *testing.T) {
	for _, code := range []string{"not_leader", "no_quorum", "unavailable", "unauthorized", "too_large",
		"bad_request", "wrong_shard", "store_full", "not_found", "exists", "lease_mismatch"} {
		if outcomeOf(code) != NotApplied {
			t.Errorf("%s not NotApplied", code)
		}
	}
	for _, code := range []string{"timeout", "internal", "something_new"} {
		if outcomeOf(code) != Unknown {
			t.Errorf("%s not Unknown", code)
		}
	}
	var err error = fmt.Errorf("wrapped: %w", &Error{Code: "lease_mismatch", Outcome: NotApplied})
	if !IsCode(err, "lease_mismatch") || !IsNotApplied(err) || IsUnknown(err) {
		t.Error("wrapped lease_mismatch misclassified")
	}
	e := unknown("timeout", context.DeadlineExceeded, "x")
	if !IsUnknown(e) || !errors.Is(e, context.DeadlineExceeded) {
		t.Error("timeout misclassified")
	}
	if !IsUnknown(errors.New("other")) || IsUnknown(nil) {
		t.Error("plain errors")
	}
	if !isBury(fmt.Errorf("x: %w", Bury(errors.New("bad")))) || isBury(errors.New("y")) {
		t.Error("Bury")
	}
}
