package pipeline_test

import (
	"strings"
	"testing"
	"time"

	"github.com/dataloader/dataloader/internal/pipeline"
)

func getenv(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

func TestLoadSettingsDefaultsAndValues(t *testing.T) {
	s, err := pipeline.LoadSettings(getenv(nil))
	if err != nil || s.RetentionAge != 168*time.Hour || s.AlertQueue != "alerts" || s.AlertWebhookURL != "" || len(s.Schedules) != 0 {
		t.Fatalf("got %+v, %v; want the defaults", s, err)
	}
	dir := t.TempDir()
	s, err = pipeline.LoadSettings(getenv(map[string]string{
		"DL_RETENTION_HOURS":   "0",
		"DL_ALERT_WEBHOOK_URL": "https://hooks.example/alerts?token=secret",
		"DL_SCHEDULES_JSON":    `[{"name":"n","cron":"@hourly","queue":"q","task":"t"}]`,
		"DL_ETL_TARGETS_JSON":  `{"warehouse":"postgres://u:pw@db/wh"}`,
		"DL_ETL_FILE_DIR":      dir,
	}))
	if err != nil || s.RetentionAge != 0 || len(s.Schedules) != 1 || s.ETLTargets["warehouse"] == "" || s.ETLFileDir != dir {
		t.Fatalf("got %+v, %v; want the values", s, err)
	}
}

func TestLoadSettingsNamesEveryBadVariableWithoutEchoingSecrets(t *testing.T) {
	_, err := pipeline.LoadSettings(getenv(map[string]string{
		"DL_RETENTION_HOURS":   "-1",
		"DL_ALERT_WEBHOOK_URL": "not a url",
		"DL_SCHEDULES_JSON":    `[{"name":"n","cron":"bad","queue":"q","task":"t"}]`,
		"DL_ETL_TARGETS_JSON":  `{"warehouse": postgres://u:s3cret@db}`,
		"DL_ETL_FILE_DIR":      "/does/not/exist",
	}))
	if err == nil {
		t.Fatal("got nil, want errors")
	}
	for _, v := range []string{"DL_RETENTION_HOURS", "DL_ALERT_WEBHOOK_URL", "DL_SCHEDULES_JSON", "DL_ETL_TARGETS_JSON", "DL_ETL_FILE_DIR"} {
		if !strings.Contains(err.Error(), v+":") {
			t.Errorf("got %v, want a problem named %s", err, v)
		}
	}
	if strings.Contains(err.Error(), "s3cret") {
		t.Errorf("the error echoes a password: %v", err)
	}
}
