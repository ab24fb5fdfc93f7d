package dueq

import (
	"errors"
	"fmt"
)

// Outcome says whether a failed request may have been applied (docs/protocol.md §4).
type Outcome int

const (
	// NotApplied: the server (or the client, before sending) guarantees nothing changed.
	NotApplied Outcome = iota
	// Unknown: the op may or may not have been applied (timeout, internal, or a
	// connection that broke after the request was written).
	Unknown
)

func (o Outcome) String() string {
	if o == NotApplied {
		return "not_applied"
	}
	return "unknown"
}

// Error is every error this package returns for a request: the server's error codes,
// and connection failures spelled with the same vocabulary (§4: "unavailable" when no
// node could be reached or the connection broke, "timeout" when a written request got
// no answer before its deadline).
type Error struct {
	Code    string
	Message string
	Leader  string // error.leader of not_leader / wrong_shard, "" when absent
	Outcome Outcome
	cause   error // the underlying network or context error, if any
}

func (e *Error) Error() string {
	s := "dueq: " + e.Code
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.Leader != "" {
		s += " (leader " + e.Leader + ")"
	}
	if e.Outcome == Unknown {
		s += " [outcome unknown]"
	}
	return s
}

// Unwrap exposes the cause, so errors.Is(err, context.DeadlineExceeded) works.
func (e *Error) Unwrap() error { return e.cause }

// outcomeOf classifies a server error code by the table of §4. Codes this client does
// not know are treated as unknown: the safe assumption.
func outcomeOf(code string) Outcome {
	switch code {
	case "not_leader", "no_quorum", "unavailable", "unauthorized", "too_large",
		"bad_request", "wrong_shard", "store_full", "moving", "not_found", "exists", "lease_mismatch":
		return NotApplied
	}
	return Unknown
}

func notApplied(code string, cause error, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...), Outcome: NotApplied, cause: cause}
}

func unknown(code string, cause error, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...), Outcome: Unknown, cause: cause}
}

// IsNotApplied reports whether err is a dueq error that guarantees the op had no effect.
func IsNotApplied(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Outcome == NotApplied
}

// IsUnknown reports whether err leaves the op's outcome unknown. Errors that are not
// dueq errors count as unknown too: nothing proves they did not apply.
func IsUnknown(err error) bool {
	var e *Error
	if errors.As(err, &e) {
		return e.Outcome == Unknown
	}
	return err != nil
}

// IsCode reports whether err is a dueq error with that code.
func IsCode(err error, code string) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == code
}

// buryError marks a handler error that should bury the task instead of releasing it.
type buryError struct{ err error }

func (b *buryError) Error() string { return "bury: " + b.err.Error() }
func (b *buryError) Unwrap() error { return b.err }

// Bury wraps a handler's error so the Worker buries the task (set aside until a kick)
// instead of releasing it for another attempt.
func Bury(err error) error {
	if err == nil {
		err = errors.New("buried by handler")
	}
	return &buryError{err}
}

func isBury(err error) bool {
	var b *buryError
	return errors.As(err, &b)
}
