package serve

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"
)

// promMetrics counts requests for Prometheus' text format. A few counters
// do not need the client library: the format is lines of text.
type promMetrics struct {
	mu       sync.Mutex
	requests map[reqKey]*reqStats
}

type reqKey struct {
	method, route string
	status        int
}

type reqStats struct {
	count   uint64
	seconds float64
}

func newPromMetrics() *promMetrics { return &promMetrics{requests: map[reqKey]*reqStats{}} }

func (m *promMetrics) observe(method, route string, status int, d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := reqKey{method, route, status}
	st := m.requests[k]
	if st == nil {
		st = &reqStats{}
		m.requests[k] = st
	}
	st.count++
	st.seconds += d.Seconds()
}

// serveMetrics answers GET /metrics in Prometheus' text format 0.0.4.
func (s *Server) serveMetrics(w http.ResponseWriter, r *http.Request) {
	var b strings.Builder
	gauge := func(name, help string, v any) {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s gauge\n%s %v\n", name, help, name, name, v)
	}
	counter := func(name, help string, v any) {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s counter\n%s %v\n", name, help, name, name, v)
	}
	rm := s.rt.Metrics()
	counter("boxlite_boxes_created_total", "Boxes created by this server's runtime.", rm.BoxesCreatedTotal)
	counter("boxlite_boxes_failed_total", "Box starts that failed.", rm.BoxesFailedTotal)
	counter("boxlite_commands_executed_total", "Exec requests sent to boxes.", rm.TotalCommandsExecuted)
	counter("boxlite_exec_errors_total", "Exec requests that never ran.", rm.TotalExecErrors)
	if infos, err := s.rt.List(r.Context()); err == nil {
		states := map[string]int{}
		for _, in := range infos {
			states[string(in.State)]++
		}
		b.WriteString("# HELP boxlite_boxes Boxes in the server's home, by state.\n# TYPE boxlite_boxes gauge\n")
		for _, st := range []string{"configured", "starting", "running", "stopping", "stopped"} {
			fmt.Fprintf(&b, "boxlite_boxes{state=%q} %d\n", st, states[st])
		}
	}
	running, retained := s.api.Executions()
	gauge("boxlite_executions_running", "Executions started through the API that run.", running)
	gauge("boxlite_executions_retained", "Ended executions whose status and unread output are kept.", retained)
	s.metrics.mu.Lock()
	keys := make([]reqKey, 0, len(s.metrics.requests))
	for k := range s.metrics.requests {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, c := keys[i], keys[j]
		if a.route != c.route {
			return a.route < c.route
		}
		if a.method != c.method {
			return a.method < c.method
		}
		return a.status < c.status
	})
	b.WriteString("# HELP boxlite_http_requests_total HTTP requests served, by route and status.\n# TYPE boxlite_http_requests_total counter\n")
	for _, k := range keys {
		fmt.Fprintf(&b, "boxlite_http_requests_total{method=%q,route=%q,code=\"%d\"} %d\n", k.method, k.route, k.status, s.metrics.requests[k].count)
	}
	b.WriteString("# HELP boxlite_http_request_seconds_sum Time spent serving requests, by route and status.\n# TYPE boxlite_http_request_seconds_sum counter\n")
	for _, k := range keys {
		fmt.Fprintf(&b, "boxlite_http_request_seconds_sum{method=%q,route=%q,code=\"%d\"} %g\n", k.method, k.route, k.status, s.metrics.requests[k].seconds)
	}
	s.metrics.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	w.Write([]byte(b.String()))
}
