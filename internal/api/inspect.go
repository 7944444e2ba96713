package api

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"

	"github.com/gin-gonic/gin"
	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"ray-service/internal/ray"
	"ray-service/internal/stream"
)

// Log request limits.
const (
	DefaultTailLines = 500
	MaxTailLines     = 10000
	MaxLimitBytes    = 10 << 20
)

// pods lists the pods of an object.
//
//	@Summary		Pods
//	@ID				listObjectPods
//	@Description	The Ray pods of the object (a RayJob's also its submitter pods; a RayService's those of its
//	@Description	active and pending clusters), head first, then workers, then submitters. Read as the caller.
//	@Description	A template has none.
//	@Tags			observe
//	@Produce		json
//	@Security		Bearer
//	@Param			namespace				path		string	true	"namespace"
//	@Param			kind					path		string	true	"kind"	Enums(rayclusters, rayjobs, rayservices, raycronjobs)
//	@Param			name					path		string	true	"name"
//	@Success		200						{object}	Envelope{data=[]ray.PodInfo}
//	@Failure		400,401,403,404,503,504	{object}	Envelope
//	@Router			/rest/ray/v1/namespaces/{namespace}/{kind}/{name}/pods [get]
func (s *Server) pods(c *gin.Context) (*response, error) {
	r, cur, err := s.resolve(c)
	if err != nil {
		return nil, err
	}
	out := []ray.PodInfo{}
	if cur.Instance != nil {
		pods, err := r.objects.Pods(c.Request.Context(), cur)
		if err != nil {
			return nil, err
		}
		for i := range pods {
			out = append(out, ray.Info(&pods[i]))
		}
	}
	return ok(out), nil
}

// events lists the events of an object.
//
//	@Summary		Events
//	@ID				listObjectEvents
//	@Description	Kubernetes events of the object, of its Ray cluster(s), of their pods and (RayJob) of the
//	@Description	submitter Job, newest first. Read as the caller.
//	@Tags			observe
//	@Produce		json
//	@Security		Bearer
//	@Param			namespace				path		string	true	"namespace"
//	@Param			kind					path		string	true	"kind"	Enums(rayclusters, rayjobs, rayservices, raycronjobs)
//	@Param			name					path		string	true	"name"
//	@Success		200						{object}	Envelope{data=[]ray.EventInfo}
//	@Failure		400,401,403,404,503,504	{object}	Envelope
//	@Router			/rest/ray/v1/namespaces/{namespace}/{kind}/{name}/events [get]
func (s *Server) events(c *gin.Context) (*response, error) {
	r, cur, err := s.resolve(c)
	if err != nil {
		return nil, err
	}
	events, err := r.objects.Events(c.Request.Context(), cur)
	if err != nil {
		return nil, err
	}
	return ok(events), nil
}

// logs streams the logs of one of the object's pods.
//
//	@Summary		Logs
//	@ID				getObjectLogs
//	@Description	Container logs through the Kubernetes API, as the caller, streamed as they are read. pod and
//	@Description	container must belong to the object (400 otherwise). Defaults: a RayJob's submitter pod
//	@Description	(container ray-job-submitter), else the head pod of the (active) cluster and its first
//	@Description	container. tailLines is at most 10000; limitBytes at most 10 MiB (also the default without
//	@Description	follow). follow=true streams until the client leaves, the service shuts down or max-log-follow-duration
//	@Description	(1 h) has passed; at most max-log-follows-per-caller (8) follows of one user (counted by the user
//	@Description	name the apiserver authenticates, whatever the token) and max-log-follows
//	@Description	(256) in all are open at once, 429 beyond. A pod that is
//	@Description	gone is 404; a container that has not started is 409 with its waiting reason.
//	@Tags			observe
//	@Produce		plain
//	@Produce		json
//	@Security		Bearer
//	@Param			namespace					path		string	true	"namespace"
//	@Param			kind						path		string	true	"kind"	Enums(rayclusters, rayjobs, rayservices, raycronjobs)
//	@Param			name						path		string	true	"name"
//	@Param			pod							query		string	false	"pod name"
//	@Param			container					query		string	false	"container name"
//	@Param			tailLines					query		int		false	"lines from the end"	default(500)	maximum(10000)
//	@Param			sinceSeconds				query		int		false	"only lines newer than this"
//	@Param			previous					query		bool	false	"the previous instance of the container"
//	@Param			limitBytes					query		int		false	"stop after this many bytes"	maximum(10485760)
//	@Param			follow						query		bool	false	"stream new lines"
//	@Success		200							{string}	string	"the log text"
//	@Failure		400,401,403,404,409,429,503	{object}	Envelope
//	@Router			/rest/ray/v1/namespaces/{namespace}/{kind}/{name}/logs [get]
func (s *Server) logs(c *gin.Context) (*response, error) {
	opts, err := logOptions(c)
	if err != nil {
		return nil, err
	}
	r, cur, err := s.resolve(c)
	if err != nil {
		return nil, err
	}
	if cur.Instance == nil {
		return nil, statusError(http.StatusConflict, metav1.StatusReasonConflict, "a template has no pods and no logs: start it first")
	}
	ctx := c.Request.Context()
	if opts.Follow {
		// A follow holds a place of its own, and ends when the client leaves, the service shuts down
		// or its time is up; the server's read and write deadlines, made for ordinary requests, are
		// lifted for it.
		release, err := s.Follows.AcquireFor(ctx, s.Authz, token(c))
		if err != nil {
			return nil, err
		}
		defer release()
		var cancel context.CancelFunc
		if d := s.Follows.MaxDuration(); d > 0 {
			ctx, cancel = context.WithTimeout(ctx, d)
		} else {
			ctx, cancel = context.WithCancel(ctx)
		}
		defer cancel()
		if s.Shutdown != nil {
			stop := context.AfterFunc(s.Shutdown, cancel)
			defer stop()
		}
		stream.LiftDeadlines(c.Writer)
	}
	stream, err := r.objects.OpenLogs(ctx, cur, c.Query("pod"), c.Query("container"), opts)
	if err != nil {
		return nil, err
	}
	defer stream.Close()
	c.Header("Content-Type", "text/plain; charset=utf-8")
	c.Header("X-Content-Type-Options", "nosniff")
	c.Header("X-Ray-Pod", stream.Pod)
	c.Header("X-Ray-Container", stream.Container)
	c.Status(http.StatusOK)
	c.Writer.WriteHeaderNow()
	c.Writer.Flush()
	copyLogs(ctx, c, stream, opts.Follow)
	return nil, nil
}

// copyLogs sends the lines of an open log stream as they are read: each at once while following, else
// whenever no more is read yet. It ends with the stream, or when ctx, the stream's, is done.
func copyLogs(ctx context.Context, c *gin.Context, stream io.Reader, follow bool) {
	lines := bufio.NewReaderSize(stream, 32<<10)
	for {
		line, err := lines.ReadSlice('\n')
		if len(line) > 0 {
			if _, werr := c.Writer.Write(line); werr != nil {
				return
			}
			if lines.Buffered() == 0 || follow {
				c.Writer.Flush()
			}
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			if !errors.Is(err, io.EOF) && ctx.Err() == nil {
				logger(c).Warn("log stream ended", zap.Error(err))
			}
			c.Writer.Flush()
			return
		}
	}
}
