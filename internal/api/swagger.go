package api

import "github.com/gin-gonic/gin"

// swaggerRoutes serves the API documentation (see docs/swagger).
func (s *Server) swaggerRoutes(g *gin.RouterGroup) {}
