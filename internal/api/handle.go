package api

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"
	"go.uber.org/zap"
)

// handler is a route's handler: it answers a response, or an error that handle maps (errors.go) and
// writes. A handler that writes its answer itself (a stream, the dashboard proxy, a redirect) returns
// no response; an error it returns before its first byte is written the same way as any other.
type handler func(c *gin.Context) (*response, error)

// response is what a handler answers when it succeeds: data in an envelope with code as the HTTP
// status; or, with contentType set, body as it is. header is set on the answer first.
type response struct {
	code        int
	data        any
	contentType string
	body        []byte
	header      http.Header
}

// ok answers data with 200.
func ok(data any) *response { return &response{code: http.StatusOK, data: data} }

// withCode answers data with a success status of its own.
func withCode(code int, data any) *response { return &response{code: code, data: data} }

// handle makes h a gin handler: the one place where a handler's answer or error is written.
func (s *Server) handle(h handler) gin.HandlerFunc {
	return func(c *gin.Context) {
		res, err := h(c)
		switch {
		case err != nil && c.Writer.Written():
			// The answer has started (a stream, a proxied body): its status cannot change any more.
			logger(c).Warn("request failed after its answer started", zap.Error(err))
		case err != nil:
			s.fail(c, err)
		case res != nil:
			s.write(c, res)
		}
	}
}

// abort answers err and stops the request's handlers: how a middleware refuses a request.
func (s *Server) abort(c *gin.Context, err error) {
	s.fail(c, err)
	c.Abort()
}

// write writes a handler's response.
func (s *Server) write(c *gin.Context, res *response) {
	for name, values := range res.header {
		for _, v := range values {
			c.Writer.Header().Add(name, v)
		}
	}
	if res.contentType != "" {
		// Its length known, the answer goes out whole, not in chunks.
		c.Writer.Header().Set("Content-Length", strconv.Itoa(len(res.body)))
		c.Data(res.code, res.contentType, res.body)
		return
	}
	s.respond(c, Envelope{Code: res.code, Msg: http.StatusText(res.code), Data: res.data})
}

// jsonContentType is the content type of every JSON answer.
const jsonContentType = "application/json; charset=utf-8"

// respond writes an envelope with its code as the HTTP status. The encoder marshals into a pooled
// buffer and writes it at once, so a list costs no body-sized allocation.
func (s *Server) respond(c *gin.Context, env Envelope) {
	c.Header("Content-Type", jsonContentType)
	c.Status(env.Code)
	if err := json.NewEncoder(c.Writer).Encode(env); err != nil {
		logger(c).Error("encoding the answer", zap.Error(err))
	}
}

// fail writes err as errorEnvelope maps it, logging what the client is not told.
func (s *Server) fail(c *gin.Context, err error) {
	env, internal := errorEnvelope(err)
	if internal {
		logger(c).Error("request failed", zap.Error(err))
	} else if env.Code >= 500 {
		logger(c).Warn("request failed", zap.Error(err))
	}
	s.respond(c, env)
}
