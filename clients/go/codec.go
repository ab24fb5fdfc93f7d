package dueq

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sort"
	"unicode/utf8"

	"github.com/vmihailenco/msgpack/v5"
)

// RawPayload is one msgpack value, already encoded. Passed as a payload it is sent
// verbatim; tasks carry their payload in this form so nothing is lost in a round trip
// through Go types (bin vs str, integer widths, maps with non-string keys).
type RawPayload []byte

// EncodeMsgpack writes the bytes as they are (they must be exactly one msgpack value).
func (r RawPayload) EncodeMsgpack(enc *msgpack.Encoder) error {
	if len(r) == 0 {
		return enc.EncodeNil()
	}
	_, err := enc.Writer().Write(r)
	return err
}

// DecodeMsgpack captures the next value's bytes without interpreting them.
func (r *RawPayload) DecodeMsgpack(dec *msgpack.Decoder) error {
	raw, err := dec.DecodeRaw()
	if err != nil {
		return err
	}
	*r = append(RawPayload(nil), raw...)
	return nil
}

// Decode unmarshals the payload into v (as msgpack.Unmarshal does).
func (r RawPayload) Decode(v any) error { return msgpack.Unmarshal(r, v) }

// keyValue sends a key as str when it is valid UTF-8 and as bin otherwise (§2: strict
// decoders must never see invalid UTF-8 in a str). Both name the same key.
func keyValue(key string) any {
	if utf8.ValidString(key) {
		return key
	}
	return []byte(key)
}

// encodeRequest builds one frame: the 4-byte big-endian length, then the map
// {"op", "id", fields...}. Field order is sorted so frames are reproducible in tests.
func encodeRequest(op string, id uint64, fields map[string]any) ([]byte, error) {
	var buf bytes.Buffer
	buf.Write([]byte{0, 0, 0, 0})
	enc := msgpack.NewEncoder(&buf)
	enc.UseCompactInts(true)
	enc.SetSortMapKeys(true)
	names := make([]string, 0, len(fields))
	for k, v := range fields {
		if k != "op" && k != "id" && v != nil {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	if err := enc.EncodeMapLen(2 + len(names)); err != nil {
		return nil, err
	}
	_ = enc.EncodeString("op")
	_ = enc.EncodeString(op)
	_ = enc.EncodeString("id")
	_ = enc.EncodeUint(id)
	for _, k := range names {
		_ = enc.EncodeString(k)
		if err := enc.Encode(fields[k]); err != nil {
			return nil, fmt.Errorf("field %q: %w", k, err)
		}
	}
	b := buf.Bytes()
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b, nil
}

// response is one decoded answer. Result fields stay raw until someone asks for them,
// so payloads are never re-encoded.
type response struct {
	ID     uint64
	OK     bool
	Err    *Error
	Fields map[string]msgpack.RawMessage
}

// readFrame reads one frame body, refusing lengths over max before allocating.
func readFrame(r io.Reader, max int) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if int64(n) > int64(max) {
		return nil, fmt.Errorf("dueq: response frame of %d bytes over the limit %d", n, max)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return nil, err
	}
	return body, nil
}

// decodeResponse checks the body's structure first (checkValue), then splits the
// envelope. Any failure means the frame cannot be attributed: the caller drops the
// connection (§1).
func decodeResponse(body []byte) (*response, error) {
	if end, err := checkValue(body, 0, 0); err != nil {
		return nil, err
	} else if end != len(body) {
		return nil, errors.New("dueq: trailing bytes after the response map")
	}
	dec := msgpack.NewDecoder(bytes.NewReader(body))
	n, err := dec.DecodeMapLen()
	if err != nil || n < 0 {
		return nil, errors.New("dueq: response is not a map")
	}
	resp := &response{Fields: make(map[string]msgpack.RawMessage, n)}
	for i := 0; i < n; i++ {
		k, err := dec.DecodeString()
		if err != nil {
			return nil, fmt.Errorf("dueq: response key: %w", err)
		}
		switch k {
		case "id":
			resp.ID, err = dec.DecodeUint64()
		case "ok":
			resp.OK, err = dec.DecodeBool()
		case "error":
			var e struct {
				Code    string `msgpack:"code"`
				Message string `msgpack:"message"`
				Leader  string `msgpack:"leader"`
			}
			if err = dec.Decode(&e); err == nil {
				resp.Err = &Error{Code: e.Code, Message: e.Message, Leader: e.Leader,
					Outcome: outcomeOf(e.Code)}
			}
		default:
			var raw msgpack.RawMessage
			raw, err = dec.DecodeRaw()
			resp.Fields[k] = append(msgpack.RawMessage(nil), raw...)
		}
		if err != nil {
			return nil, fmt.Errorf("dueq: response field %q: %w", k, err)
		}
	}
	if !resp.OK && resp.Err == nil {
		resp.Err = &Error{Code: "internal", Message: "answer with ok false and no error", Outcome: Unknown}
	}
	return resp, nil
}

// result decodes the result field name into v; a missing field leaves v as it is.
func (r *response) result(name string, v any) error {
	raw, ok := r.Fields[name]
	if !ok {
		return nil
	}
	return msgpack.Unmarshal(raw, v)
}

// generic returns every result field as plain Go values: maps with string keys,
// int64 numbers (uint64 past int64's range), float64, strings (bin too), []any, bool, nil.
func (r *response) generic() (map[string]any, error) {
	out := make(map[string]any, len(r.Fields))
	for k, raw := range r.Fields {
		dec := msgpack.NewDecoder(bytes.NewReader(raw))
		dec.UseLooseInterfaceDecoding(true)
		dec.SetMapDecoder(decodeLooseMap)
		v, err := dec.DecodeInterfaceLoose()
		if err != nil {
			return nil, fmt.Errorf("dueq: result field %q: %w", k, err)
		}
		out[k] = normalize(v)
	}
	return out, nil
}

// normalize gives integers one type, int64 (uint64 only past its range), whatever
// encoding the server chose: loose decoding returns fixints as int64 and uints as uint64.
func normalize(v any) any {
	switch x := v.(type) {
	case uint64:
		if x <= 1<<63-1 {
			return int64(x)
		}
	case []any:
		for i := range x {
			x[i] = normalize(x[i])
		}
	case map[string]any:
		for k := range x {
			x[k] = normalize(x[k])
		}
	}
	return v
}

// decodeLooseMap decodes a map into map[string]any; keys that are not strings (a
// payload may hold any) are spelled with fmt so a generic caller still sees them.
func decodeLooseMap(d *msgpack.Decoder) (any, error) {
	n, err := d.DecodeMapLen()
	if err != nil || n < 0 {
		return nil, err
	}
	m := make(map[string]any, n)
	for i := 0; i < n; i++ {
		k, err := d.DecodeInterfaceLoose()
		if err != nil {
			return nil, err
		}
		v, err := d.DecodeInterfaceLoose()
		if err != nil {
			return nil, err
		}
		if s, ok := k.(string); ok {
			m[s] = v
		} else {
			m[fmt.Sprint(k)] = v
		}
	}
	return m, nil
}

const maxNesting = 32 // §7

// checkValue walks one msgpack value from off and returns where it ends. It checks
// every declared length against the bytes actually present (so no length can make
// the decoder allocate more than the frame holds) and nesting up to maxNesting.
func checkValue(b []byte, off, depth int) (int, error) {
	short := errors.New("dueq: response truncated or with a length past its end")
	if depth > maxNesting {
		return 0, errors.New("dueq: response nested too deep")
	}
	if off >= len(b) {
		return 0, short
	}
	c := b[off]
	off++
	need := func(n int) (int, error) {
		if n < 0 || n > len(b)-off {
			return 0, short
		}
		return off + n, nil
	}
	uintAt := func(size int) (int, error) {
		if size > len(b)-off {
			return 0, short
		}
		var v uint64
		for i := 0; i < size; i++ {
			v = v<<8 | uint64(b[off+i])
		}
		off += size
		if v > uint64(len(b)) {
			return 0, short
		}
		return int(v), nil
	}
	items := func(n int) (int, error) {
		if n > len(b)-off { // every item needs at least one byte
			return 0, short
		}
		var err error
		for i := 0; i < n; i++ {
			if off, err = checkValue(b, off, depth+1); err != nil {
				return 0, err
			}
		}
		return off, nil
	}
	switch {
	case c <= 0x7f || c >= 0xe0 || c == 0xc0 || c == 0xc2 || c == 0xc3:
		return off, nil
	case c >= 0x80 && c <= 0x8f:
		return items(2 * int(c&0x0f))
	case c >= 0x90 && c <= 0x9f:
		return items(int(c & 0x0f))
	case c >= 0xa0 && c <= 0xbf:
		return need(int(c & 0x1f))
	}
	switch c {
	case 0xcc, 0xd0:
		return need(1)
	case 0xcd, 0xd1:
		return need(2)
	case 0xca, 0xce, 0xd2:
		return need(4)
	case 0xcb, 0xcf, 0xd3:
		return need(8)
	case 0xd4, 0xd5, 0xd6, 0xd7, 0xd8: // fixext: type byte + 1..16 bytes
		return need(1 + 1<<(c-0xd4))
	case 0xc4, 0xd9, 0xc5, 0xda, 0xc6, 0xdb: // bin/str 8, 16, 32
		size := map[byte]int{0xc4: 1, 0xd9: 1, 0xc5: 2, 0xda: 2, 0xc6: 4, 0xdb: 4}[c]
		n, err := uintAt(size)
		if err != nil {
			return 0, err
		}
		return need(n)
	case 0xc7, 0xc8, 0xc9: // ext 8, 16, 32
		n, err := uintAt(1 << (c - 0xc7))
		if err != nil {
			return 0, err
		}
		return need(n + 1)
	case 0xdc, 0xdd, 0xde, 0xdf:
		size := 2
		if c == 0xdd || c == 0xdf {
			size = 4
		}
		n, err := uintAt(size)
		if err != nil {
			return 0, err
		}
		if c >= 0xde {
			n *= 2
		}
		return items(n)
	}
	return 0, fmt.Errorf("dueq: invalid msgpack byte 0x%02x", c)
}
