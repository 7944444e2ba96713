// Command ray-service serves the ray-service REST API: it manages KubeRay's RayCluster, RayJob and
// RayService on Kubernetes for the openFuyao platform.
//
//	@title						ray-service API
//	@version					1.0
//	@description				Manages Ray on Kubernetes (KubeRay ray.io/v1) for openFuyao. Every JSON response is an
//	@description				envelope {code, msg, data} whose code is the HTTP status; errors add reason and details.
//	@BasePath					/
//	@securityDefinitions.apikey	Bearer
//	@in							header
//	@name						Authorization
//	@description				"Bearer <token>" (X-OpenFuyao-Authorization is read first when present)
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"ray-service/internal/app"
	"ray-service/internal/config"
)

func main() {
	cfg, err := config.Load(os.Args[1:])
	if err == nil {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
		err = app.Run(ctx, cfg)
		stop()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "ray-service:", err)
		os.Exit(1)
	}
}
