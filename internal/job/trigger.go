package job

import (
	"bytes"
	"encoding/json"
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
	if len(p.LockKey) > MaxKeyLen || !utf8.ValidString(p.LockKey) {
		return Invalid("lock_key", "must be valid UTF-8 of at most %d bytes", MaxKeyLen)
	}
	if len(p.PartitionKey) > MaxKeyLen {
		return Invalid("partition_key", "must be at most %d bytes", MaxKeyLen)
	}
	if p.IdempotencyKey != nil && (*p.IdempotencyKey == "" || len(*p.IdempotencyKey) > MaxKeyLen) {
		return Invalid("idempotency_key", "must be 1 to %d bytes when given", MaxKeyLen)
	}
	if len(p.Args) > MaxArgsBytes {
		return Invalid("args", "must be at most %d bytes of JSON", MaxArgsBytes)
	}
	if len(bytes.TrimSpace(p.Args)) > 0 {
		var v any
		if err := json.Unmarshal(p.Args, &v); err != nil {
			return Invalid("args", "must be a JSON object")
		}
		if _, ok := v.(map[string]any); !ok {
			return Invalid("args", "must be a JSON object")
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
	if len(v) > MaxNameLen || !utf8.ValidString(v) {
		return Invalid(field, "must be valid UTF-8 of at most %d bytes", MaxNameLen)
	}
	return nil
}
