// Package server is Core's HTTP surface: health and readiness probes,
// Prometheus metrics, and (as later issues add them) the REST API under
// /api/v1. Errors have one JSON shape: {"error":{"code","message","details"?}}.
package server

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/ballet/ballet/internal/door"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Pinger reports whether the database answers.
type Pinger interface {
	Ping(ctx context.Context) error
}

// Server routes Core's HTTP requests.
type Server struct {
	log  *slog.Logger
	db   Pinger
	mux  *http.ServeMux
	info func() map[string]any
}

// New returns the handler. info, if set, adds fields to /readyz (engine,
// leadership).
func New(log *slog.Logger, db Pinger, reg *prometheus.Registry, info func() map[string]any, api *API) *Server {
	s := &Server{log: log, db: db, mux: http.NewServeMux(), info: info}
	if api != nil {
		api.Register(s.mux)
		s.mux.Handle("GET /api/v1/openapi.json", door.Document(api.OpenAPI())) // built and encoded once
	}
	s.mux.HandleFunc("GET /healthz", s.healthz)
	s.mux.HandleFunc("GET /readyz", s.readyz)
	s.mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	s.mux.HandleFunc("/", door.NoRoute)
	return s
}

// ServeHTTP serves a request, turning a panic into a 500 that is logged
// once here.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			s.log.Error("panic serving request", "method", r.Method, "path", r.URL.Path, "panic", v)
			WriteError(w, http.StatusInternalServerError, "internal", "internal error")
		}
	}()
	s.mux.ServeHTTP(w, r)
}

// healthz answers while the process runs.
func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	WriteJSON(w, http.StatusOK, map[string]any{"status": "ok"})
}

// readyz answers 200 when the database answers, else 503.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
	defer cancel()
	body := map[string]any{"status": "ready"}
	if s.info != nil {
		for k, v := range s.info() {
			body[k] = v
		}
	}
	if err := s.db.Ping(ctx); err != nil {
		s.log.Warn("readiness check failed", "err", err)
		body["status"] = "unavailable"
		body["error"] = "database unreachable"
		WriteJSON(w, http.StatusServiceUnavailable, body)
		return
	}
	WriteJSON(w, http.StatusOK, body)
}

// WriteJSON writes v as JSON with the status.
func WriteJSON(w http.ResponseWriter, status int, v any) { door.Write(w, status, v) }

// ErrorBody is the one error shape of the API (the door kit's, shared with the
// Knowledge service).
type ErrorBody = door.ErrorBody

// ErrorDetail carries a machine code, a message and optional details.
type ErrorDetail = door.ErrorDetail

// WriteError writes the error shape.
func WriteError(w http.ResponseWriter, status int, code, msg string) {
	door.WriteError(w, status, code, msg)
}
