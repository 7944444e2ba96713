package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"

	"ray-service/internal/api"
	"ray-service/internal/certs"
	"ray-service/internal/config"
	"ray-service/internal/stream"
)

// serveUntilDone serves the API, the Ray dashboards' origin and the metrics until ctx ends or a server
// fails, then shuts down gracefully: not ready first (still serving, so that load balancers stop
// sending), then the streams ended, no new connections, and what is in flight let finish.
func serveUntilDone(ctx context.Context, cfg *config.Config, log *zap.Logger, deps api.Deps, gatherers prometheus.Gatherers, apiserver string,
	draining *drain, endStreams context.CancelFunc, detached *stream.Detached) error {
	srv := &http.Server{Addr: cfg.Listen, Handler: api.NewRouter(deps), ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout: cfg.ReadTimeout, WriteTimeout: cfg.WriteTimeout, IdleTimeout: cfg.IdleTimeout,
		// The request line and headers together; past it the server answers 431.
		MaxHeaderBytes: api.MaxHeaderBytes}
	// The Ray dashboards on an origin of their own: the same server but for its address and handler.
	var dashSrv *http.Server
	if cfg.DashboardListen != "" {
		dashSrv = &http.Server{Addr: cfg.DashboardListen, Handler: api.NewDashboardRouter(deps), ReadHeaderTimeout: 10 * time.Second,
			ReadTimeout: cfg.ReadTimeout, WriteTimeout: cfg.WriteTimeout, IdleTimeout: cfg.IdleTimeout, MaxHeaderBytes: api.MaxHeaderBytes}
	}

	if cfg.PprofListen != "" {
		go servePprof(cfg.PprofListen, log)
	}
	errc := make(chan error, 3)
	if cfg.MetricsListen != "" {
		msrv := &http.Server{Addr: cfg.MetricsListen, Handler: promhttp.HandlerFor(gatherers, promhttp.HandlerOpts{}),
			ReadHeaderTimeout: 10 * time.Second, ReadTimeout: cfg.ReadTimeout, WriteTimeout: cfg.WriteTimeout}
		defer func() { _ = msrv.Close() }()
		mln, err := listen(msrv)
		if err != nil {
			return err
		}
		go func() {
			log.Info("metrics listening", zap.String("address", cfg.MetricsListen))
			if err := msrv.Serve(mln); !errors.Is(err, http.ErrServerClosed) {
				errc <- fmt.Errorf("metrics server: %w", err)
			}
		}()
	}
	if cfg.TLSCertFile != "" {
		reloader, err := certs.New(cfg.TLSCertFile, cfg.TLSKeyFile, func(err error) {
			log.Error("reading the renewed serving certificate; the one before is still served", zap.Error(err))
		})
		if err != nil {
			return err
		}
		srv.TLSConfig = reloader.TLSConfig()
	}
	// Every address is taken before any is served: a port that is not free ends the start at once,
	// before the API answers ready, rather than a listener failing beside one that serves.
	ln, err := listen(srv)
	if err != nil {
		return err
	}
	var dashLn net.Listener
	if dashSrv != nil {
		dashSrv.TLSConfig = srv.TLSConfig
		if dashLn, err = listen(dashSrv); err != nil {
			_ = ln.Close()
			return err
		}
	}
	go func() {
		log.Info("listening", zap.String("address", cfg.Listen), zap.Bool("tls", srv.TLSConfig != nil), zap.String("apiserver", apiserver))
		errc <- serve(srv, ln)
	}()
	if dashSrv != nil {
		go func() {
			log.Info("Ray dashboards listening", zap.String("address", cfg.DashboardListen), zap.String("origin", cfg.DashboardOrigin))
			errc <- serve(dashSrv, dashLn)
		}()
	}
	select {
	case err := <-errc:
		if !errors.Is(err, http.ErrServerClosed) {
			return err
		}
	case <-ctx.Done():
	}
	// Not ready first, still serving, so that load balancers stop sending; then stop accepting and let
	// what is in flight finish.
	draining.start()
	log.Info("shutting down", zap.Duration("delay", cfg.ShutdownDelay), zap.Duration("timeout", cfg.ShutdownTimeout))
	select {
	case <-time.After(cfg.ShutdownDelay):
	case err := <-errc:
		return err
	}
	endStreams()
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	dashDone := make(chan error, 1)
	go func() {
		if dashSrv == nil {
			dashDone <- nil
			return
		}
		dashDone <- dashSrv.Shutdown(sctx)
	}()
	if err := srv.Shutdown(sctx); err != nil {
		return err
	}
	if err := <-dashDone; err != nil {
		return err
	}
	return detached.Wait(sctx)
}

// listen takes srv's address.
func listen(srv *http.Server) (net.Listener, error) {
	ln, err := net.Listen("tcp", srv.Addr)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", srv.Addr, err)
	}
	return ln, nil
}

// serve serves srv on ln, with TLS where it has a configuration for it.
func serve(srv *http.Server, ln net.Listener) error {
	if srv.TLSConfig != nil {
		return srv.ServeTLS(ln, "", "")
	}
	return srv.Serve(ln)
}

// drain turns readiness off once the service is told to stop.
type drain struct{ on atomic.Bool }

func (d *drain) start() { d.on.Store(true) }

// ready is check, unless the service is stopping.
func (d *drain) ready(check func(context.Context) error) func(context.Context) error {
	return func(ctx context.Context) error {
		if d.on.Load() {
			return errors.New("shutting down")
		}
		return check(ctx)
	}
}

// servePprof serves the Go profiler on a loopback address, apart from the API.
func servePprof(addr string, log *zap.Logger) {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	log.Info("profiler listening", zap.String("address", addr))
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	if err := srv.ListenAndServe(); err != nil {
		log.Error("profiler stopped", zap.Error(err))
	}
}
