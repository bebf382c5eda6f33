package pipeline

import (
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/dataloader/dataloader/internal/job"
	"github.com/dataloader/dataloader/internal/worker"
)

// Deps is what the built-in pipelines need from the process.
type Deps struct {
	// DSN is the product's own database: etl.load's default target.
	DSN string
	// Targets are the other databases etl.load may write into, by name
	// (DL_ETL_TARGETS_JSON). Jobs name a target; they never carry a DSN.
	Targets map[string]string
	// FileDir is the directory file sources must live in (DL_ETL_FILE_DIR);
	// empty refuses file sources.
	FileDir string
	// Client makes the HTTP requests of sources and deliveries; nil uses a
	// client with connect, TLS and response-header timeouts.
	Client *http.Client
	// Log receives the pipelines' own log lines; nil discards them.
	Log *slog.Logger
}

var defaultClient = &http.Client{Transport: &http.Transport{
	Proxy:                 http.ProxyFromEnvironment,
	DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
	TLSHandshakeTimeout:   10 * time.Second,
	ResponseHeaderTimeout: time.Minute,
	MaxIdleConns:          100,
	MaxIdleConnsPerHost:   16,
	IdleConnTimeout:       90 * time.Second,
	ForceAttemptHTTP2:     true,
}}

func (d Deps) client() *http.Client {
	if d.Client != nil {
		return d.Client
	}
	return defaultClient
}

func (d Deps) log() *slog.Logger {
	if d.Log != nil {
		return d.Log
	}
	return slog.New(slog.DiscardHandler)
}

// ETLRetry is etl.load's backoff between attempts (a retried load resumes
// after its last committed chunk).
var ETLRetry job.RetryPolicy = job.Exponential{Base: 10 * time.Second, Cap: 10 * time.Minute, Jitter: 0.2}

// RegisterBuiltins adds etl.load and http.deliver to reg (demo.sleep is
// added by Register).
func RegisterBuiltins(reg *worker.Registry, d Deps) {
	reg.MustRegister(ETLTask, worker.Task{Handler: NewETL(d), Retry: ETLRetry})
	reg.MustRegister(DeliverTask, worker.Task{Handler: NewDeliver(d), Retry: DeliverRetry})
}
