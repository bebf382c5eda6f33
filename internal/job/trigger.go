package job

import (
	"bytes"
	"encoding/json"
	"strings"
	"time"
	"unicode/utf8"
)

// Limits on trigger fields. They keep rows and indexes small and bound what
// one request can make the database do.
const (
	MaxNameLen     = 128
	MaxKeyLen      = 512
	MaxArgsBytes   = 512 << 10
	MaxPriority    = 1 << 20
	MaxAttemptsCap = 1000
	MaxLeaseTTLSec = 24 * 3600
)

// TriggerParams asks for a new job. The zero value of an optional field
// means "use the default".
type TriggerParams struct {
	Queue          string
	Task           string
	Args           json.RawMessage
	IdempotencyKey *string
	LockKey        string
	PartitionKey   string
	Priority       *int
	AvailableAt    *time.Time
	MaxAttempts    *int
	LeaseTTLSec    *int
	Producer       *string
	// CoalesceKey, when set, makes this job supersede every queued (not
	// running) job with the same key: they are canceled at insert, with a
	// "superseded" event naming this job.
	CoalesceKey *string
}

// Defaults of a trigger's optional fields (the seed's column defaults).
const (
	DefaultPriority    = 100
	DefaultMaxAttempts = 5
)

// Validate checks p and returns the first problem as an Invalid error naming
// the field in the API's spelling.
func (p *TriggerParams) Validate() error {
	if err := validName("queue", p.Queue); err != nil {
		return err
	}
	if err := validName("task", p.Task); err != nil {
		return err
	}
	if p.LockKey == "" {
		return Invalid("lock_key", "is required")
	}
	if err := ValidText("lock_key", p.LockKey, MaxKeyLen); err != nil {
		return err
	}
	if err := ValidText("partition_key", p.PartitionKey, MaxKeyLen); err != nil {
		return err
	}
	if p.IdempotencyKey != nil {
		if *p.IdempotencyKey == "" {
			return Invalid("idempotency_key", "must not be empty when given")
		}
		if err := ValidText("idempotency_key", *p.IdempotencyKey, MaxKeyLen); err != nil {
			return err
		}
	}
	if p.CoalesceKey != nil {
		if *p.CoalesceKey == "" {
			return Invalid("coalesce_key", "must not be empty when given")
		}
		if err := ValidText("coalesce_key", *p.CoalesceKey, MaxKeyLen); err != nil {
			return err
		}
	}
	if p.Producer != nil {
		if err := ValidText("producer", *p.Producer, MaxKeyLen); err != nil {
			return err
		}
	}
	if len(p.Args) > MaxArgsBytes {
		return Invalid("args", "must be at most %d bytes of JSON", MaxArgsBytes)
	}
	if len(bytes.TrimSpace(p.Args)) > 0 {
		var v any
		dec := json.NewDecoder(bytes.NewReader(p.Args))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil {
			return Invalid("args", "must be valid JSON: %v", err)
		}
		if _, ok := v.(map[string]any); !ok {
			return Invalid("args", "must be a JSON object")
		}
		if hasNUL(v) {
			return Invalid("args", "must not contain the character U+0000")
		}
	}
	if p.Priority != nil && (*p.Priority < 0 || *p.Priority > MaxPriority) {
		return Invalid("priority", "must be between 0 and %d", MaxPriority)
	}
	if p.MaxAttempts != nil && (*p.MaxAttempts < 1 || *p.MaxAttempts > MaxAttemptsCap) {
		return Invalid("max_attempts", "must be between 1 and %d", MaxAttemptsCap)
	}
	if p.LeaseTTLSec != nil && (*p.LeaseTTLSec < 1 || *p.LeaseTTLSec > MaxLeaseTTLSec) {
		return Invalid("lease_ttl_sec", "must be between 1 and %d", MaxLeaseTTLSec)
	}
	return nil
}

func validName(field, v string) error {
	if v == "" {
		return Invalid(field, "is required")
	}
	return ValidText(field, v, MaxNameLen)
}

// ValidText checks that a text value can be stored: valid UTF-8 without
// U+0000 (which PostgreSQL text refuses), at most maxLen bytes.
func ValidText(field, v string, maxLen int) error {
	if len(v) > maxLen {
		return Invalid(field, "must be at most %d bytes", maxLen)
	}
	if !utf8.ValidString(v) || strings.ContainsRune(v, 0) {
		return Invalid(field, "must be valid UTF-8 without the character U+0000")
	}
	return nil
}

// hasNUL reports whether a decoded JSON value holds U+0000 in any string or
// key (PostgreSQL's jsonb refuses it).
func hasNUL(v any) bool {
	switch x := v.(type) {
	case string:
		return strings.ContainsRune(x, 0)
	case []any:
		for _, e := range x {
			if hasNUL(e) {
				return true
			}
		}
	case map[string]any:
		for k, e := range x {
			if strings.ContainsRune(k, 0) || hasNUL(e) {
				return true
			}
		}
	}
	return false
}
