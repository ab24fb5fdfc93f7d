package dueq

import (
	"context"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

// Task is a task as get and take return it. Fields an op does not return stay zero.
type Task struct {
	Queue      string     `msgpack:"-"`
	Key        string     `msgpack:"key"` // str or bin on the wire: Go strings hold any bytes
	Payload    RawPayload `msgpack:"payload"`
	Status     string     `msgpack:"status"` // get, list
	Time       int64      `msgpack:"time"`   // ms since the epoch: when it is due
	Attempts   uint64     `msgpack:"attempts"`
	Version    uint64     `msgpack:"version"`     // get
	Lease      uint64     `msgpack:"lease"`       // take: the fencing token
	LeaseUntil int64      `msgpack:"lease_until"` // take, get/list while taken
}

// Due is the task's due time.
func (t *Task) Due() time.Time { return time.UnixMilli(t.Time) }

// DecodePayload decodes the payload into v.
func (t *Task) DecodePayload(v any) error { return t.Payload.Decode(v) }

// Call sends any op with the given fields and returns the answer's result fields as
// generic values: map[string]any, int64 (uint64 past its range), float64, string (bin
// too), []any, bool, nil. It follows redirects like every method; a take's timeout_ms
// lengthens its default deadline.
func (c *Client) Call(ctx context.Context, op string, fields map[string]any) (map[string]any, error) {
	var extra time.Duration
	if op == "take" {
		switch v := fields["timeout_ms"].(type) {
		case int:
			extra = time.Duration(v) * time.Millisecond
		case int64:
			extra = time.Duration(v) * time.Millisecond
		case uint64:
			extra = time.Duration(v) * time.Millisecond
		case float64:
			extra = time.Duration(v) * time.Millisecond
		}
	}
	resp, err := c.do(ctx, op, fields, extra)
	if err != nil {
		return nil, err
	}
	return resp.generic()
}

func ms(d time.Duration) int64 { return d.Milliseconds() }

func queueKey(queue, key string) map[string]any {
	f := map[string]any{"key": keyValue(key)}
	if queue != "" {
		f["queue"] = queue
	}
	return f
}

// Ping asks the current node for an empty answer.
func (c *Client) Ping(ctx context.Context) error {
	_, err := c.do(ctx, "ping", nil, 0)
	return err
}

// HelloInfo is hello's answer.
type HelloInfo struct {
	Session  uint64 `msgpack:"session"`
	NodeID   string `msgpack:"node_id"`
	Leader   string `msgpack:"leader"`
	Protocol int    `msgpack:"protocol"`
	Mode     string `msgpack:"mode"`
	Version  string `msgpack:"version"`
}

// Hello says hello again on the current connection, keeping its session. (The client
// already says hello on every new connection; this is for asking who answers.)
func (c *Client) Hello(ctx context.Context) (*HelloInfo, error) {
	f := map[string]any{}
	if c.opts.Token != "" {
		f["token"] = c.opts.Token
	}
	if cn := c.current(); cn != nil && cn.session != 0 {
		f["session"] = cn.session
	}
	resp, err := c.do(ctx, "hello", f, 0)
	if err != nil {
		return nil, err
	}
	var h HelloInfo
	err = msgpack.Unmarshal(mapOf(resp), &h)
	return &h, err
}

// mapOf re-assembles the raw result fields into one msgpack map, for typed decoding.
func mapOf(r *response) []byte {
	out := []byte{0xdf, 0, 0, 0, 0}
	n := len(r.Fields)
	out[1], out[2], out[3], out[4] = byte(n>>24), byte(n>>16), byte(n>>8), byte(n)
	for k, v := range r.Fields {
		kb, _ := msgpack.Marshal(k)
		out = append(append(out, kb...), v...)
	}
	return out
}

// QueueSettings are declare's fields; nil means "keep the current value".
type QueueSettings struct {
	Lead        *time.Duration
	TTR         *time.Duration
	MaxAttempts *int
	Retention   *time.Duration
	LateShare   *float64
	Autonomous  *bool
}

// Declare creates the queue or changes the given settings; it returns the settings after.
func (c *Client) Declare(ctx context.Context, queue string, s QueueSettings) (map[string]any, error) {
	f := map[string]any{"queue": queue}
	if s.Lead != nil {
		f["lead_ms"] = ms(*s.Lead)
	}
	if s.TTR != nil {
		f["ttr_ms"] = ms(*s.TTR)
	}
	if s.MaxAttempts != nil {
		f["max_attempts"] = *s.MaxAttempts
	}
	if s.Retention != nil {
		f["retention_ms"] = ms(*s.Retention)
	}
	if s.LateShare != nil {
		f["late_share"] = *s.LateShare
	}
	if s.Autonomous != nil {
		f["autonomous"] = *s.Autonomous
	}
	res, err := c.Call(ctx, "declare", f)
	if err != nil {
		return nil, err
	}
	settings, _ := res["settings"].(map[string]any)
	return settings, nil
}

// PutOptions: Mode "upsert" (default), "insert" or "update"; the task comes due at
// Time, or Delay after now by this machine's clock, or else now by the leader's clock.
type PutOptions struct {
	Mode  string
	Time  time.Time
	Delay time.Duration
}

// Put stores a task; payload is any Go value (one msgpack value) or a RawPayload.
func (c *Client) Put(ctx context.Context, queue, key string, payload any, o PutOptions) (uint64, error) {
	f := queueKey(queue, key)
	f["payload"] = payloadValue(payload)
	if o.Mode != "" {
		f["mode"] = o.Mode
	}
	if !o.Time.IsZero() {
		f["time"] = o.Time.UnixMilli()
	} else if o.Delay != 0 {
		f["time"] = time.Now().Add(o.Delay).UnixMilli()
	}
	return c.versionOf(ctx, "put", f)
}

// payloadValue makes nil an explicit msgpack nil (a put needs a payload).
func payloadValue(p any) any {
	if p == nil {
		return RawPayload{0xc0}
	}
	return p
}

func (c *Client) versionOf(ctx context.Context, op string, f map[string]any) (uint64, error) {
	resp, err := c.do(ctx, op, f, 0)
	if err != nil {
		return 0, err
	}
	var v uint64
	return v, resp.result("version", &v)
}

// Get reads a task; consistency "" or "local" reads this node's copy, "leader" is
// linearizable.
func (c *Client) Get(ctx context.Context, queue, key, consistency string) (*Task, error) {
	f := queueKey(queue, key)
	if consistency != "" {
		f["consistency"] = consistency
	}
	resp, err := c.do(ctx, "get", f, 0)
	if err != nil {
		return nil, err
	}
	t := &Task{Queue: queue}
	return t, resp.result("task", t)
}

// Delete removes a task whatever its status.
func (c *Client) Delete(ctx context.Context, queue, key string) error {
	_, err := c.do(ctx, "delete", queueKey(queue, key), 0)
	return err
}

// TakeOptions: Count (default 1), TTR (default the queue's), Timeout (0: answer at
// once; else wait that long for a task), KeepOnDisconnect (release_on_disconnect false:
// the lease outlives this connection's session).
type TakeOptions struct {
	Count            int
	TTR              time.Duration
	Timeout          time.Duration
	KeepOnDisconnect bool
}

// Take leases up to Count due tasks. An empty slice is a normal answer.
func (c *Client) Take(ctx context.Context, queue string, o TakeOptions) ([]*Task, error) {
	f := map[string]any{}
	if queue != "" {
		f["queue"] = queue
	}
	if o.Count > 0 {
		f["count"] = o.Count
	}
	if o.TTR > 0 {
		f["ttr_ms"] = ms(o.TTR)
	}
	if o.Timeout > 0 {
		f["timeout_ms"] = ms(o.Timeout)
	}
	if o.KeepOnDisconnect {
		f["release_on_disconnect"] = false
	}
	// The deadline covers the server's wait plus a normal call (§6).
	resp, err := c.do(ctx, "take", f, o.Timeout)
	if err != nil {
		return nil, err
	}
	var tasks []*Task
	if err := resp.result("tasks", &tasks); err != nil {
		return nil, err
	}
	for _, t := range tasks {
		t.Queue = queue
	}
	return tasks, nil
}

func leased(queue, key string, lease uint64) map[string]any {
	f := queueKey(queue, key)
	f["lease"] = lease
	return f
}

// Touch extends a lease to now + ttr (0: the queue's ttr); it returns lease_until.
func (c *Client) Touch(ctx context.Context, queue, key string, lease uint64, ttr time.Duration) (int64, error) {
	f := leased(queue, key, lease)
	if ttr > 0 {
		f["ttr_ms"] = ms(ttr)
	}
	resp, err := c.do(ctx, "touch", f, 0)
	if err != nil {
		return 0, err
	}
	var until int64
	return until, resp.result("lease_until", &until)
}

// AckOptions: Payload replaces the payload (nil keeps it); a non-zero Time makes the
// task ready again then (the recurring case), else it is done.
type AckOptions struct {
	Payload any
	Time    time.Time
}

// Ack completes a taken task.
func (c *Client) Ack(ctx context.Context, queue, key string, lease uint64, o AckOptions) (uint64, error) {
	f := leased(queue, key, lease)
	if o.Payload != nil {
		f["payload"] = o.Payload
	}
	if !o.Time.IsZero() {
		f["time"] = o.Time.UnixMilli()
	}
	return c.versionOf(ctx, "ack", f)
}

// Release gives a taken task back, ready again after delay.
func (c *Client) Release(ctx context.Context, queue, key string, lease uint64, delay time.Duration) error {
	f := leased(queue, key, lease)
	if delay > 0 {
		f["delay_ms"] = ms(delay)
	}
	_, err := c.do(ctx, "release", f, 0)
	return err
}

// Bury sets a taken task aside until a kick.
func (c *Client) Bury(ctx context.Context, queue, key string, lease uint64) error {
	_, err := c.do(ctx, "bury", leased(queue, key, lease), 0)
	return err
}

// Kick makes up to count buried tasks ready; it returns how many.
func (c *Client) Kick(ctx context.Context, queue string, count int) (uint64, error) {
	return c.kicked(ctx, map[string]any{"queue": queue, "count": count})
}

// KickKey makes one buried task ready (1) or leaves a task that is not buried (0).
func (c *Client) KickKey(ctx context.Context, queue, key string) (uint64, error) {
	return c.kicked(ctx, queueKey(queue, key))
}

func (c *Client) kicked(ctx context.Context, f map[string]any) (uint64, error) {
	resp, err := c.do(ctx, "kick", f, 0)
	if err != nil {
		return 0, err
	}
	var n uint64
	return n, resp.result("kicked", &n)
}

// QueueStats is stats of one queue.
type QueueStats struct {
	Queue      string `msgpack:"queue"`
	Ready      uint64 `msgpack:"ready"`
	Taken      uint64 `msgpack:"taken"`
	Buried     uint64 `msgpack:"buried"`
	Done       uint64 `msgpack:"done"`
	DueNow     uint64 `msgpack:"due_now"`
	NextDue    *int64 `msgpack:"next_due"`
	OldestLate *int64 `msgpack:"oldest_late"`
}

// Stats counts a queue's tasks; consistency "leader" asks the leader.
func (c *Client) Stats(ctx context.Context, queue, consistency string) (*QueueStats, error) {
	if queue == "" {
		queue = "default" // without a queue the server answers every queue's stats
	}
	f := map[string]any{"queue": queue}
	if consistency != "" {
		f["consistency"] = consistency
	}
	resp, err := c.do(ctx, "stats", f, 0)
	if err != nil {
		return nil, err
	}
	var s QueueStats
	return &s, msgpack.Unmarshal(mapOf(resp), &s)
}

// List pages through a queue's tasks of one status (fields: count, after, after_time,
// consistency). The answer is generic: {tasks: [...], after?, after_time?}.
func (c *Client) List(ctx context.Context, queue, status string, fields map[string]any) (map[string]any, error) {
	f := map[string]any{"queue": queue, "status": status}
	for k, v := range fields {
		f[k] = v
	}
	return c.Call(ctx, "list", f)
}

// Status, Members, Shards: the admin ops, answered by the current node.
func (c *Client) Status(ctx context.Context) (map[string]any, error) {
	return c.Call(ctx, "status", nil)
}
func (c *Client) Members(ctx context.Context) (map[string]any, error) {
	return c.Call(ctx, "members", nil)
}
func (c *Client) Shards(ctx context.Context) (map[string]any, error) {
	return c.Call(ctx, "shards", nil)
}
