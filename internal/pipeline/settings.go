package pipeline

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/dataloader/dataloader/internal/schedule"
)

// Settings are the pipelines', alerts', retention's and schedules'
// configuration. config.Load reads the variables; LoadSettings validates
// them with the same rules (defaults, one error per variable naming it).
type Settings struct {
	// RetentionAge is how long finished jobs are kept (DL_RETENTION_HOURS,
	// default 168); 0 keeps them forever.
	RetentionAge time.Duration
	// AlertWebhookURL receives a POST per final failure (DL_ALERT_WEBHOOK_URL);
	// empty: log and metric only.
	AlertWebhookURL string
	// AlertQueue is the queue of the alert deliveries (DL_ALERT_QUEUE,
	// default "alerts").
	AlertQueue string
	// Schedules are the periodic jobs (DL_SCHEDULES_JSON).
	Schedules []schedule.Spec
	// ETLTargets are the databases etl.load may write into besides the
	// product's own, by name (DL_ETL_TARGETS_JSON: {"name": "dsn"}).
	ETLTargets map[string]string
	// ETLFileDir is where etl.load may read files (DL_ETL_FILE_DIR); empty
	// refuses file sources.
	ETLFileDir string
}

// LogValue keeps the target DSNs (they hold passwords) and the webhook URL
// (it may hold a token) out of logs.
func (s Settings) LogValue() slog.Value {
	names := make([]string, 0, len(s.ETLTargets))
	for n := range s.ETLTargets {
		names = append(names, n)
	}
	return slog.GroupValue(slog.Duration("retention_age", s.RetentionAge),
		slog.Bool("alert_webhook", s.AlertWebhookURL != ""), slog.String("alert_queue", s.AlertQueue),
		slog.Int("schedules", len(s.Schedules)), slog.Any("etl_targets", names), slog.String("etl_file_dir", s.ETLFileDir))
}

// LoadSettings builds the settings from getenv (config.Config.PipelineVar
// in production).
func LoadSettings(getenv func(string) string) (Settings, error) {
	s := Settings{RetentionAge: 168 * time.Hour, AlertQueue: "alerts"}
	var errs []error
	bad := func(name, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", name, fmt.Sprintf(format, args...)))
	}
	if v := strings.TrimSpace(getenv("DL_RETENTION_HOURS")); v != "" {
		h, err := strconv.Atoi(v)
		if err != nil || h < 0 || h > 24*365*100 {
			bad("DL_RETENTION_HOURS", "must be a whole number of hours, 0 (keep forever) to 876000; got %q", v)
		}
		s.RetentionAge = time.Duration(h) * time.Hour
	}
	if v := strings.TrimSpace(getenv("DL_ALERT_WEBHOOK_URL")); v != "" {
		u, err := url.Parse(v)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("DL_ALERT_WEBHOOK_URL", "must be an absolute http or https URL")
		}
		s.AlertWebhookURL = v
	}
	if v := strings.TrimSpace(getenv("DL_ALERT_QUEUE")); v != "" {
		if len(v) > 128 {
			bad("DL_ALERT_QUEUE", "must be at most 128 bytes")
		}
		s.AlertQueue = v
	}
	if v := getenv("DL_SCHEDULES_JSON"); strings.TrimSpace(v) != "" {
		specs, err := schedule.Parse(v)
		if err != nil {
			bad("DL_SCHEDULES_JSON", "%v", err)
		}
		s.Schedules = specs
	}
	if v := strings.TrimSpace(getenv("DL_ETL_TARGETS_JSON")); v != "" {
		// Errors never echo the value: it holds passwords.
		if err := json.Unmarshal([]byte(v), &s.ETLTargets); err != nil {
			bad("DL_ETL_TARGETS_JSON", `must be a JSON object {"name": "postgres://…"}`)
		}
		for name, dsn := range s.ETLTargets {
			if name == "" || dsn == "" {
				bad("DL_ETL_TARGETS_JSON", "every target needs a name and a DSN")
			}
		}
	}
	if v := strings.TrimSpace(getenv("DL_ETL_FILE_DIR")); v != "" {
		if st, err := os.Stat(v); err != nil || !st.IsDir() {
			bad("DL_ETL_FILE_DIR", "%q is not a directory", v)
		}
		s.ETLFileDir = v
	}
	return s, errors.Join(errs...)
}
